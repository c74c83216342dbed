//! End to end: `host serve --http` / `host run --http` as a child process, driven over
//! real HTTP on loopback: the built-ins and a plugin served, per-session roots that keep
//! clients apart, tokens, a public address refused, and SIGTERM with calls running.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::host;
use serde_json::{json, Value};

mod harness;
use harness::*;

#[test]
fn serve_offers_the_builtins_and_plugins_over_http() {
    let (root, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let plugins = plugins_with(&["conformance"]);
    // A port alone: loopback.
    let mut server = Server::start(&[
        "serve",
        "--http",
        "0",
        "--root",
        dir_str(root.path()),
        "--plugins",
        dir_str(plugins.path()),
        "--cache-dir",
        dir_str(cache.path()),
    ]);
    assert_eq!(server.addr.ip(), std::net::Ipv4Addr::LOCALHOST);
    let session = initialize(server.addr, &[]);
    let headers = [("Mcp-Session-Id", session.as_str())];
    let list = post(
        server.addr,
        &headers,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
    )
    .json();
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.starts_with(&["read_file", "list_files", "write_file"]),
        "{names:?}"
    );
    assert!(
        names.contains(&"test_simple_text") && names.contains(&"json_schema_2020_12_tool"),
        "{names:?}"
    );
    let result = call(server.addr, &headers, "test_simple_text", json!({}));
    assert_eq!(text(&result), "This is a simple text response for testing.");
    let result = call(server.addr, &headers, "test_error_handling", json!({}));
    assert_eq!(result["isError"], true);
    let result = call(
        server.addr,
        &headers,
        "write_file",
        json!({"path":"a.md","content":"over http"}),
    );
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        std::fs::read_to_string(root.path().join("a.md")).unwrap(),
        "over http"
    );
    let (code, _) = server.terminate();
    assert_eq!(code, 0);
    server.wait_for("MCP server stopped");
}

#[test]
fn session_roots_keep_two_clients_apart() {
    let base = tempfile::tempdir().unwrap();
    let template = format!("{}/{{session}}", base.path().display());
    let mut server = Server::start(&[
        "run",
        "--http",
        "127.0.0.1:0",
        "--session-root-template",
        &template,
    ]);
    let (a, b) = (initialize(server.addr, &[]), initialize(server.addr, &[]));
    for (session, content) in [(&a, "alpha"), (&b, "beta")] {
        let result = call(
            server.addr,
            &[("Mcp-Session-Id", session)],
            "write_file",
            json!({"path":"notes.md","content":content}),
        );
        assert_eq!(result["isError"], false, "{result}");
    }
    for (session, content) in [(&a, "alpha"), (&b, "beta")] {
        assert_eq!(
            std::fs::read_to_string(base.path().join(session).join("notes.md")).unwrap(),
            content
        );
        let read = call(
            server.addr,
            &[("Mcp-Session-Id", session)],
            "read_file",
            json!({"path":"notes.md"}),
        );
        assert!(text(&read).contains(content), "{read}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(base.path().join(&a))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "a session root is private");
    }
    // The model controls every argument: no path reaches the other session's root.
    for path in [
        format!("../{b}/notes.md"),
        format!("/{b}/notes.md"),
        "..".to_owned(),
    ] {
        let read = call(
            server.addr,
            &[("Mcp-Session-Id", &a)],
            "read_file",
            json!({"path": path}),
        );
        assert_eq!(read["isError"], true, "{path}: {read}");
        assert!(!text(&read).contains("beta"), "{read}");
    }
    let listed = call(
        server.addr,
        &[("Mcp-Session-Id", &a)],
        "list_files",
        json!({}),
    );
    assert_eq!(text(&listed).matches("notes.md").count(), 1, "{listed}");
    // Resources too: each session's are its own root's files.
    for (session, content) in [(&a, "alpha"), (&b, "beta")] {
        let body = json!({"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///notes.md"}});
        let reply = post(
            server.addr,
            &[("Mcp-Session-Id", session)],
            &body.to_string(),
        );
        assert_eq!(
            reply.json()["result"]["contents"][0]["text"],
            content,
            "{}",
            reply.body
        );
        let body = json!({"jsonrpc":"2.0","id":4,"method":"resources/list"});
        let reply = post(
            server.addr,
            &[("Mcp-Session-Id", session)],
            &body.to_string(),
        );
        let names: Vec<Value> = reply.json()["result"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].clone())
            .collect();
        assert_eq!(names, [json!("notes.md")], "{}", reply.body);
    }
    let escape = format!("file:///../{b}/notes.md");
    let body = json!({"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":escape}});
    let reply = post(server.addr, &[("Mcp-Session-Id", &a)], &body.to_string());
    assert_eq!(reply.json()["error"]["code"], -32602, "{}", reply.body);
    assert!(!reply.body.contains("beta"), "{}", reply.body);
    assert_eq!(server.terminate().0, 0);
}

