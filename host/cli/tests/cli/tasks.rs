//! End to end: MCP tasks from `host run`, for plugins whose manifest allows them.

use serde_json::json;

use crate::mcp::Server;

#[test]
fn plugin_tasks_over_stdio() {
    let root = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(plugins.path(), &["greet", "hostile_loop"]).unwrap();
    std::fs::write(
        plugins.path().join("greet.toml"),
        "task_support = \"optional\"\n",
    )
    .unwrap();
    std::fs::write(
        plugins.path().join("hostile_loop.toml"),
        "task_support = \"required\"\n[limits]\ntask_timeout_ms = 300\n",
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut server = Server::start(
        root.path(),
        &[
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--cache-dir",
            cache.path().to_str().unwrap(),
            "--plugin-timeout",
            "5s",
            "--max-tasks-per-session",
            "2",
        ],
    );
    let init = server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(
        init["result"]["capabilities"]["tasks"].is_object(),
        "{init}"
    );
    let list = server.request(2, "tools/list", json!({}));
    for tool in list["result"]["tools"].as_array().unwrap() {
        let expected = match tool["name"].as_str().unwrap() {
            "greet" => json!({"taskSupport": "optional"}),
            "hostile_loop" => json!({"taskSupport": "required"}),
            _ => serde_json::Value::Null,
        };
        assert_eq!(tool["execution"], expected, "{tool}");
    }
    // A task of greet, then its result.
    let created = server.request(
        3,
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "Ada"}, "task": {}}),
    );
    let task = created["result"]["task"]["taskId"].clone();
    let result = server.request(4, "tasks/result", json!({"taskId": task}));
    assert_eq!(
        result["result"]["content"][0]["text"], "Hello, Ada!",
        "{result}"
    );
    // The loop runs only as a task, stopped at its manifest's task limit (below the
    // plugin's per-call 5 s), and then frees its place (greet's completed result keeps
    // the other of the session's two).
    let plain = server.request(5, "tools/call", json!({"name": "hostile_loop"}));
    assert_eq!(plain["error"]["code"], -32601, "{plain}");
    let looping = server.request(6, "tools/call", json!({"name": "hostile_loop", "task": {}}));
    let task = looping["result"]["task"]["taskId"].clone();
    let full = server.request(7, "tools/call", json!({"name": "greet", "task": {}}));
    assert_eq!(full["error"]["code"], -32000, "{full}");
    let result = server.request(8, "tasks/result", json!({"taskId": task}));
    assert_eq!(result["result"]["isError"], true, "{result}");
    assert_eq!(
        result["result"]["content"][0]["text"],
        "hostile_loop: the task ran past its time limit of 300ms and was stopped; ask for less work per task, or have the operator raise --task-timeout"
    );
    let again = server.request(9, "tools/call", json!({"name": "greet", "task": {}}));
    assert!(again["result"]["task"].is_object(), "{again}");
    // A built-in tool runs only as a plain call.
    let builtin = server.request(10, "tools/call", json!({"name": "list_files", "task": {}}));
    assert_eq!(builtin["error"]["code"], -32601, "{builtin}");
    let (code, _, _) = server.finish();
    assert_eq!(code, Some(0));
}
