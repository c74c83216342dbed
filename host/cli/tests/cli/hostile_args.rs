//! End to end: hostile arguments through the `host` binary over MCP. A 500 KB glob
//! pattern (which made globset panic, printing 32 MB of stderr per call) and a 15 MiB
//! argument echoed in an error come back as short argument errors, and stderr stays
//! small.

use std::io::Write;
use std::process::Stdio;

use serde_json::{json, Value};

/// Runs `host run` over `root`, sends `calls` as tools/call requests (ids 2, 3, ...) after
/// the handshake, closes stdin, and returns (each call's result, stderr).
fn session(root: &std::path::Path, calls: &[(&str, Value)]) -> (Vec<Value>, String) {
    let mut child = crate::host()
        .env("RUST_BACKTRACE", "0")
        .arg("run")
        .arg("--root")
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn host run");
    let mut input = vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "hostile_args", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ];
    for (index, (name, arguments)) in calls.iter().enumerate() {
        input.push(
            json!({"jsonrpc": "2.0", "id": index + 2, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}),
        );
    }
    let mut stdin = child.stdin.take().unwrap();
    // Written from a thread: the host answers while we write, and its stdout must drain.
    let writer = std::thread::spawn(move || {
        for message in input {
            stdin.write_all(message.to_string().as_bytes()).unwrap();
            stdin.write_all(b"\n").unwrap();
        }
    });
    let output = child
        .wait_with_output()
        .expect("host run exits at end of input");
    writer.join().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let mut results: Vec<(u64, Value)> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|response| response["id"].as_u64().is_some_and(|id| id >= 2))
        .map(|response| (response["id"].as_u64().unwrap(), response["result"].clone()))
        .collect();
    results.sort_by_key(|(id, _)| *id);
    (
        results.into_iter().map(|(_, result)| result).collect(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_500_kb_glob_and_a_15_mib_echo_come_back_short_with_little_stderr() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.md"), "x\n").unwrap();
    let (results, stderr) = session(
        dir.path(),
        &[
            ("glob", json!({"pattern": "a".repeat(500_000)})),
            (
                "grep",
                json!({"pattern": "x", "output_mode": "o".repeat(15 << 20)}),
            ),
            ("glob", json!({"pattern": "*.md"})),
        ],
    );
    assert_eq!(results.len(), 3, "{stderr}");
    let text = |result: &Value| result["content"][0]["text"].as_str().unwrap().to_owned();
    assert_eq!(results[0]["isError"], true);
    assert_eq!(
        text(&results[0]),
        "glob: argument \"pattern\" is 500000 bytes, over the 4096-byte limit for a pattern; use a shorter glob such as \"**/*.md\" or \"docs/*.{md,txt}\""
    );
    assert_eq!(results[1]["isError"], true);
    let echoed = text(&results[1]);
    assert!(
        echoed.starts_with("grep: argument \"output_mode\" must be one of"),
        "{}",
        &echoed[..200]
    );
    assert!(echoed.len() <= 64 * 1024, "{} bytes", echoed.len());
    assert!(
        echoed.ends_with(" more bytes cut)"),
        "{}",
        &echoed[echoed.len() - 200..]
    );
    // The host is still serving.
    assert_eq!(results[2]["isError"], false);
    assert!(text(&results[2]).contains("a.md"));
    // The log may quote each failed call's error (held to the 64 KiB result cap) once:
    // two of them, and a few lines, where the 500 KB glob alone used to print 32 MB.
    assert!(
        stderr.len() < 3 * 64 * 1024,
        "{} bytes of stderr: {}",
        stderr.len(),
        &stderr[..stderr.len().min(1000)]
    );
}