#[test]
fn tokens_name_clients_and_guard_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("# clients\n{TOKEN} alice\n")).unwrap();
    let base = dir.path().join("tenants");
    std::fs::create_dir(&base).unwrap();
    let template = format!("{}/{{client}}", base.display());
    let audit = dir.path().join("audit.jsonl");
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let mut server = Server::start(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--auth-token-file",
        dir_str(&tokens),
        "--session-root-template",
        &template,
        "--audit-log",
        dir_str(&audit),
        "--metrics",
        &metrics,
    ]);
    let reply = post(
        server.addr,
        &[],
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    assert_eq!(reply.status, 401);
    assert!(reply
        .header("www-authenticate")
        .unwrap()
        .starts_with("Bearer"));
    let auth = format!("Bearer {TOKEN}");
    let session = initialize(server.addr, &[("Authorization", &auth)]);
    let result = call(
        server.addr,
        &[("Authorization", &auth), ("Mcp-Session-Id", &session)],
        "write_file",
        json!({"path":"x.md","content":"alice's"}),
    );
    assert_eq!(result["isError"], false, "{result}");
    assert!(
        base.join("alice").join("x.md").is_file(),
        "the client's own root"
    );
    let mut scrape = TcpStream::connect(&metrics).unwrap();
    scrape
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut scraped = String::new();
    scrape.read_to_string(&mut scraped).unwrap();
    assert!(
        scraped.contains("\ntoolhost_sessions_open 1\n"),
        "{scraped}"
    );
    assert!(
        scraped.contains("toolhost_tool_calls_total{tool=\"write_file\",outcome=\"ok\"} 1\n"),
        "{scraped}"
    );
    assert_eq!(server.terminate().0, 0);
    assert!(
        !server.seen.iter().any(|line| line.contains(TOKEN)),
        "the token never reaches the log"
    ); // The audit record names the client, never its token.
    let records = std::fs::read_to_string(&audit).unwrap();
    assert!(!records.contains(TOKEN), "{records}");
    let lines: Vec<Value> = records
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{records}");
    assert_eq!(lines[0]["principal"], "alice");
    assert_eq!(lines[0]["session"], session.as_str());
    assert_eq!(lines[0]["tool"], "write_file");
    assert_eq!(lines[0]["outcome"], "ok");
}

