//! `host inspect` shows a plugin's HTTP hosts, config keys (never a value) and tool
//! metadata; `host call` with `--plugin-http`, `--plugin-http-allow-net` and
//! `--plugin-config-env` lets webfetch reach a local server (allowed explicitly) with its
//! secret, and nowhere else; the secret reaches only the server, never the host's output.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::text;

/// The secret given through the environment; must never appear in the host's output.
const TOKEN: &str = "tok-s3cr3t-9e1";

fn host(args: &[&str]) -> Output {
    crate::host()
        .env("WEBFETCH_TEST_TOKEN", TOKEN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run host")
}

/// Each request a [`server`] got: its first line and its `authorization` header.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// A server on 127.0.0.1 answering every GET with `hello`; it records each request.
fn server() -> (u16, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let mut authorization = String::new();
            loop {
                let mut header = String::new();
                match reader.read_line(&mut header) {
                    Ok(n) if n > 0 && !header.trim().is_empty() => {}
                    _ => break,
                }
                if let Some((name, value)) = header.split_once(':') {
                    if name.eq_ignore_ascii_case("authorization") {
                        value.trim().clone_into(&mut authorization);
                    }
                }
            }
            log.lock()
                .unwrap()
                .push((line.trim_end().to_owned(), authorization));
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
            );
        }
    });
    (port, seen)
}

#[test]
fn inspect_shows_hosts_config_keys_and_tool_metadata() {
    let plugins = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    toolhost_tests::install(plugins.path(), &["webfetch"]).unwrap();
    let wasm = plugins.path().join("webfetch.wasm");
    let out = host(&[
        "inspect",
        text(&wasm),
        "--json",
        "--cache-dir",
        text(cache.path()),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let info: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        info["http"],
        json!({"hosts": ["example.com", "www.example.com"], "allowed_by_default_host": false})
    );
    assert_eq!(
        info["config"],
        json!([
            {"key": "API_TOKEN", "description": "Sent as `Authorization: Bearer ...` when set", "secret": true, "required": false, "set": false},
            {"key": "USER_AGENT", "description": "The User-Agent header sent with every request", "secret": false, "required": false, "set": false},
        ])
    );
    let tool = &info["tools"][0];
    assert_eq!(tool["name"], "fetch");
    assert_eq!(tool["title"], "Fetch a web page");
    assert_eq!(
        tool["annotations"],
        json!({"readOnlyHint": true, "openWorldHint": true})
    );

    // The text form names the hosts and keys too.
    let out = host(&["inspect", text(&wasm), "--cache-dir", text(cache.path())]);
    let report = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "example.com",
        "www.example.com",
        "API_TOKEN",
        "Fetch a web page",
    ] {
        assert!(report.contains(expected), "no {expected:?} in:\n{report}");
    }
}

#[test]
fn call_reaches_the_allowed_local_server_with_the_secret_and_nothing_else() {
    let (port, seen) = server();
    let origin = format!("http://127.0.0.1:{port}");
    let plugins = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(plugins.path(), &["webfetch"]).unwrap();
    std::fs::write(
        plugins.path().join("webfetch.toml"),
        format!("[grants]\nhttp = [\"{origin}\"]\n[config.API_TOKEN]\nsecret = true\n"),
    )
    .unwrap();
    let call = |url: &str, allow_net: bool| {
        let arguments = json!({ "url": url }).to_string();
        let mut args = vec![
            "call",
            "--no-builtins",
            "--plugins",
            text(plugins.path()),
            "--cache-dir",
            text(cache.path()),
            "--plugin-http",
            &origin,
            "--plugin-config-env",
            "webfetch.API_TOKEN=WEBFETCH_TEST_TOKEN",
            "-v",
        ];
        if allow_net {
            args.extend(["--plugin-http-allow-net", "127.0.0.1"]);
        }
        args.extend(["fetch", &arguments]);
        host(&args)
    };

    // Loopback stays closed until the operator opens it.
    let out = call(&format!("{origin}/hello"), false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("error [failed]: fetch: the request to {origin} was refused: its address is on a private or local network, which this tool may not reach")),
        "{stderr}"
    );
    assert!(seen.lock().unwrap().is_empty());

    let out = call(&format!("{origin}/hello"), true);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (&result["status"], &result["body"]),
        (&json!(200), &json!("hello"))
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [("GET /hello HTTP/1.1".to_owned(), format!("Bearer {TOKEN}"))]
    );

    // Another host is refused, and nothing reaches the server.
    let out = call("http://10.0.0.1/", true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error [failed]: fetch: the request to http://10.0.0.1 was refused: this tool may only reach the hosts its plugin was granted"),
        "{stderr}"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
    for out in [
        call(&format!("{origin}/hello"), true),
        call("http://10.0.0.1/", true),
    ] {
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !all.contains(TOKEN),
            "the secret reached the output:\n{all}"
        );
    }
}
