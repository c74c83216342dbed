//! End to end: `host run --watch`, plugins added, replaced and removed while a client is
//! connected.

use std::path::Path;

use serde_json::{json, Value};

use std::process::Stdio;

use super::mcp::{receive_until, Server};
use crate::host;

fn install_as(plugin: &str, dir: &Path, name: &str) {
    let staging = dir.join(format!(".{name}.partial"));
    std::fs::copy(toolhost_tests::plugin(plugin).wasm, &staging).unwrap();
    std::fs::rename(&staging, dir.join(format!("{name}.wasm"))).unwrap();
}

#[test]
fn watch_reloads_plugins_and_tells_the_client() {
    let root = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    // Shared by the runs of this test binary: each component compiles once per build.
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("watch-plugin-cache");
    install_as("greet", plugins.path(), "greet");
    let mut server = Server::start(
        root.path(),
        &[
            "--no-builtins",
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--cache-dir",
            cache.to_str().unwrap(),
            "--watch",
        ],
    );
    server.drain_stderr();
    let init = server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    // With --watch, plugins loaded later may bring prompts and resources (their catalog):
    // the server says it may offer them, that their lists may change, and that their
    // resources may be subscribed to.
    assert_eq!(
        init["result"]["capabilities"],
        json!({
            "tools": {"listChanged": true},
            "logging": {},
            "prompts": {"listChanged": true},
            "resources": {"listChanged": true, "subscribe": true},
            "completions": {},
        })
    );
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(
        server.request(2, "logging/setLevel", json!({"level": "info"}))["result"],
        json!({})
    );

    install_as("divide", plugins.path(), "calc");
    let is_change = |m: &Value| m["method"] == "notifications/tools/list_changed";
    // The client hears that the list changed, and the host's log line about it reaches
    // the client that asked for log lines, in either order: the line is forwarded as it
    // is logged, the change is announced by a task of its own. Nothing else comes.
    let is_added = |m: &Value| {
        m["params"]["data"]["message"]
            .as_str()
            .is_some_and(|text| text.starts_with("plugin calc added"))
    };
    let (first, mut seen) = receive_until(&mut server, |m| is_change(m) || is_added(m));
    let (_, between) = if is_change(&first) {
        receive_until(&mut server, is_added)
    } else {
        receive_until(&mut server, is_change)
    };
    seen.extend(between);
    assert!(
        seen.iter().all(|m| m["method"] == "notifications/message"),
        "{seen:?}"
    );
    // From here on only errors: info would bring a line per tool call.
    assert_eq!(
        server.request(30, "logging/setLevel", json!({"level": "error"}))["result"],
        json!({})
    );
    let list = server.request(3, "tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["greet", "divide"]);
    let (text, is_error) = server.call(4, "divide", json!({"value": 9, "by": 3}));
    assert_eq!((text.as_str(), is_error), ("3.0", false));

    // A broken new version: the old one keeps serving, and the client hears why.
    std::fs::write(plugins.path().join("calc.wasm"), b"garbage").unwrap();
    let (note, _) = receive_until(&mut server, |m| {
        m["method"] == "notifications/message" && m["params"]["level"] == "error"
    });
    let message = note["params"]["data"]["message"].as_str().unwrap();
    assert!(
        message.contains("old version keeps serving [divide]") && message.contains("calc.wasm"),
        "{message}"
    );
    let (text, _) = server.call(5, "divide", json!({"value": 1, "by": 4}));
    assert_eq!(text, "0.25");

    std::fs::remove_file(plugins.path().join("calc.wasm")).unwrap();
    receive_until(&mut server, is_change);
    let list = server.request(6, "tools/list", json!({}));
    assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 1);

    // A modern client on the same process: discovery says the list may change.
    let discover = server.request(
        7,
        "server/discover",
        json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }}),
    );
    assert_eq!(
        discover["result"]["capabilities"]["tools"]["listChanged"],
        true
    );
    assert_eq!(discover["result"]["resultType"], "complete");

    let (code, stderr, _) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("watching the plugins directory"),
        "{stderr}"
    );
}

#[test]
fn watch_needs_a_plugins_directory() {
    let root = tempfile::tempdir().unwrap();
    let output = host()
        .args(["run", "--watch", "--root"])
        .arg(root.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--plugins <DIR>"), "{stderr}");
}
