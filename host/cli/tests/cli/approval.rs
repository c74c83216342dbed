//! `--confirm` and `--confirm-timeout` end to end: the host asks the client's user
//! before a write runs, and never runs it unasked.

use std::process::Stdio;

use serde_json::{json, Value};

use crate::host;
use crate::mcp::Server;

fn initialize(server: &mut Server, elicitation: bool) {
    let capabilities = if elicitation {
        json!({"elicitation": {}})
    } else {
        json!({})
    };
    let response = server.request(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert_eq!(response["result"]["protocolVersion"], "2025-11-25");
}

fn call_line(id: i64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
}

fn text(response: &Value) -> (String, bool) {
    (
        response["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned(),
        response["result"]["isError"].as_bool().unwrap(),
    )
}

#[test]
fn confirm_destructive_asks_before_a_write_and_a_decline_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--confirm", "destructive"]);
    initialize(&mut server, true);
    server.send(call_line(
        1,
        "write_file",
        json!({"path": "a.txt", "content": "hi"}),
    ));
    let question = server.receive();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(
        question["params"]["message"],
        "Allow the tool \"write_file\" to run?\nArguments: {\"content\":\"hi\",\"path\":\"a.txt\"}"
    );
    server.send(json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}}));
    let answer = server.receive();
    assert_eq!(answer["id"], 1);
    let (message, error) = text(&answer);
    assert!(
        error && message.contains("not run: the user declined"),
        "{message}"
    );
    assert!(!dir.path().join("a.txt").exists());
    // A read-only tool is not asked about.
    let (_, error) = server.call(2, "list_files", json!({"path": "."}));
    assert!(!error);
    // Accepted: written.
    server.send(call_line(
        3,
        "write_file",
        json!({"path": "a.txt", "content": "hi"}),
    ));
    let question = server.receive();
    server.send(json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept"}}));
    let (_, error) = text(&server.receive());
    assert!(!error);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "hi"
    );
    let (code, _, _) = server.finish();
    assert_eq!(code, Some(0));
}

#[test]
fn a_client_that_cannot_ask_gets_the_write_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--confirm", "write_file"]);
    initialize(&mut server, false);
    let (message, error) = server.call(1, "write_file", json!({"path": "a.txt", "content": "hi"}));
    assert!(error, "{message}");
    assert!(
        message.contains("this client cannot ask its user"),
        "{message}"
    );
    assert!(!dir.path().join("a.txt").exists());
    let (code, _, _) = server.finish();
    assert_eq!(code, Some(0));
}

#[test]
fn a_confirm_name_that_is_no_tool_and_a_timeout_over_an_hour_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let output = host()
        .args(["run", "--confirm", "wrte_file", "--root"])
        .arg(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ne!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--confirm \"wrte_file\": no tool of that name is served"),
        "{stderr}"
    );
    let output = host()
        .args(["run", "--confirm-timeout", "2h"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("a confirm timeout must be more than 0 and at most 3600 s, got 7200 s"),
        "{stderr}"
    );
    let help = host().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--confirm <TOOL>") && help.contains("--confirm-timeout <DURATION>"),
        "{help}"
    );
}
