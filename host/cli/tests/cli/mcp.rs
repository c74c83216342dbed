//! End to end: the `host` binary as a child process, driven over real JSON-RPC on its
//! stdin/stdout (`host run`). The one-shot commands are in `oneshot.rs`, hot reload in
//! `watch.rs`; both use this file's [`Server`] and [`host`].

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};
use toolhost::tools::DEFAULT_TOOL_NAMES;

use crate::host;

/// The built-in file tools over a directory, in order (no `search`: a directory is not
/// searchable).
pub(crate) fn builtins() -> Vec<&'static str> {
    DEFAULT_TOOL_NAMES
        .into_iter()
        .filter(|name| *name != "search")
        .collect()
}

/// [`builtins`], then the plan tool.
pub(crate) fn builtins_and_plan() -> Vec<&'static str> {
    let mut names = builtins();
    names.push("todo_write");
    names
}

/// How long a test waits for one response before failing (not hanging).
pub(crate) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// A `host run` child process and a line reader on its stdout.
pub(crate) struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// The host's stderr so far, once [`Server::drain_stderr`] reads it.
    stderr_log: Option<(
        std::sync::Arc<std::sync::Mutex<String>>,
        thread::JoinHandle<()>,
    )>,
}

impl Server {
    pub(crate) fn start(root: &Path, extra: &[&str]) -> Server {
        Server::spawn(host().arg("run").arg("--root").arg(root).args(extra))
    }

    /// Starts `command` (a `host run` command line) with piped stdio.
    pub(crate) fn spawn(command: &mut Command) -> Server {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn host run");
        let stdout: ChildStdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Server {
            child,
            stdin,
            lines,
            stderr_log: None,
        }
    }

    /// Reads the host's stderr as it comes (a long-running server must never block on a
    /// full pipe), keeping it for failure messages.
    pub(crate) fn drain_stderr(&mut self) {
        let Some(stderr) = self.child.stderr.take() else {
            return;
        };
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = std::sync::Arc::clone(&log);
        let reader = thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut log = sink.lock().unwrap_or_else(|p| p.into_inner());
                log.push_str(&line);
                log.push('\n');
            }
        });
        self.stderr_log = Some((log, reader));
    }

    /// Waits up to `limit` until the host's stderr, read by [`Server::drain_stderr`],
    /// holds `needle` `count` times; whether it did.
    pub(crate) fn wait_for_log(&self, needle: &str, count: usize, limit: Duration) -> bool {
        let Some((log, _)) = &self.stderr_log else {
            return false;
        };
        let started = std::time::Instant::now();
        while started.elapsed() < limit {
            let seen = log
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .matches(needle)
                .count();
            if seen >= count {
                return true;
            }
            thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// The host process's id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub(crate) fn send(&mut self, message: Value) {
        self.send_line(&message.to_string());
    }

    /// The next line on stdout, as it is.
    pub(crate) fn receive_line(&mut self) -> String {
        self.lines
            .recv_timeout(RESPONSE_TIMEOUT)
            .expect("a response line within the timeout")
    }

    /// The next line on stdout, which must be one JSON object.
    pub(crate) fn receive(&mut self) -> Value {
        let line = self.receive_line();
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
    }

    pub(crate) fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let response = self.receive();
        assert_eq!(
            response["id"],
            json!(id),
            "response to the wrong request: {response}"
        );
        response
    }

    /// `tools/call` and its result's (text, isError).
    pub(crate) fn call(&mut self, id: i64, name: &str, arguments: Value) -> (String, bool) {
        let response = self.request(
            id,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        );
        let result = &response["result"];
        assert_eq!(
            result["content"].as_array().map(Vec::len),
            Some(1),
            "{response}"
        );
        assert_eq!(result["content"][0]["type"], "text", "{response}");
        (
            result["content"][0]["text"].as_str().unwrap().to_owned(),
            result["isError"].as_bool().unwrap(),
        )
    }

    /// Closes stdin and waits for the exit: (exit code, stderr, stdout lines left).
    pub(crate) fn finish(mut self) -> (Option<i32>, String, Vec<String>) {
        drop(self.stdin.take());
        let output = self.child.wait_with_output().expect("wait for host run");
        let rest = self.lines.try_iter().collect();
        let stderr = match self.stderr_log.take() {
            // Read as it came: complete once the reader has seen the end of the pipe.
            Some((log, reader)) => {
                let _ = reader.join();
                let log = log.lock().unwrap_or_else(|p| p.into_inner());
                log.clone()
            }
            None => String::from_utf8_lossy(&output.stderr).into_owned(),
        };
        (output.status.code(), stderr, rest)
    }
}

