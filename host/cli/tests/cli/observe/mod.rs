//! End to end: `host run --audit-log FILE --metrics ADDR` with a plugin whose manifest
//! declares a secret: the audit records and the metrics count every call exactly, and
//! the secret never reaches the audit file.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::{json, Value};

use crate::mcp::Server;

mod traces;

/// Calls that succeed, and calls refused (a required argument missing).
const OK: usize = 5;
const REFUSED: usize = 3;

const SECRET: &str = "s3cr3t-config-value-never-logged";

/// A loopback port free now (bound, then let go).
fn free_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

fn scrape(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// The audit file's text once it holds `lines` lines (its writer writes a record within
/// 10 ms of its call's end), or as it is after 10 s.
fn audit_lines(path: &std::path::Path, lines: usize) -> String {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= lines || std::time::Instant::now() >= until {
            return text;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `host run --root ROOT` with `extra` flags and no input: asserts it refused to start,
/// and returns what it wrote to stderr.
fn refused_at_start(root: &std::path::Path, extra: &[&str]) -> String {
    let output = crate::host()
        .args(["run", "--root", root.to_str().unwrap()])
        .args(extra)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success(), "started with {extra:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A plugin directory holding plugin `name` with `manifest` as its manifest.
fn plugin_dir(name: &str, manifest: &str) -> tempfile::TempDir {
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(plugins.path(), &[name]).unwrap();
    std::fs::write(plugins.path().join(format!("{name}.toml")), manifest).unwrap();
    plugins
}

/// A plugin directory holding webfetch, granted HTTP to `origin` only.
pub(crate) fn webfetch_granted(origin: &str) -> tempfile::TempDir {
    plugin_dir("webfetch", &format!("[grants]\nhttp = [\"{origin}\"]\n"))
}

/// `name{labels} value` lines of `metric`.
fn series(text: &str, metric: &str) -> Vec<String> {
    text.lines()
        .filter(|line| line.starts_with(&format!("{metric}{{")))
        .map(str::to_owned)
        .collect()
}

#[test]
fn audit_and_metrics_account_for_every_call_of_a_plugin() {
    let root = tempfile::tempdir().unwrap();
    let plugins = plugin_dir(
        "greet",
        "[config.API_TOKEN]\nsecret = true\nrequired = true\n",
    );
    let cache = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let audit = logs.path().join("audit.jsonl");
    let metrics = free_port();
    let mut server = Server::start(
        root.path(),
        &[
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--cache-dir",
            cache.path().to_str().unwrap(),
            "--plugin-config",
            &format!("greet.API_TOKEN={SECRET}"),
            "--audit-log",
            audit.to_str().unwrap(),
            "--metrics",
            &metrics.to_string(),
        ],
    );
    server.drain_stderr();
    let init = server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    for n in 0..OK {
        let reply = server.request(
            10 + n as i64,
            "tools/call",
            json!({"name": "greet", "arguments": {"name": format!("Ada {n}\n{{\"forged\":1}}")}}),
        );
        assert_eq!(reply["result"]["isError"], false, "{reply}");
    }
    for n in 0..REFUSED {
        // `name` is required: refused before the plugin runs.
        let reply = server.request(
            100 + n as i64,
            "tools/call",
            json!({"name": "greet", "arguments": {}}),
        );
        assert_eq!(reply["result"]["isError"], true, "{reply}");
    }

    let text = audit_lines(&audit, OK + REFUSED);
    assert!(!text.contains(SECRET), "{text}");
    assert!(
        !text.contains("forged"),
        "arguments are hashed, not written: {text}"
    );
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), OK + REFUSED, "{text}");
    let digest = {
        use sha2::Digest as _;
        let bytes = std::fs::read(plugins.path().join("greet.wasm")).unwrap();
        let hash = sha2::Sha256::digest(&bytes);
        format!(
            "sha256:{}",
            hash.iter().map(|b| format!("{b:02x}")).collect::<String>()
        )
    };
    for (n, record) in records.iter().enumerate() {
        assert_eq!(record["tool"], "greet");
        assert_eq!(record["plugin"]["sha256"], digest, "{record}");
        assert!(record["plugin"]["file"]
            .as_str()
            .unwrap()
            .ends_with("greet.wasm"));
        let (outcome, ran) = if n < OK {
            ("ok", true)
        } else {
            ("refused", false)
        };
        assert_eq!(record["outcome"], outcome, "{record}");
        assert_eq!(record["ran"], ran, "{record}");
        assert_eq!(
            record["request"],
            if n < OK { 10 + n } else { 100 + n - OK }.to_string()
        );
    }

    let response = scrape(metrics);
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    assert_eq!(
        series(&response, "toolhost_tool_calls_total"),
        [
            format!(r#"toolhost_tool_calls_total{{tool="greet",outcome="ok"}} {OK}"#),
            format!(r#"toolhost_tool_calls_total{{tool="greet",outcome="refused"}} {REFUSED}"#),
        ]
    );
    assert!(
        response.contains("\ntoolhost_plugin_loads_total 1\n"),
        "{response}"
    );
    assert!(response.contains("\ntoolhost_sessions_open 1\n"));
    assert!(response.contains("\ntoolhost_tool_calls_queued 0\n"));
    // A fresh cache: the component was compiled, not found.
    assert!(response.contains("\ntoolhost_compile_cache_hits_total 0\n"));
    assert!(response.contains("\ntoolhost_compile_cache_misses_total 1\n"));
    assert!(
        response.contains("\ntoolhost_tool_calls_in_flight 0\n"),
        "{response}"
    );
    // The pool: no plugin call runs now.
    assert!(
        response.contains("\ntoolhost_plugin_calls_running 0\n"),
        "{response}"
    );
}

#[test]
fn a_symlinked_audit_log_or_a_public_metrics_address_is_refused_at_start() {
    let root = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let target = logs.path().join("elsewhere");
    std::fs::write(&target, "precious\n").unwrap();
    let link = logs.path().join("audit.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let stderr = refused_at_start(root.path(), &["--audit-log", link.to_str().unwrap()]);
    assert!(
        stderr.contains("is a symbolic link; give the path of the file itself"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");

    let stderr = refused_at_start(root.path(), &["--metrics", "0.0.0.0:0"]);
    assert!(
        stderr.contains("--metrics 0.0.0.0:0 is not a loopback address"),
        "{stderr}"
    );
}

#[test]
fn a_call_the_approval_policy_refuses_is_recorded_as_refused() {
    let root = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let audit = logs.path().join("audit.jsonl");
    let mut server = Server::start(
        root.path(),
        &[
            "--confirm",
            "write_file",
            "--audit-log",
            audit.to_str().unwrap(),
        ],
    );
    let init = server.request(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    // This client cannot ask its user: the write is refused before it runs.
    let (message, error) = server.call(1, "write_file", json!({"path": "a.txt", "content": "hi"}));
    assert!(error, "{message}");
    let (message, error) = server.call(2, "list_files", json!({}));
    assert!(!error, "{message}");
    let (code, _, _) = server.finish();
    assert_eq!(code, Some(0));
    let records: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["tool"], "write_file");
    assert_eq!(records[0]["outcome"], "refused");
    assert_eq!(records[0]["ran"], false);
    assert_eq!(records[0]["error_kind"], "failed");
    assert_eq!(records[1]["tool"], "list_files");
    assert_eq!(records[1]["outcome"], "ok");
    assert!(!root.path().join("a.txt").exists());
}

#[test]
fn an_audit_log_where_the_file_tools_reach_is_refused_at_start() {
    let root = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("sub")).unwrap();
    // A directory link from elsewhere into the root.
    std::os::unix::fs::symlink(root.path(), logs.path().join("into-root")).unwrap();
    for audit in [
        root.path().join("audit.jsonl"),
        root.path().join("sub/../audit.jsonl"),
        logs.path().join("into-root/audit.jsonl"),
    ] {
        let stderr = refused_at_start(root.path(), &["--audit-log", audit.to_str().unwrap()]);
        assert!(
            stderr.contains("where the file tools (and plugins granted files) reach"),
            "{stderr}"
        );
        assert!(!root.path().join("audit.jsonl").exists(), "nothing created");
    }
}

/// A loopback OTLP receiver answering 200: (its URL, the request bodies it got).
pub(crate) fn otlp_receiver() -> (String, std::sync::mpsc::Receiver<Vec<u8>>) {
    use std::io::BufRead;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Bounded: the test makes a few exports.
        for stream in listener.incoming().take(50) {
            let Ok(mut stream) = stream else { return };
            let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim_end().to_ascii_lowercase();
                if line.is_empty() {
                    break;
                }
                if let Some(value) = line.strip_prefix("content-length: ") {
                    length = value.parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
            if sender.send(body).is_err() {
                return;
            }
        }
    });
    (url, receiver)
}

pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// A server on 127.0.0.1 answering every request with `hello`, recording each request's
/// `traceparent` header (empty when none).
fn traceparent_server() -> (String, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Bounded: the test makes two requests.
        for stream in listener.incoming().take(10) {
            let Ok(mut stream) = stream else { return };
            let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
            let mut traceparent = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("traceparent") {
                        value.trim().clone_into(&mut traceparent);
                    }
                }
            }
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
            );
            if sender.send(traceparent).is_err() {
                return;
            }
        }
    });
    (origin, receiver)
}

