//! End to end: the one-shot commands `host call` and `host tools`, and `--help`.

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

use serde_json::{json, Value};

use super::mcp::builtins_and_plan;
use crate::host;

fn call(root: &Path, args: &[&str]) -> Output {
    host()
        .arg("call")
        .arg("--root")
        .arg(root)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn host_call_prints_the_result_or_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();

    let output = call(root, &["write_file", r#"{"path":"x.md","content":"hi"}"#]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(std::fs::read_to_string(root.join("x.md")).unwrap(), "hi");

    let output = call(root, &["read_file", r#"{"path":"x.md"}"#]);
    assert_eq!(output.status.code(), Some(0));
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["content"], "1\thi\n");

    // A tool error: exit 1, kind and message on stderr, nothing on stdout.
    let output = call(root, &["nope"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "error [unknown_tool]: unknown tool \"nope\": no tool of that name is registered; call one of the tools you were offered\n"
    );

    let output = call(root, &["read_file", "{}"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error [invalid_arguments]: read_file: "),
        "{stderr}"
    );

    let output = call(root, &["delete_file", r#"{"path":"missing.md"}"#]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).starts_with("error ["));

    // Not JSON at all: a bad command line (exit 2), see messages.rs.
    let output = call(root, &["read_file", "{path"]);
    assert_eq!(output.status.code(), Some(2));

    // The plan tool only exists with --plan.
    let output = call(root, &["todo_write", r#"{"todos":[]}"#]);
    assert_eq!(output.status.code(), Some(1));
    let output = call(root, &["--plan", "todo_write", r#"{"todos":[]}"#]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result, json!({"todos": []}));
}

#[test]
fn host_call_reads_arguments_from_stdin() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("b.md"), "one\n").unwrap();
    let mut child = host()
        .args(["call", "--root"])
        .arg(dir.path())
        .args(["read_file", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"path":"b.md"}"#)
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["content"], "1\tone\n");
}

#[test]
fn host_tools_lists_definitions_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let output = host()
        .args(["tools", "--plan", "--json", "--root"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let definitions: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = definitions
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, builtins_and_plan());
    // Every built-in carries a title and its hints; only todo_write an output schema.
    for definition in &definitions {
        let keys: Vec<&String> = definition.as_object().unwrap().keys().collect();
        let expected: &[&str] = if definition["name"] == "todo_write" {
            &[
                "annotations",
                "description",
                "name",
                "output_schema",
                "parameters",
                "title",
            ]
        } else {
            &["annotations", "description", "name", "parameters", "title"]
        };
        assert_eq!(keys, expected, "{definition}");
    }
    assert_eq!(definitions[0]["title"], "Read file");
    assert_eq!(
        definitions[0]["annotations"],
        serde_json::json!({"readOnlyHint": true, "destructiveHint": false,
                           "idempotentHint": true, "openWorldHint": false})
    );

    // The human form: one line per tool, name first, same order.
    let output = host()
        .args(["tools", "--read-only", "--root"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    let names: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(names, ["read_file", "list_files", "grep", "glob"]);
    assert!(
        text.lines().all(|l| l.split_whitespace().count() > 1),
        "{text}"
    );
}

#[test]
fn help_shows_examples_and_bad_flags_exit_2() {
    for sub in ["run", "tools", "call", "inspect"] {
        let output = host().args([sub, "--help"]).output().unwrap();
        assert_eq!(output.status.code(), Some(0));
        let help = String::from_utf8(output.stdout).unwrap();
        assert!(help.contains("Examples:"), "{sub}: {help}");
        assert!(help.contains(&format!("host {sub} ")), "{sub}: {help}");
    }
    let output = host().args(["run", "--timeout", "soon"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("\"soon\" is not a duration"));
}
