//! End to end: `host run --audit-log FILE --metrics ADDR` with a plugin whose manifest
//! declares a secret: the audit records and the metrics count every call exactly, and
//! the secret never reaches the audit file.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::{json, Value};

use crate::mcp::Server;

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
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(plugins.path(), &["greet"]).unwrap();
    std::fs::write(
        plugins.path().join("greet.toml"),
        "[config.API_TOKEN]\nsecret = true\nrequired = true\n",
    )
    .unwrap();
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
    let output = crate::host()
        .args([
            "run",
            "--root",
            root.path().to_str().unwrap(),
            "--audit-log",
            link.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("is a symbolic link; give the path of the file itself"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");

    let output = crate::host()
        .args([
            "run",
            "--root",
            root.path().to_str().unwrap(),
            "--metrics",
            "0.0.0.0:0",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
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
        let output = crate::host()
            .args([
                "run",
                "--root",
                root.path().to_str().unwrap(),
                "--audit-log",
                audit.to_str().unwrap(),
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{}", audit.display());
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

#[test]
fn host_run_exports_a_span_per_call_parented_by_the_clients_traceparent() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "hello").unwrap();
    let (url, bodies) = otlp_receiver();
    let mut server = Server::start(root.path(), &["--otlp-endpoint", &url]);
    server.drain_stderr();
    let init = server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let reply = server.request(
        2,
        "tools/call",
        json!({"name": "list_files", "arguments": {"path": "."}, "_meta": {"traceparent": parent}}),
    );
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    // A malformed, huge traceparent is ignored: the call runs.
    let huge = format!("{parent}{}", "0".repeat(100_000));
    let reply = server.request(
        3,
        "tools/call",
        json!({"name": "list_files", "arguments": {"path": "."}, "_meta": {"traceparent": huge}}),
    );
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    // The end of input flushes what is queued.
    let (code, stderr, _) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
    let mut all = Vec::new();
    while let Ok(body) = bodies.recv_timeout(Duration::from_secs(5)) {
        all.extend(body);
        let name = b"tools/call list_files";
        if all.windows(name.len()).filter(|w| *w == name).count() >= 2 {
            break;
        }
    }
    let trace_id = [
        0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47,
        0x36,
    ];
    let span_id = [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7];
    let name = b"tools/call list_files";
    assert_eq!(
        all.windows(name.len()).filter(|w| *w == name).count(),
        2,
        "one span per call"
    );
    let child = b"execute_tool list_files";
    assert_eq!(
        all.windows(child.len()).filter(|w| *w == child).count(),
        2,
        "a child span per handler run"
    );
    assert!(
        contains(&all, &trace_id),
        "the span carries the client's trace id"
    );
    // parent_span_id is field 4, 8 bytes long: 0x22 0x08.
    assert!(contains(&all, &[&[0x22, 0x08][..], &span_id].concat()));
    assert!(contains(&all, b"network.transport"));
    assert!(contains(&all, b"pipe"));
    assert!(
        !contains(&all, b"a.txt"),
        "no arguments or results in spans"
    );
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

/// `host run` with webfetch and a collector; one fetch with the client's `traceparent`:
/// (what the server behind the plugin saw as `traceparent`, the collector's bytes).
fn fetch_with_traceparent(extra: &[&str], parent: &str) -> (String, Vec<u8>) {
    let (origin, seen) = traceparent_server();
    let (collector, bodies) = otlp_receiver();
    let root = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(plugins.path(), &["webfetch"]).unwrap();
    std::fs::write(
        plugins.path().join("webfetch.toml"),
        format!("[grants]\nhttp = [\"{origin}\"]\n"),
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--no-builtins",
        "--plugins",
        plugins.path().to_str().unwrap(),
        "--cache-dir",
        cache.path().to_str().unwrap(),
        "--plugin-http",
        &origin,
        "--plugin-http-allow-net",
        "127.0.0.1",
        "--otlp-endpoint",
        &collector,
    ];
    args.extend(extra);
    let mut server = Server::start(root.path(), &args);
    server.drain_stderr();
    let init = server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    let reply = server.request(
        2,
        "tools/call",
        json!({"name": "fetch", "arguments": {"url": format!("{origin}/x")}, "_meta": {"traceparent": parent}}),
    );
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    let header = seen.recv_timeout(Duration::from_secs(10)).unwrap();
    let (code, stderr, _) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
    let mut all = Vec::new();
    while let Ok(body) = bodies.recv_timeout(Duration::from_secs(2)) {
        all.extend(body);
    }
    (header, all)
}

#[test]
fn a_plugins_request_carries_the_calls_traceparent_unless_turned_off() {
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let (header, spans) = fetch_with_traceparent(&[], parent);
    // The client's trace, with the request's own CLIENT span as parent (W3C: the
    // downstream server's parent is the span of the request that reached it).
    assert_eq!(header.len(), 55, "{header:?}");
    assert_eq!(&header[..36], &parent[..36], "{header}");
    assert_eq!(&header[52..], "-01");
    assert_ne!(
        &header[36..52],
        &parent[36..52],
        "a span of the host's, not the client's"
    );
    let own: Vec<u8> = (0..8)
        .map(|i| u8::from_str_radix(&header[36 + 2 * i..38 + 2 * i], 16).unwrap())
        .collect();
    // The exported span whose span_id (field 2, 8 bytes) the header named is the
    // request's: its parent_span_id (field 4, 8 bytes), then its name (field 5) `GET`
    // and its kind (field 6) CLIENT (3).
    let named = [&[0x12, 0x08][..], &own].concat();
    let at = spans
        .windows(named.len())
        .position(|w| w == named)
        .expect("the exported spans have the id the request named");
    let after = &spans[at + named.len()..];
    assert_eq!(&after[..2], &[0x22, 0x08], "a parent follows the span id");
    assert_eq!(
        &after[10..17],
        &[0x2a, 0x03, b'G', b'E', b'T', 0x30, 0x03],
        "the span the request named is its CLIENT span GET, not the call's"
    );
    let (header, _) = fetch_with_traceparent(&["--no-trace-propagation"], parent);
    assert_eq!(header, "", "no traceparent with --no-trace-propagation");
}

#[test]
fn a_plugins_http_requests_are_counted_by_plugin_and_status_class() {
    let (origin, seen) = traceparent_server();
    let root = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(plugins.path(), &["webfetch"]).unwrap();
    std::fs::write(
        plugins.path().join("webfetch.toml"),
        format!("[grants]\nhttp = [\"{origin}\"]\n"),
    )
    .unwrap();
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
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(plugins.path(), &["greet"]).unwrap();
    std::fs::write(
        plugins.path().join("greet.toml"),
        "task_support = \"optional\"\n",
    )
    .unwrap();
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
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(plugins.path(), &["webfetch", "wordcount"]).unwrap();
    std::fs::write(
        plugins.path().join("webfetch.toml"),
        format!("[grants]\nhttp = [\"{origin}\"]\n"),
    )
    .unwrap();
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