#[test]
fn a_plugins_http_requests_are_counted_by_plugin_and_status_class() {
    let (origin, seen) = traceparent_server();
    let root = tempfile::tempdir().unwrap();
    let plugins = webfetch_granted(&origin);
    let cache = tempfile::tempdir().unwrap();
    let metrics = free_port();
    let mut server = Server::start(
        root.path(),
        &[
            "--no-builtins",
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--cache-dir",
            cache.path().to_str().unwrap(),
            "--plugin-http",
            &origin,
            "--plugin-http-allow-net",
            "127.0.0.1",
            "--metrics",
            &metrics.to_string(),
        ],
    );
    server.drain_stderr();
    let init = server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    for id in 2..4 {
        let reply = server.request(
            id,
            "tools/call",
            json!({"name": "fetch", "arguments": {"url": format!("{origin}/x")}}),
        );
        assert_eq!(reply["result"]["isError"], false, "{reply}");
        seen.recv_timeout(Duration::from_secs(10)).unwrap();
    }
    // Outside the plugin's grant: refused, never sent.
    let reply = server.request(
        4,
        "tools/call",
        json!({"name": "fetch", "arguments": {"url": "http://127.0.0.1:9/"}}),
    );
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    let response = scrape(metrics);
    assert_eq!(
        series(&response, "toolhost_plugin_http_requests_total"),
        [
            r#"toolhost_plugin_http_requests_total{plugin="webfetch",status="2xx"} 2"#,
            r#"toolhost_plugin_http_requests_total{plugin="webfetch",status="refused"} 1"#,
        ],
        "{response}"
    );
    let (code, stderr, _) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn tasks_created_and_ended_are_counted_in_the_metrics() {
    let root = tempfile::tempdir().unwrap();
    let plugins = plugin_dir("greet", "task_support = \"optional\"\n");
    let cache = tempfile::tempdir().unwrap();
    let metrics = free_port();
    let mut server = Server::start(
        root.path(),
        &[
            "--no-builtins",
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--cache-dir",
            cache.path().to_str().unwrap(),
            "--metrics",
            &metrics.to_string(),
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
    // Answers to `id`, past the task status notifications that come meanwhile.
    let mut answer = |id: i64, method: &str, params: Value| {
        server.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = server.receive();
            if message["id"] == json!(id) {
                return message;
            }
        }
    };
    let created = answer(
        2,
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "Ada"}, "task": {}}),
    );
    let task = created["result"]["task"]["taskId"].clone();
    let result = answer(3, "tasks/result", json!({"taskId": task}));
    assert_eq!(
        result["result"]["content"][0]["text"], "Hello, Ada!",
        "{result}"
    );
    let response = scrape(metrics);
    assert!(
        response.contains("\ntoolhost_tasks_created_total 1\n"),
        "{response}"
    );
    assert_eq!(
        series(&response, "toolhost_tasks_ended_total"),
        [
            r#"toolhost_tasks_ended_total{status="completed"} 1"#,
            r#"toolhost_tasks_ended_total{status="failed"} 0"#,
            r#"toolhost_tasks_ended_total{status="cancelled"} 0"#,
        ]
    );
    let (code, stderr, _) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
}