#[test]
fn mcp_session_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--plan"]);

    let init = server.request(
        1,
        "initialize",
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "cli_mcp test", "version": "1"},
        }),
    );
    assert_eq!(
        init,
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "protocolVersion": "2025-06-18",
            // With --root the files under it are also resources (and paths completions).
            "capabilities": {"tools": {"listChanged": false}, "logging": {}, "resources": {}, "completions": {}},
            "serverInfo": {"name": "wasm-toolhost", "version": env!("CARGO_PKG_VERSION")},
        }})
    );
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    // tools/list: the built-ins in spec order, then the plan tool.
    let list = server.request(2, "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, builtins_and_plan());
    for tool in tools {
        assert!(!tool["description"].as_str().unwrap().is_empty(), "{tool}");
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
    }
    let write_file = &tools[2];
    let required = write_file["inputSchema"]["required"].as_array().unwrap();
    assert!(
        required.contains(&json!("path")) && required.contains(&json!("content")),
        "{write_file}"
    );

    // write_file, then read_file gives the exact content back, and the file is on disk.
    let (_, is_error) = server.call(
        3,
        "write_file",
        json!({"path": "notes/a.md", "content": "alpha\nbeta\n"}),
    );
    assert!(!is_error);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes/a.md")).unwrap(),
        "alpha\nbeta\n"
    );
    let (text, is_error) = server.call(4, "read_file", json!({"path": "notes/a.md"}));
    assert!(!is_error, "{text}");
    let read: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(read["content"], "1\talpha\n2\tbeta\n", "{read}");
    assert_eq!(read["total_lines"], 2, "{read}");
    assert_eq!(read["truncated"], false, "{read}");

    // An unknown tool is a tool result with isError, naming the tool.
    let (text, is_error) = server.call(5, "no_such_tool", json!({}));
    assert!(is_error);
    assert_eq!(
        text,
        "unknown tool \"no_such_tool\": no tool of that name is registered; call one of the tools you were offered"
    );

    // Invalid arguments: a missing required field, and arguments that are not an object.
    let (text, is_error) = server.call(6, "read_file", json!({}));
    assert!(is_error);
    assert!(
        text.starts_with("read_file: ") && text.contains("\"path\""),
        "{text}"
    );
    let (text, is_error) = server.call(7, "read_file", json!("notes/a.md"));
    assert!(is_error);
    assert!(text.starts_with("read_file: "), "{text}");
    // Path escapes are refused as tool errors, not protocol errors.
    let (text, is_error) = server.call(8, "read_file", json!({"path": "../outside.md"}));
    assert!(is_error, "{text}");

    // Garbage: -32700 with id null, then the server still answers.
    server.send_line("this is not json {");
    let error = server.receive();
    assert_eq!(error["jsonrpc"], "2.0");
    assert_eq!(error["id"], Value::Null);
    assert_eq!(error["error"]["code"], -32700);
    assert_eq!(
        server.request(9, "ping", json!({})),
        json!({"jsonrpc": "2.0", "id": 9, "result": {}})
    );

    // Invalid request and unknown method.
    server.send(json!({"jsonrpc": "2.0", "id": 10}));
    let error = server.receive();
    assert_eq!(
        (error["id"].clone(), error["error"]["code"].clone()),
        (json!(10), json!(-32600))
    );
    let error = server.request(11, "prompts/list", json!({}));
    assert_eq!(error["error"]["code"], -32601);

    // The plan tool.
    let (text, is_error) = server.call(
        12,
        "todo_write",
        json!({"todos": [{"content": "write the test", "status": "in_progress"}]}),
    );
    assert!(!is_error, "{text}");
    let plan: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(plan["todos"][0]["content"], "write the test");

    // EOF on stdin: a clean exit, nothing else on stdout.
    let (code, stderr, rest) = server.finish();
    assert_eq!(code, Some(0), "stderr:\n{stderr}");
    assert!(rest.is_empty(), "unexpected stdout: {rest:?}");
    // Logs went to stderr: the session id, and at the default level (info) one line per
    // failed call with its turn id (four failed above); a call that succeeds logs nothing
    // there (the audit log records every call; -v shows each call's start and end).
    assert!(stderr.contains("session_id="), "{stderr}");
    assert_eq!(stderr.matches("tool call failed").count(), 4, "{stderr}");
    assert_eq!(stderr.matches("turn_id=").count(), 4, "{stderr}");
    assert!(!stderr.contains("tool call ok"), "{stderr}");
}

