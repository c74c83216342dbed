//! docs/guide.md's journeys 1 and 3, run as written: every `host` command quoted here must
//! appear in the guide word for word, and gives what the guide says it gives. (Journey 2,
//! the plugin author's, is host/cli/tests/cli_new.rs.)

use std::path::Path;
use std::process::{Output, Stdio};

use serde_json::{json, Value};

use super::mcp::Server;

fn guide() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/guide.md"))
        .expect("docs/guide.md")
}

/// The words of a command line as a shell splits it (only '...' quoting is used).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    out.push(std::mem::take(&mut current));
                    any = false;
                }
            }
            c => {
                current.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(current);
    }
    out
}

/// Runs `line` (a `host ...` line of the guide) in `dir`, after checking the guide has it.
fn run(guide: &str, dir: &Path, line: &str) -> Output {
    assert!(
        guide.lines().any(|l| l.trim() == line),
        "docs/guide.md no longer shows `{line}`"
    );
    let words = words(line);
    assert_eq!(words[0], "host");
    crate::host()
        .env("XDG_CACHE_HOME", dir.join(".cache"))
        .args(&words[1..])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run host")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The guide's `mkdir notes && printf ...` line, done here.
fn notes(dir: &Path) {
    std::fs::create_dir(dir.join("notes")).unwrap();
    std::fs::write(dir.join("notes/todo.md"), "# Todo\n- write the report\n").unwrap();
}

#[test]
fn journey_1_file_tools_over_a_folder() {
    let guide = guide();
    assert!(
        guide.contains("mkdir notes && printf '# Todo\\n- write the report\\n' > notes/todo.md")
    );
    let dir = tempfile::tempdir().unwrap();
    notes(dir.path());

    let tools = run(&guide, dir.path(), "host tools --root notes --read-only");
    assert_eq!(tools.status.code(), Some(0));
    let names: Vec<String> = stdout(&tools)
        .lines()
        .map(|line| line.split_whitespace().next().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["read_file", "list_files", "grep", "glob"]);

    let read = run(
        &guide,
        dir.path(),
        r#"host call --root notes read_file '{"path":"todo.md"}'"#,
    );
    assert_eq!(read.status.code(), Some(0));
    let result: Value = serde_json::from_slice(&read.stdout).unwrap();
    assert_eq!(result["content"], "1\t# Todo\n2\t- write the report\n");
    assert!(guide.contains(r#"`"1\t# Todo\n2\t- write the report\n"`"#));

    let grep = run(
        &guide,
        dir.path(),
        r#"host call --root notes grep '{"pattern":"report"}'"#,
    );
    assert_eq!(
        grep.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&grep.stderr)
    );
    let result: Value = serde_json::from_slice(&grep.stdout).unwrap();
    assert_eq!(
        result,
        json!({"matches": ["todo.md:2:- write the report"], "truncated": false})
    );

    // The MCP client entry: `host run` with those arguments serves the four read-only tools.
    let entry = r#"{"command": "/path/to/host", "args": ["run", "--root", "/home/me/notes", "--read-only", "--allow-ext", ".md"]}"#;
    assert!(guide.contains(entry));
    let mut server = Server::spawn(
        crate::host()
            .args(["run", "--root"])
            .arg(dir.path().join("notes"))
            .args(["--read-only", "--allow-ext", ".md"]),
    );
    server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "guide", "version": "1"}}),
    );
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let list = server.request(2, "tools/list", json!({}));
    let (code, stderr, _) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
    let served: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(served, ["read_file", "list_files", "grep", "glob"]);
}

#[test]
fn journey_3_a_plugin_i_did_not_write() {
    let guide = guide();
    let dir = tempfile::tempdir().unwrap();
    notes(dir.path());
    let dist = dir.path().join("plugins/dist");
    std::fs::create_dir_all(&dist).unwrap();
    toolhost_tests::install(&dist, &["greet", "divide", "wordcount"]).unwrap();

    let inspect = run(
        &guide,
        dir.path(),
        "host inspect plugins/dist/wordcount.wasm",
    );
    assert_eq!(inspect.status.code(), Some(0));
    let report = stdout(&inspect);
    // The guide shows the report; only the compile time line differs from run to run.
    let shown = guide
        .split("host inspect plugins/dist/wordcount.wasm\n```\n\n```text\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the guide shows the inspect report");
    let stable = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|line| {
                !line.trim_start().starts_with("compiled in")
                    && !line.trim_start().starts_with("cache hit")
            })
            .map(|line| line.replace(&dir.path().display().to_string(), "."))
            .collect()
    };
    assert_eq!(
        stable(&report),
        stable(shown),
        "host inspect printed:\n{report}"
    );
    assert!(report.contains("  file access: read (the host must allow it: --plugin-files read)\n"));

    let count = run(
        &guide,
        dir.path(),
        r#"host call --plugins plugins/dist --plugin-files read --root notes wordcount '{"path":"todo.md"}'"#,
    );
    assert_eq!(
        count.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&count.stderr)
    );
    let result: Value = serde_json::from_slice(&count.stdout).unwrap();
    assert_eq!(
        result,
        json!({"path": "todo.md", "lines": 2, "words": 6, "bytes": 26})
    );

    let divide = run(
        &guide,
        dir.path(),
        r#"host call --plugins plugins/dist --plugin-files read --root notes --plugin-timeout 2s --plugin-memory 32MiB divide '{"by":0}'"#,
    );
    assert_eq!(divide.status.code(), Some(1));
    let error = String::from_utf8_lossy(&divide.stderr);
    assert_eq!(error.lines().count(), 1, "{error}");
    let line = error.trim_end();
    assert!(
        guide.contains(&format!("```text\n{line}\n```")),
        "the guide should show:\n{line}"
    );
}