#[test]
fn bad_http_set_ups_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let output = host().args(args).stdin(Stdio::null()).output().unwrap();
        (
            output.status.code().unwrap(),
            String::from_utf8(output.stderr).unwrap(),
        )
    };
    let (code, stderr) = run(&[
        "serve",
        "--http",
        "0.0.0.0:0",
        "--root",
        dir_str(dir.path()),
    ]);
    assert_eq!(code, EXIT_SETUP, "{stderr}");
    assert!(
        stderr.contains("refusing to serve on 0.0.0.0:0 without authentication"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--auth-token-file") && stderr.contains("--insecure-public"),
        "{stderr}"
    );

    let (code, stderr) = run(&["serve", "--root", dir_str(dir.path())]);
    assert_eq!(code, EXIT_USAGE, "{stderr}");
    assert!(stderr.contains("--http <ADDR>"), "{stderr}");
    let (code, stderr) = run(&["run", "--stateless"]);
    assert_eq!(code, EXIT_USAGE, "HTTP flags need --http: {stderr}");
    let (code, stderr) = run(&["serve", "--http", "example.com:8080"]);
    assert_eq!(code, EXIT_USAGE);
    assert!(
        stderr.contains("is not an address to listen on"),
        "{stderr}"
    );

    let short = dir.path().join("short");
    std::fs::write(&short, "s3kr1t\n").unwrap();
    let (code, stderr) = run(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--auth-token-file",
        dir_str(&short),
    ]);
    assert_eq!(code, EXIT_SETUP);
    assert!(
        stderr.contains("line 1: the token is 6 characters long; use at least 16"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("s3kr1t"),
        "the token is never printed: {stderr}"
    );

    let template = format!("{}/{{session}}", dir.path().display());
    let (code, stderr) = run(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--session-root-template",
        &template,
        "--plugin-files",
        "read",
    ]);
    assert_eq!(code, EXIT_SETUP);
    assert!(
        stderr.contains("cannot be combined with --session-root-template"),
        "{stderr}"
    );
    let (code, stderr) = run(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--session-root-template",
        &template,
        "--stateless",
    ]);
    assert_eq!(code, EXIT_SETUP);
    assert!(
        stderr.contains("needs sessions; drop --stateless"),
        "{stderr}"
    );
    let client_template = format!("{}/{{client}}", dir.path().display());
    let (code, stderr) = run(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--session-root-template",
        &client_template,
    ]);
    assert_eq!(code, EXIT_SETUP);
    assert!(
        stderr.contains("needs --auth-token-file whose every line names its client"),
        "{stderr}"
    );
}

#[test]
fn sigterm_as_soon_as_the_server_answered_is_a_graceful_stop() {
    // The signal is watched before the address is announced: a SIGTERM sent right
    // after the first answer (before, it could land before the accept loop first
    // polled its shutdown future, and the default action killed the process) is a
    // graceful stop with exit 0, every time.
    let root = tempfile::tempdir().unwrap();
    for _ in 0..20 {
        let mut server = Server::start(&[
            "serve",
            "--http",
            "127.0.0.1:0",
            "--root",
            dir_str(root.path()),
        ]);
        let reply = post(server.addr, &[], "not json");
        assert_eq!(reply.status, 400, "{}", reply.body);
        assert_eq!(server.terminate().0, 0, "{}", server.seen.join("\n"));
    }
}

#[test]
fn sigterm_lets_a_running_call_finish_then_exits_0() {
    let (root, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let plugins = plugins_with(&["hostile_loop"]);
    let mut server = Server::start(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--stateless",
        "--root",
        dir_str(root.path()),
        "--plugins",
        dir_str(plugins.path()),
        "--cache-dir",
        dir_str(cache.path()),
        "--plugin-timeout",
        "3s",
        "--shutdown-grace",
        "20s",
        // The call's start line ("tools/call") is at debug: the test waits for it.
        "-v",
    ]);
    let spin = "hostile_loop";
    let addr = server.addr;
    let calling = thread::spawn(move || {
        let body = json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":spin,"arguments":{}}});
        post(addr, &[], &body.to_string())
    });
    server.wait_for("tools/call");
    let (code, took) = server.terminate();
    let reply = calling.join().unwrap();
    assert_eq!(
        reply.status, 200,
        "the running call was answered: {}",
        reply.body
    );
    assert_eq!(
        reply.json()["result"]["isError"],
        true,
        "it hit its own time limit"
    );
    assert_eq!(code, 0);
    // It waited for the call (3 s from its start), not for the grace period (20 s).
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert!(took < Duration::from_secs(15), "{took:?}");
    server.wait_for("shutting down: no new connections");
    assert!(
        TcpStream::connect(addr).is_err(),
        "no new connections after shutdown"
    );
}