#[test]
fn resources_over_stdio_follow_the_root_flags() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("notes")).unwrap();
    std::fs::write(root.join("notes/todo.md"), "- ship it\n").unwrap();
    std::fs::write(root.join(".env"), "API_KEY=hunter2\n").unwrap();
    std::fs::write(root.join("big.md"), "x".repeat(2000)).unwrap();
    std::fs::write(dir.path().join("secret.md"), "TOP SECRET").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(dir.path().join("secret.md"), root.join("escape.md")).unwrap();
    let mut server = Server::start(&root, &["--hide-hidden", "--max-read-bytes", "1000"]);
    let list = server.request(1, "resources/list", json!({}));
    let uris: Vec<&str> = list["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, ["file:///big.md", "file:///notes/todo.md"], "{list}");
    let read = server.request(2, "resources/read", json!({"uri": "file:///notes/todo.md"}));
    assert_eq!(
        read["result"],
        json!({"contents": [{"uri": "file:///notes/todo.md", "mimeType": "text/markdown", "text": "- ship it\n"}]})
    );
    for (id, uri, code, words) in [
        (3, "file:///.env", -32602, "hidden path"),
        (4, "file:///%2e%2e/secret.md", -32602, "\"..\" segment"),
        (5, "file:///big.md", -32602, "over the 1000-byte read cap"),
        (6, "file:///gone.md", -32002, "Resource not found"),
        (7, "file:///escape.md", -32602, "denied"),
    ] {
        let answer = server.request(id, "resources/read", json!({"uri": uri}));
        assert_eq!(answer["error"]["code"], code, "{uri}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{uri}: {message}");
        assert!(!answer.to_string().contains("SECRET") && !answer.to_string().contains("hunter2"));
    }
    let templates = server.request(8, "resources/templates/list", json!({}));
    assert_eq!(
        templates["result"]["resourceTemplates"][0]["uriTemplate"],
        "file:///{path}"
    );
    let completion = server.request(
        9,
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "file:///{path}"}, "argument": {"name": "path", "value": "no"}}),
    );
    assert_eq!(
        completion["result"]["completion"],
        json!({"values": ["notes/todo.md"], "hasMore": false, "total": 1})
    );
    let (code, _, _) = server.finish();
    assert_eq!(code, Some(0));

    // Without the built-in file tools there is no root to offer: no resources.
    let mut server = Server::start(&root, &["--no-builtins", "--plan"]);
    let init = server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert_eq!(
        init["result"]["capabilities"],
        json!({"tools": {"listChanged": false}, "logging": {}})
    );
    let answer = server.request(2, "resources/list", json!({}));
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    let (code, _, _) = server.finish();
    assert_eq!(code, Some(0));
}

#[test]
fn concurrent_calls_are_all_answered() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
    let mut server = Server::start(dir.path(), &[]);
    for id in 0..16 {
        server.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "read_file", "arguments": {"path": "a.txt"}}}));
    }
    let mut ids: Vec<i64> = (0..16)
        .map(|_| server.receive()["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..16).collect::<Vec<_>>());
    let (code, stderr, _) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
}

/// Ids come back byte for byte (beyond u64, beyond f64, strings with escapes), and with
/// `--max-in-flight 1` the calls run one after the other and are all answered.
#[test]
fn exact_ids_and_in_flight_limit_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
    let mut server = Server::start(dir.path(), &["--max-in-flight", "1"]);
    let ids = [
        "18446744073709551616",
        "-9223372036854775809",
        "1e400",
        "0.10",
        r#""\u0078""#,
    ];
    for id in ids {
        server.send_line(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read_file","arguments":{{"path":"a.txt"}}}}}}"#
        ));
    }
    for id in ids {
        let line = server.receive_line();
        assert!(line.starts_with(&format!("{{\"id\":{id},")), "{id}: {line}");
        // (Not read as a `Value`: serde_json cannot hold 1e400.)
        assert!(line.ends_with(r#""isError":false}}"#), "{line}");
        assert!(line.contains(r#"\"content\":\"1\\tx\\n\""#), "{line}");
    }
    let (code, stderr, rest) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(rest.is_empty(), "{rest:?}");
    assert!(stderr.contains("max_in_flight=1"), "{stderr}");
}

#[test]
fn max_in_flight_zero_is_a_usage_error() {
    let output = host()
        .args(["run", "--max-in-flight", "0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("0 would let no tool call run; give at least 1 (default 64)"),
        "{stderr}"
    );
}

#[test]
fn eof_right_away_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let (code, stderr, rest) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(rest.is_empty());
}

#[test]
fn a_client_that_closes_its_reading_end_stops_the_host_though_stdin_stays_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = host()
        .arg("run")
        .arg("--root")
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn host run");
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
        .unwrap();
    stdin.flush().unwrap();
    // stdin stays open: the host must notice the broken output, not wait for input.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the host kept running after its output closed"
        );
        thread::sleep(Duration::from_millis(20));
    };
    drop(stdin);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("error: writing an MCP response failed (did the client exit?)"),
        "{stderr}"
    );
}

