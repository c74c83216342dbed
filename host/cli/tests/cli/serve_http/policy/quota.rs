//! Quotas per principal over HTTP: concurrent calls and the plugin time ceiling,
//! outgoing plugin HTTP requests per minute, and a composing tool's nested calls
//! spending its caller's calls per minute.

use super::*;

#[test]
fn concurrent_calls_quota_and_plugin_time_ceiling() {
    let mut t = serve(TWO_PROFILES, &[]);
    let addr = t.server.addr;
    let carol_auth = bearer(CAROL_TOKEN);
    let session = initialize(addr, &[("Authorization", &carol_auth)]);
    assert_eq!(
        tool_names(
            addr,
            &[("Authorization", &carol_auth), ("Mcp-Session-Id", &session)]
        ),
        ["hostile_loop"]
    );
    let (auth, id) = (carol_auth.clone(), session.clone());
    let started = Instant::now();
    let running = thread::spawn(move || {
        call(
            addr,
            &[("Authorization", &auth), ("Mcp-Session-Id", &id)],
            "hostile_loop",
            json!({}),
        )
    });
    // Once the first call runs (its plugin log says so, or after a second), a second
    // one is over the quota of one at a time.
    thread::sleep(Duration::from_millis(700));
    let second = call_reply(
        addr,
        &[("Authorization", &carol_auth), ("Mcp-Session-Id", &session)],
        "hostile_loop",
        json!({}),
    );
    assert_eq!(second.status, 429, "{}", second.body);
    assert_eq!(second.header("retry-after"), Some("1"));
    assert!(
        second
            .body
            .contains("quota exceeded: concurrent_calls (limit 1)"),
        "{}",
        second.body
    );
    let first = running.join().unwrap();
    assert_eq!(first["isError"], true, "{first}");
    // The profile's ceiling (1500 ms), not the default 10 s.
    assert!(
        text(&first).starts_with("hostile_loop: timed out after 1500ms"),
        "{first}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(t.server.terminate().0, 0);
}

#[test]
fn outgoing_plugin_http_is_counted_per_principal() {
    let port = hello_server();
    let origin = format!("http://127.0.0.1:{port}");
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(plugins.path(), &["hostile_http"]).unwrap();
    std::fs::write(
        plugins.path().join("hostile_http.toml"),
        format!("[grants]\nhttp = [\"{origin}\"]\n"),
    )
    .unwrap();
    let mut t = serve_plugins(
        "[profile.default]\nfiles = \"none\"\nquota = { http_requests_per_minute = 3 }\n",
        plugins,
        &[
            "--plugin-http",
            &origin,
            "--plugin-http-allow-net",
            "127.0.0.1",
        ],
    );
    let server = &mut t.server;
    let addr = server.addr;
    let url = format!("{origin}/x");
    let flood = |token: &str, count: u32| {
        let caller = SignedIn::new(addr, token);
        let result = call(
            addr,
            &caller.headers(),
            "flood",
            json!({"url": url, "count": count}),
        );
        assert_eq!(result["isError"], false, "{result}");
        serde_json::from_str::<Value>(text(&result)).unwrap()
    };
    // Alice: 3 of her 5 requests go out, the others are refused by her quota.
    let alice = flood(TOKEN, 5);
    assert_eq!(alice["answered"], 3, "{alice}");
    let logged = server.wait_for("refused: quota exceeded: http_requests_per_minute (limit 3)");
    assert!(logged.contains("HTTP request to"), "{logged}");
    // Bob's quota is his own.
    let bob = flood(BOB_TOKEN, 3);
    assert_eq!(bob["answered"], 3, "{bob}");
    assert_eq!(server.terminate().0, 0);
}

const CODER: &str = r#"
[[principal]]
token = "alice"
profile = "coder"

[profile.coder]
tools = ["read_file", "list", "call_once", "greet"]
quota = { calls_per_minute = 3, concurrent_calls = 1 }
"#;

/// A composing plugin (a code tool) under a profile: its nested calls are served by the
/// principal's own view (only what the profile offers, file tools included) and count
/// against the principal's calls per minute, inside the caller's concurrent-calls place.
#[test]
fn a_composing_tools_nested_calls_see_only_the_profile_and_spend_its_quota() {
    let t = serve_plugins(
        CODER,
        plugins_with(&["greet", "hostile_loop", "hostile_compose"]),
        &["--plugin-tools", "*"],
    );
    std::fs::create_dir_all(t.base().join("alice")).unwrap();
    std::fs::write(t.base().join("alice").join("note.md"), "hello from alice\n").unwrap();
    let addr = t.server.addr;
    let alice = SignedIn::new(addr, TOKEN);
    let alice = &alice.headers();
    // Granted by the manifest and offered by the profile: read_file and greet; not
    // hostile_loop's spin (granted, loaded, not offered), not the composing tools.
    let listed = call(addr, alice, "list", json!({}));
    let listed: Value =
        serde_json::from_str(listed["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(listed["tools"], json!(["read_file", "greet"]), "{listed}");
    // The session's own file tool, over alice's root, with one place for both calls.
    let read = call(
        addr,
        alice,
        "call_once",
        json!({"tool": "read_file", "arguments": r#"{"path": "note.md"}"#}),
    );
    assert!(read.to_string().contains("hello from alice"), "{read}");
    // list (1) + call_once (1) + its nested read_file (1) = the 3 a minute: refused.
    let over = call_reply(addr, alice, "greet", json!({"name": "x"}));
    assert_eq!(over.status, 429, "{}", over.body);
    assert!(over.body.contains("calls_per_minute"), "{}", over.body);
    drop(t);
}