/// Half-open connections against the binary: `--max-pending-per-peer` and
/// `--header-timeout` reach the server, bad values are refused, and a server whose
/// open-file limit is far below the flood (`ulimit -n 48`) neither dies nor spins: it
/// pushes out a stalled connection and answers a fresh client.
#[test]
fn half_open_floods_meet_the_flags_and_the_file_limit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir_str(dir.path());
    for (flag, value, message) in [
        (
            "--header-timeout",
            "11s",
            "give more than 0 and at most 10s",
        ),
        (
            "--header-timeout",
            "0s",
            "the duration must be more than zero",
        ),
        ("--min-receive-rate", "0", "give at least 1"),
        ("--max-pending-per-peer", "0", "give at least 1"),
    ] {
        let output = host()
            .args([
                "serve",
                "--http",
                "127.0.0.1:0",
                "--root",
                root,
                flag,
                value,
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(
            output.status.code(),
            Some(EXIT_USAGE),
            "{flag} {value}: {stderr}"
        );
        assert!(stderr.contains(message), "{flag} {value}: {stderr}");
    }

    let half = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    let server = Server::start(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--root",
        root,
        "--max-pending-per-peer",
        "2",
        "--header-timeout",
        "500ms",
    ]);
    let opened = Instant::now();
    let mut held: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut stream = TcpStream::connect(server.addr).unwrap();
            stream.write_all(half).unwrap();
            stream
        })
        .collect();
    let mut extra = TcpStream::connect(server.addr).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut raw = String::new();
    let _ = extra.read_to_string(&mut raw);
    assert!(
        raw.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{raw:?}"
    );
    assert!(
        raw.contains("too many connections from your address"),
        "{raw}"
    );
    // The stalled ones are closed after about 0.5 s, not the default 2 s.
    for stream in &mut held {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
        assert!(rest.is_empty());
    }
    let took = opened.elapsed();
    assert!(
        took > Duration::from_millis(300) && took < Duration::from_millis(1800),
        "closed after {took:?}"
    );
    initialize(server.addr, &[]);
    drop(server);

    // Far more connections than descriptors: accepting fails (EMFILE) until a stalled
    // connection is pushed out.
    let script = format!(
        "ulimit -n 48 && exec {} serve --http 127.0.0.1:0 --root {root} --max-pending-per-peer 200",
        env!("CARGO_BIN_EXE_host")
    );
    let mut server = Server::start_command(
        Command::new("sh")
            .args(["-c", &script])
            .env_remove("RUST_LOG"),
    );
    server.wait_for("the open-file limit is below --max-connections plus 64");
    let flood: Vec<TcpStream> = (0..100)
        .map(|_| {
            let mut stream = TcpStream::connect(server.addr).unwrap();
            let _ = stream.write_all(half);
            stream
        })
        .collect();
    let started = Instant::now();
    initialize(server.addr, &[]);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "answered after {:?}",
        started.elapsed()
    );
    server.wait_for("accepting a connection failed");
    drop(flood);
    assert_eq!(server.terminate().0, 0);
}

#[test]
fn serve_parents_a_calls_span_on_the_http_traceparent_header() {
    use crate::observe::{contains, otlp_receiver};
    let root = tempfile::tempdir().unwrap();
    let (collector, bodies) = otlp_receiver();
    let server = Server::start(&[
        "serve",
        "--http",
        "0",
        "--root",
        dir_str(root.path()),
        "--otlp-endpoint",
        &collector,
    ]);
    let session = initialize(server.addr, &[]);
    let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("traceparent", parent),
    ];
    let result = call(server.addr, &headers, "list_files", json!({"path": "."}));
    assert_eq!(result["isError"], false, "{result}");
    // A malformed header is ignored: the call runs.
    let bad = [
        ("Mcp-Session-Id", session.as_str()),
        (
            "traceparent",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
        ),
    ];
    let result = call(server.addr, &bad, "list_files", json!({"path": "."}));
    assert_eq!(result["isError"], false, "{result}");
    let trace_id = [
        0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31,
        0x9c,
    ];
    let span_id = [0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31];
    let mut all = Vec::new();
    let until = Instant::now() + Duration::from_secs(20);
    while !contains(&all, &trace_id) && Instant::now() < until {
        if let Ok(body) = bodies.recv_timeout(Duration::from_millis(500)) {
            all.extend(body);
        }
    }
    assert!(
        contains(&all, &trace_id),
        "the span carries the header's trace id"
    );
    // parent_span_id (field 4, 8 bytes): the header's span.
    assert!(contains(&all, &[&[0x22, 0x08][..], &span_id].concat()));
    assert!(contains(&all, b"tools/call list_files"));
    assert!(contains(&all, b"tcp"), "network.transport");
}

mod oauth;
mod policy;