#[test]
fn bad_root_fails_at_startup() {
    let output = host()
        .args(["run", "--root", "/does/not/exist"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Said once: no OS error twice, no hint written for a model.
    assert_eq!(
        stderr,
        "error: --root /does/not/exist does not exist; pass an existing directory (it defaults to the current one)\n"
    );
}

/// The full session with plugins: built-ins in spec order followed by the plugin tools,
/// a plugin call, a built-in call, hostile plugins answered as isError results, greet
/// still working after each, and garbage lines.
#[test]
fn mcp_session_with_plugins() {
    let root = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install(
        plugins.path(),
        &[
            "greet",
            "divide",
            "hostile_loop",
            "hostile_panic",
            "hostile_alloc",
        ],
    )
    .unwrap();
    // A broken component next to them: reported, the others still load.
    std::fs::write(plugins.path().join("broken.wasm"), b"not a component").unwrap();
    std::fs::write(root.path().join("notes.md"), "one\ntwo\n").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let plugins_dir = plugins.path().to_str().unwrap();
    let cache_dir = cache.path().to_str().unwrap();
    let mut server = Server::start(
        root.path(),
        &[
            "--plugins",
            plugins_dir,
            "--cache-dir",
            cache_dir,
            "--plugin-timeout",
            "1s",
        ],
    );
    let init = server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "wasm-toolhost");
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let list = server.request(2, "tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let mut expected: Vec<&str> = builtins();
    expected.extend([
        "divide",
        "greet",
        "hostile_alloc",
        "hostile_loop",
        "hostile_panic",
    ]);
    assert_eq!(names, expected);

    let greet_works = |server: &mut Server, id: i64| {
        assert_eq!(
            server.call(id, "greet", json!({"name": "Ada"})),
            ("Hello, Ada!".to_owned(), false)
        );
    };
    greet_works(&mut server, 3);
    let (text, is_error) = server.call(4, "read_file", json!({"path": "notes.md"}));
    assert!(!is_error, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["content"],
        "1\tone\n2\ttwo\n"
    );

    let (text, is_error) = server.call(5, "hostile_loop", json!({}));
    assert!(is_error);
    assert!(
        text.starts_with("hostile_loop: timed out after 1s"),
        "{text}"
    );
    greet_works(&mut server, 6);
    let (text, is_error) = server.call(7, "hostile_panic", json!({"detail": "oops"}));
    assert!(is_error);
    assert!(text.contains("hostile panic: oops"), "{text}");
    greet_works(&mut server, 8);
    let (text, is_error) = server.call(9, "hostile_alloc", json!({}));
    assert!(is_error);
    assert!(text.contains("memory (64 MiB)"), "{text}");
    let (text, is_error) = server.call(10, "divide", json!({"by": 0}));
    assert!(is_error);
    assert!(text.contains("division by zero"), "{text}");
    greet_works(&mut server, 11);

    // Garbage lines get parse errors; the server keeps serving.
    for garbage in ["{{{", "[1,2", "\u{0}\u{1}"] {
        server.send_line(garbage);
        let response = server.receive();
        assert_eq!(response["error"]["code"], -32700, "{garbage:?}: {response}");
        assert_eq!(response["id"], Value::Null);
    }
    greet_works(&mut server, 12);

    let (code, stderr, rest) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(rest.is_empty(), "{rest:?}");
    assert!(stderr.contains("broken.wasm"), "{stderr}");
    for plugin in ["greet", "divide", "hostile_loop"] {
        assert!(
            stderr.contains(plugin),
            "no startup line for {plugin}: {stderr}"
        );
    }
}

/// Reads messages until one satisfies `wanted`, returning the ones before it too. Waits
/// up to two minutes for each: a reload compiles a component, slow on a loaded machine.
pub(crate) fn receive_until(
    server: &mut Server,
    wanted: impl Fn(&Value) -> bool,
) -> (Value, Vec<Value>) {
    let mut before = Vec::new();
    loop {
        let line = server
            .lines
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|err| {
                let log = server.stderr_log.as_ref().map_or_else(
                    || "(not read)".to_owned(),
                    |(log, _)| log.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                );
                panic!("no message within two minutes ({err}); before: {before:?}; host stderr:\n{log}")
            });
        let message: Value = serde_json::from_str(&line).unwrap();
        if wanted(&message) {
            return (message, before);
        }
        before.push(message);
    }
}