/// The audit record of each call lists what it touched: a plugin's file read (the path
/// as it named it), a plugin's web host (`host:port`, whatever the URL's path and query),
/// a built-in write's path; and nothing another call touched.
#[test]
fn audit_records_list_the_files_and_hosts_each_call_touched() {
    let (origin, seen) = traceparent_server();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("notes")).unwrap();
    std::fs::write(root.path().join("notes/todo.md"), "one two\nthree\n").unwrap();
    let plugins = webfetch_granted(&origin);
    toolhost_tests::install_without_manifests(plugins.path(), &["wordcount"]).unwrap();
    std::fs::write(
        plugins.path().join("wordcount.toml"),
        "[grants]\nfiles = \"read\"\n",
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let audit = logs.path().join("audit.jsonl");
    let mut server = Server::start(
        root.path(),
        &[
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--cache-dir",
            cache.path().to_str().unwrap(),
            "--plugin-http",
            &origin,
            "--plugin-http-allow-net",
            "127.0.0.1",
            "--plugin-files",
            "read",
            "--audit-log",
            audit.to_str().unwrap(),
        ],
    );
    server.drain_stderr();
    let init = server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    for (id, name, arguments) in [
        (2, "wordcount", json!({"path": "notes/todo.md"})),
        (3, "fetch", json!({"url": format!("{origin}/x?key=k3y")})),
        (
            4,
            "write_file",
            json!({"path": "out/new.md", "content": "hi"}),
        ),
    ] {
        let reply = server.request(
            id,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        );
        assert_eq!(reply["result"]["isError"], false, "{name}: {reply}");
    }
    seen.recv_timeout(Duration::from_secs(10)).unwrap();
    let text = audit_lines(&audit, 3);
    let (code, stderr, _) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 3, "{text}");
    let host = origin.trim_start_matches("http://");
    let touched = |record: &Value| {
        (
            record["tool"].as_str().unwrap().to_owned(),
            record.get("files_read").cloned(),
            record.get("files_written").cloned(),
            record.get("hosts").cloned(),
        )
    };
    assert_eq!(
        records.iter().map(touched).collect::<Vec<_>>(),
        [
            (
                "wordcount".to_owned(),
                Some(json!(["notes/todo.md"])),
                None,
                None
            ),
            ("fetch".to_owned(), None, None, Some(json!([host]))),
            (
                "write_file".to_owned(),
                None,
                Some(json!(["out/new.md"])),
                None
            ),
        ]
    );
    assert!(!text.contains("k3y"), "{text}");
}
