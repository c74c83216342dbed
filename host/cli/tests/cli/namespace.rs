//! End to end: plugin tool namespaces through the CLI: `--plugin-namespace NAME=PREFIX`
//! on `host tools`, `host call` and `host inspect`, a manifest's `namespace`, the
//! operator's winning, hostile flag values refused, and `host run --watch` reloading a
//! plugin whose namespace changed.

use std::path::Path;

use serde_json::{json, Value};

use super::mcp::{receive_until, Server};
use crate::{host, text};

/// `greet` copied as `NAME.wasm` into `dir`, with `manifest` as `NAME.toml` if given.
fn install(dir: &Path, name: &str, manifest: Option<&str>) {
    std::fs::copy(
        toolhost_tests::plugin("greet").wasm,
        dir.join(format!("{name}.wasm")),
    )
    .unwrap();
    if let Some(manifest) = manifest {
        std::fs::write(dir.join(format!("{name}.toml")), manifest).unwrap();
    }
}

fn cache() -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("namespace-plugin-cache")
}

fn tool_names(plugins: &Path, extra: &[&str]) -> (Option<i32>, Vec<String>, String) {
    let root = tempfile::tempdir().unwrap();
    let output = host()
        .args([
            "tools",
            "--no-builtins",
            "--plugins",
            text(plugins),
            "--root",
        ])
        .arg(root.path())
        .args(["--cache-dir", text(&cache())])
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let names = stdout
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect();
    (
        output.status.code(),
        names,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn two_copies_of_a_plugin_load_under_namespaces_and_are_called_by_the_final_name() {
    let plugins = tempfile::tempdir().unwrap();
    install(plugins.path(), "greet", Some("namespace = \"aa\"\n"));
    install(plugins.path(), "hello", Some("namespace = \"bb\"\n"));
    // The operator's namespace replaces the manifest's.
    let (code, names, stderr) =
        tool_names(plugins.path(), &["--plugin-namespace", "hello.wasm=cc"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(names, ["aa_greet", "cc_greet"]);
    // A namespace for a plugin that is not there is said, not silently dropped.
    let (code, names, stderr) = tool_names(plugins.path(), &["--plugin-namespace", "helo=cc"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(names, ["aa_greet", "bb_greet"]);
    assert!(
        stderr.contains("a namespace is set for the plugin helo, but")
            && stderr.contains("holds no helo.wasm"),
        "{stderr}"
    );

    let root = tempfile::tempdir().unwrap();
    let output = host()
        .args([
            "call",
            "--no-builtins",
            "--plugins",
            text(plugins.path()),
            "--root",
        ])
        .arg(root.path())
        .args([
            "--cache-dir",
            text(&cache()),
            "bb_greet",
            r#"{"name":"Ada"}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result, "Hello, Ada!");
}

#[test]
fn a_collision_without_namespace_names_the_fix_and_inspect_shows_final_names() {
    let plugins = tempfile::tempdir().unwrap();
    install(plugins.path(), "greet", None);
    install(plugins.path(), "hello", None);
    let (code, names, stderr) = tool_names(plugins.path(), &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(names, ["greet"]);
    assert!(
        stderr.contains("declares tool \"greet\", but the plugin")
            && stderr.contains("--plugin-namespace NAME=PREFIX"),
        "{stderr}"
    );

    let output = host()
        .args([
            "inspect",
            "--json",
            "--plugin-namespace",
            "hello=gh",
            "--cache-dir",
        ])
        .arg(cache())
        .arg(plugins.path().join("hello.wasm"))
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let info: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(info["namespace"], "gh");
    assert_eq!(info["tools"][0]["name"], "gh_greet");
    let output = host()
        .args(["inspect", "--plugin-namespace", "hello=gh", "--cache-dir"])
        .arg(cache())
        .arg(plugins.path().join("hello.wasm"))
        .output()
        .unwrap();
    let report = String::from_utf8(output.stdout).unwrap();
    assert!(
        report.contains("  namespace: gh (tools and prompts offered as gh_NAME)\n"),
        "{report}"
    );
    assert!(report.contains("    gh_greet "), "{report}");
}

#[test]
fn hostile_namespace_flags_are_refused_at_the_command_line() {
    let long = format!("greet={}", "a".repeat(10 * 1024));
    for (value, expected) in [
        ("greet=g/h", "may hold only a-z and 0-9"),
        ("greet=g h", "may hold only a-z and 0-9"),
        ("greet=gé", "may hold only a-z and 0-9"),
        ("greet=g_h", "may hold only a-z and 0-9"),
        ("greet=", "the namespace is empty"),
        ("greet", "write NAME=PREFIX"),
        ("=gh", "the plugin's name before = is empty"),
        (
            long.as_str(),
            "the namespace is 10240 characters long; the most is 32",
        ),
    ] {
        let output = host()
            .args(["tools", "--plugin-namespace", value])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{value}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{value}: {stderr}");
        assert!(
            stderr.len() < 11 * 1024,
            "{value}: echoes at most the value once"
        );
    }
}

#[test]
fn watch_reloads_a_plugin_whose_namespace_changed() {
    let root = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    install(plugins.path(), "greet", Some("namespace = \"aa\"\n"));
    let mut server = Server::start(
        root.path(),
        &[
            "--no-builtins",
            "--plugins",
            text(plugins.path()),
            "--cache-dir",
            text(&cache()),
            "--watch",
        ],
    );
    server.drain_stderr();
    server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let names = |list: &Value| -> Vec<String> {
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        names(&server.request(2, "tools/list", json!({}))),
        ["aa_greet"]
    );

    std::fs::write(plugins.path().join("greet.toml"), "namespace = \"bb\"\n").unwrap();
    receive_until(&mut server, |m| {
        m["method"] == "notifications/tools/list_changed"
    });
    assert_eq!(
        names(&server.request(3, "tools/list", json!({}))),
        ["bb_greet"]
    );
    let (text, is_error) = server.call(4, "bb_greet", json!({"name": "Ada"}));
    assert_eq!((text.as_str(), is_error), ("Hello, Ada!", false));
    let old = server.request(
        5,
        "tools/call",
        json!({"name": "aa_greet", "arguments": {"name": "Ada"}}),
    );
    assert!(
        old["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("aa_greet"))
            || old["result"]["isError"] == true,
        "the old name is gone: {old}"
    );
    let (code, stderr, _) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
}
