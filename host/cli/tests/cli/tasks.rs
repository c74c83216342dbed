//! End to end: MCP tasks from `host run`, for plugins whose manifest allows them.

use serde_json::{json, Value};

use crate::mcp::Server;

/// `server.request`, reading past the `notifications/tasks/status` that come meanwhile
/// (a task ending is told to the session): the response and the (task, status) told.
fn request(
    server: &mut Server,
    id: i64,
    method: &str,
    params: Value,
) -> (Value, Vec<(Value, Value)>) {
    server.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    let mut told = Vec::new();
    loop {
        let message = server.receive();
        if message["method"] == "notifications/tasks/status" {
            told.push((
                message["params"]["taskId"].clone(),
                message["params"]["status"].clone(),
            ));
            continue;
        }
        assert_eq!(
            message["id"],
            json!(id),
            "response to the wrong request: {message}"
        );
        return (message, told);
    }
}

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
    let hello = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let init = request(&mut server, 1, "initialize", hello).0;
    assert!(
        init["result"]["capabilities"]["tasks"].is_object(),
        "{init}"
    );
    let list = request(&mut server, 2, "tools/list", json!({})).0;
    for tool in list["result"]["tools"].as_array().unwrap() {
        let expected = match tool["name"].as_str().unwrap() {
            "greet" => json!({"taskSupport": "optional"}),
            "hostile_loop" => json!({"taskSupport": "required"}),
            _ => serde_json::Value::Null,
        };
        assert_eq!(tool["execution"], expected, "{tool}");
    }
    // A task of greet, then its result.
    let (created, mut told) = request(
        &mut server,
        3,
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "Ada"}, "task": {}}),
    );
    let task = created["result"]["task"]["taskId"].clone();
    let (result, later) = request(&mut server, 4, "tasks/result", json!({"taskId": task}));
    // Its end is told once, before or after the client asks for the result.
    told.extend(later);
    assert_eq!(told, [(task, json!("completed"))]);
    assert_eq!(
        result["result"]["content"][0]["text"], "Hello, Ada!",
        "{result}"
    );
    // The loop runs only as a task, stopped at its manifest's task limit (below the
    // plugin's per-call 5 s), and then frees its place (greet's completed result keeps
    // the other of the session's two).
    let plain = request(
        &mut server,
        5,
        "tools/call",
        json!({"name": "hostile_loop"}),
    )
    .0;
    assert_eq!(plain["error"]["code"], -32601, "{plain}");
    let (looping, mut told) = request(
        &mut server,
        6,
        "tools/call",
        json!({"name": "hostile_loop", "task": {}}),
    );
    let task = looping["result"]["task"]["taskId"].clone();
    let (full, later) = request(
        &mut server,
        7,
        "tools/call",
        json!({"name": "greet", "task": {}}),
    );
    told.extend(later);
    assert_eq!(full["error"]["code"], -32000, "{full}");
    let (result, later) = request(&mut server, 8, "tasks/result", json!({"taskId": task}));
    told.extend(later);
    assert_eq!(told, [(task, json!("failed"))]);
    assert_eq!(result["result"]["isError"], true, "{result}");
    assert_eq!(
        result["result"]["content"][0]["text"],
        "hostile_loop: the task ran past its time limit of 300ms and was stopped; ask for less work per task, or have the operator raise --task-timeout"
    );
    let again = request(
        &mut server,
        9,
        "tools/call",
        json!({"name": "greet", "task": {}}),
    )
    .0;
    assert!(again["result"]["task"].is_object(), "{again}");
    // A built-in tool runs only as a plain call.
    let builtin = request(
        &mut server,
        10,
        "tools/call",
        json!({"name": "list_files", "task": {}}),
    )
    .0;
    assert_eq!(builtin["error"]["code"], -32601, "{builtin}");
    let (code, _, _) = server.finish();
    assert_eq!(code, Some(0));
}
