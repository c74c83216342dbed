//! `host serve --http --policy FILE`: two principals (two named static tokens) with
//! different profiles see only their own tools and roots, a tool not offered is refused
//! by name, one's session id is refused to the other, quotas answer 429 with
//! `Retry-After` (or a tool error naming the quota inside a call), and `--watch` reloads
//! the policy (a broken file keeps the last good one).

use super::*;

const BOB_TOKEN: &str = "cli-test-token-bob-987654321";
const CAROL_TOKEN: &str = "cli-test-token-carol-5555555";
const DAVE_TOKEN: &str = "cli-test-token-dave-44444444";

struct Tenants {
    dir: tempfile::TempDir,
    _plugins: tempfile::TempDir,
    server: Server,
}

impl Tenants {
    fn base(&self) -> std::path::PathBuf {
        self.dir.path().join("tenants")
    }
    fn policy(&self) -> std::path::PathBuf {
        self.dir.path().join("policy.toml")
    }
}

/// A server for alice, bob and carol under `policy` (`{base}` replaced by the tenants'
/// base directory), with the greet, divide and hostile_loop plugins.
fn serve(policy: &str, extra: &[&str]) -> Tenants {
    serve_plugins(
        policy,
        plugins_with(&["greet", "divide", "hostile_loop"]),
        extra,
    )
}

/// [`serve`] with the plugins of the directory `plugins`.
fn serve_plugins(policy: &str, plugins: tempfile::TempDir, extra: &[&str]) -> Tenants {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        format!("{TOKEN} alice\n{BOB_TOKEN} bob\n{CAROL_TOKEN} carol\n{DAVE_TOKEN} dave\n"),
    )
    .unwrap();
    let base = dir.path().join("tenants");
    std::fs::create_dir_all(base.join("readers")).unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, policy.replace("{base}", dir_str(&base))).unwrap();
    let template = format!("{}/{{client}}", base.display());
    let mut args = vec![
        "serve",
        "--http",
        "127.0.0.1:0",
        "--auth-token-file",
        dir_str(&tokens),
        "--session-root-template",
        &template,
        "--plugins",
        dir_str(plugins.path()),
        "--policy",
        dir_str(&path),
    ];
    args.extend_from_slice(extra);
    let server = Server::start(&args);
    Tenants {
        dir,
        _plugins: plugins,
        server,
    }
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// A principal signed in: its bearer token and the session it initialized.
struct SignedIn {
    auth: String,
    session: String,
}

impl SignedIn {
    fn new(addr: SocketAddr, token: &str) -> Self {
        let auth = bearer(token);
        let session = initialize(addr, &[("Authorization", &auth)]);
        Self { auth, session }
    }

    /// The headers of a request in its session.
    fn headers(&self) -> [(&str, &str); 2] {
        [
            ("Authorization", &self.auth),
            ("Mcp-Session-Id", &self.session),
        ]
    }
}

fn tool_names(addr: SocketAddr, headers: &[(&str, &str)]) -> Vec<String> {
    let reply = post(
        addr,
        headers,
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#,
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

fn call_reply(addr: SocketAddr, headers: &[(&str, &str)], tool: &str, arguments: Value) -> Reply {
    let body = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":tool,"arguments":arguments}});
    post(addr, headers, &body.to_string())
}

const TWO_PROFILES: &str = r#"
[[principal]]
token = "alice"
profile = "editor"

[[principal]]
token = "bob"
profile = "reader"

[[principal]]
token = "carol"
profile = "slow"

[profile.editor]
tools = ["read_file", "write_file", "list_files"]
plugins = ["greet"]
quota = { calls_per_minute = 3, bytes_written_per_day = 20 }

[profile.reader]
files = "read-only"
tools = ["read_file", "divide"]
root = "{base}/readers/{client}"

[profile.slow]
files = "none"
plugins = ["hostile_loop"]
plugin = { timeout_ms = 1500 }
quota = { concurrent_calls = 1 }
"#;

#[test]
fn each_principal_gets_its_profile_and_quotas() {
    let mut t = serve(TWO_PROFILES, &[]);
    let addr = t.server.addr;
    let (alice_in, bob_in) = (SignedIn::new(addr, TOKEN), SignedIn::new(addr, BOB_TOKEN));
    let (alice, bob) = (&alice_in.headers(), &bob_in.headers());
    // Each sees exactly its profile's tools.
    assert_eq!(
        tool_names(addr, alice),
        ["read_file", "list_files", "write_file", "greet"]
    );
    assert_eq!(tool_names(addr, bob), ["read_file", "divide"]);
    // A tool not offered is unknown, as a tool that does not exist is (alice: 1 call).
    let reply = call_reply(addr, alice, "divide", json!({"by": 2}));
    let unknown = call_reply(addr, alice, "no_such_tool", json!({}));
    assert_eq!(reply.status, unknown.status, "{}", reply.body);
    assert_eq!(
        reply.body.replace("divide", "X"),
        unknown.body.replace("no_such_tool", "X"),
        "refused exactly as an unknown tool"
    );
    assert!(
        reply.body.contains(r#"unknown tool \"divide\""#),
        "{}",
        reply.body
    );
    // Bob's root is his profile's, and read-only even for a tool he names by force.
    let write = call_reply(
        addr,
        bob,
        "write_file",
        json!({"path": "x.md", "content": "b"}),
    );
    assert!(
        write.body.contains(r#"unknown tool \"write_file\""#),
        "{}",
        write.body
    );
    let alice_write = call(
        addr,
        alice,
        "write_file",
        json!({"path": "a.md", "content": "0123456789"}),
    );
    assert_eq!(alice_write["isError"], false, "{alice_write}");
    assert_eq!(
        std::fs::read_to_string(t.base().join("alice").join("a.md")).unwrap(),
        "0123456789"
    );
    assert!(
        t.base().join("readers").join("bob").is_dir(),
        "bob's own root"
    );
    let bob_read = call(addr, bob, "read_file", json!({"path": "../../alice/a.md"}));
    assert_eq!(bob_read["isError"], true, "{bob_read}");
    // Bob presenting alice's session id: no such session for him.
    let stolen = post(
        addr,
        &[
            ("Authorization", &bob_in.auth),
            ("Mcp-Session-Id", &alice_in.session),
        ],
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
    );
    assert_eq!(stolen.status, 404, "{}", stolen.body);
    // Bytes written per day (20): 10 written, 15 more refused, the file as it was.
    // Inside the session: a JSON-RPC error naming the quota and when it frees up.
    let over = call_reply(
        addr,
        alice,
        "write_file",
        json!({"path": "a.md", "content": "fifteen bytes.."}),
    );
    assert_eq!(over.status, 200, "{}", over.body);
    let over = over.json();
    assert_eq!(over["error"]["code"], -32029, "{over}");
    assert_eq!(
        over["error"]["data"]["quota"], "bytes_written_per_day",
        "{over}"
    );
    assert_eq!(over["error"]["data"]["limit"], 20, "{over}");
    assert!(
        over["error"]["data"]["retryAfterSeconds"].as_u64().unwrap() >= 1,
        "{over}"
    );
    assert!(
        over["error"]["message"]
            .as_str()
            .unwrap()
            .contains("quota exceeded: bytes_written_per_day (limit 20)"),
        "{over}"
    );
    assert_eq!(
        std::fs::read_to_string(t.base().join("alice").join("a.md")).unwrap(),
        "0123456789",
        "the old file is intact"
    );
    // Calls per minute (3): alice's two writes ran (the unknown tools never did); one
    // more passes, the next is 429.
    let greet = call(addr, alice, "greet", json!({"name": "Ada"}));
    assert_eq!(text(&greet), "Hello, Ada!");
    let refused = call_reply(addr, alice, "greet", json!({"name": "Ada"}));
    assert_eq!(refused.status, 429, "{}", refused.body);
    let retry: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!(
        (1..=20).contains(&retry),
        "a token comes back every 20 s: {retry}"
    );
    assert!(
        refused
            .body
            .contains("Too Many Requests: quota exceeded: calls_per_minute (limit 3)"),
        "{}",
        refused.body
    );
    // ... while bob's calls go on, and alice's other requests too.
    let divided = call(addr, bob, "divide", json!({"value": 9, "by": 3}));
    assert_eq!(divided["isError"], false, "{divided}");
    assert_eq!(tool_names(addr, alice).len(), 4);
    // A token the policy maps to no profile (and no default): 403, even to initialize.
    let dave = post(
        addr,
        &[("Authorization", &bearer(DAVE_TOKEN))],
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cli-test","version":"1"}}}"#,
    );
    assert_eq!(dave.status, 403, "{}", dave.body);
    assert!(
        dave.body
            .contains(r#"the server's policy gives the client \"dave\" no profile"#),
        "{}",
        dave.body
    );
    assert_eq!(t.server.terminate().0, 0);
}

/// Reads an event stream (GET) until a line contains `text` (at most 20 s).
fn stream_until(
    addr: SocketAddr,
    headers: &[(&str, &str)],
    text: &str,
) -> thread::JoinHandle<bool> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut request = format!(
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n",
        addr.port()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let text = text.to_owned();
    thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return false,
                Ok(_) if line.contains(&text) => return true,
                Ok(_) => {}
            }
        }
        false
    })
}

fn hello_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(n) if n > 0 && !line.trim().is_empty() => {}
                    _ => break,
                }
            }
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
            );
        }
    });
    port
}

#[test]
fn a_policy_reload_changes_live_sessions_and_a_broken_one_is_kept_out() {
    let v1 =
        "[[principal]]\ntoken = \"alice\"\nprofile = \"p\"\n[profile.p]\ntools = [\"read_file\"]\n";
    let mut t = serve(v1, &["--watch"]);
    let addr = t.server.addr;
    let alice_in = SignedIn::new(addr, TOKEN);
    let alice = &alice_in.headers();
    assert_eq!(tool_names(addr, alice), ["read_file"]);
    let notified = stream_until(addr, alice, "notifications/tools/list_changed");
    thread::sleep(Duration::from_millis(300));
    // Add a tool: the session is told, and offered it.
    std::fs::write(
        t.policy(),
        "[[principal]]\ntoken = \"alice\"\nprofile = \"p\"\n[profile.p]\ntools = [\"read_file\", \"list_files\"]\nplugins = [\"greet\"]\n",
    )
    .unwrap();
    t.server.wait_for("policy reloaded");
    assert!(
        notified.join().unwrap(),
        "notifications/tools/list_changed on the stream"
    );
    assert_eq!(
        tool_names(addr, alice),
        ["read_file", "list_files", "greet"]
    );
    let greet = call(addr, alice, "greet", json!({"name": "Bo"}));
    assert_eq!(text(&greet), "Hello, Bo!");
    // A broken file: logged with its line, the last good policy stays.
    std::fs::write(
        t.policy(),
        "[[principal]]\ntoken = \"alice\"\nprofile = \"p\"\n[profile.p]\ntools = [\"read_file\"\n",
    )
    .unwrap();
    let logged = t.server.wait_for("the last good policy stays in force");
    assert!(logged.contains("policy line "), "{logged}");
    // An unknown tool: refused at load, named.
    std::fs::write(
        t.policy(),
        "[[principal]]\ntoken = \"alice\"\nprofile = \"p\"\n[profile.p]\ntools = [\"read_fil\"]\n",
    )
    .unwrap();
    thread::sleep(Duration::from_millis(1500));
    let logged = t.server.wait_for("no tool is named");
    assert!(logged.contains("read_fil"), "{logged}");
    assert_eq!(
        tool_names(addr, alice),
        ["read_file", "list_files", "greet"]
    );
    let greet = call(addr, alice, "greet", json!({"name": "Cy"}));
    assert_eq!(text(&greet), "Hello, Cy!");
    // An oversized file: refused unread.
    std::fs::write(t.policy(), "#".repeat(2 << 20)).unwrap();
    t.server.wait_for("bytes; at most 1048576 (1 MiB) are read");
    assert_eq!(
        tool_names(addr, alice),
        ["read_file", "list_files", "greet"]
    );
    assert_eq!(t.server.terminate().0, 0);
}

#[test]
fn a_policy_naming_what_the_server_lacks_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{TOKEN} alice\n")).unwrap();
    let policy = dir.path().join("policy.toml");
    let template = format!("{}/{{client}}", dir.path().display());
    let start = |text: &str, extra: &[&str]| {
        std::fs::write(&policy, text).unwrap();
        let mut args = vec![
            "serve",
            "--http",
            "127.0.0.1:0",
            "--auth-token-file",
            dir_str(&tokens),
            "--session-root-template",
            &template,
            "--policy",
            dir_str(&policy),
        ];
        args.extend_from_slice(extra);
        let output = host().args(&args).stdin(Stdio::null()).output().unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, stderr) = start("[profile.p]\nplugins = [\"greet\"]\n", &[]);
    assert_eq!(code, EXIT_SETUP, "{stderr}");
    assert!(
        stderr.contains(
            "policy profile.p.plugins: no plugin is named \"greet\"; the server has: none"
        ),
        "{stderr}"
    );
    let (code, stderr) = start(
        "[profile.p]\nplugin = { http = [\"api.example.org\"] }\n",
        &[],
    );
    assert_eq!(code, EXIT_SETUP, "{stderr}");
    assert!(
        stderr.contains("api.example.org is not a host the operator allows (--plugin-http)"),
        "{stderr}"
    );
    let (code, stderr) = start("[profile.p]\nroot = \"/tmp/{client}\"\n", &[]);
    assert_eq!(code, EXIT_SETUP, "{stderr}");
    assert!(
        stderr.contains("is outside the operator's --session-root-template base"),
        "{stderr}"
    );
    let (code, stderr) = start(
        "[profile.p]\nquota = { calls_per_minute = 99999999999 }\n",
        &[],
    );
    assert_eq!(code, EXIT_SETUP, "{stderr}");
    assert!(stderr.contains("99999999999 is out of bounds"), "{stderr}");
    // A principal is a token's name: every token must have one.
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    let (code, stderr) = start("[profile.default]\n", &[]);
    assert_eq!(code, EXIT_SETUP, "{stderr}");
    assert!(
        stderr.contains("--policy needs --auth-token-file whose every line names its client"),
        "{stderr}"
    );
}

/// A server on 127.0.0.1 answering every request with `hello`, until the test ends.
#[test]
fn plugin_state_never_passes_between_principals() {
    // Both in one profile: they share its loaded plugins, the closest they come.
    let mut t = serve_plugins(
        "[profile.default]\nfiles = \"none\"\n",
        plugins_with(&["hostile_state"]),
        &[],
    );
    let addr = t.server.addr;
    let remember = |token: &str, value: &str| {
        let caller = SignedIn::new(addr, token);
        let result = call(
            addr,
            &caller.headers(),
            "hostile_state",
            json!({"value": value}),
        );
        text(&result).to_owned()
    };
    assert_eq!(remember(TOKEN, "alice's secret"), "nothing kept");
    assert_eq!(
        remember(BOB_TOKEN, "bob's"),
        "nothing kept",
        "alice's value never reaches bob"
    );
    assert_eq!(
        remember(TOKEN, "again"),
        "nothing kept",
        "nor outlives her call"
    );
    assert_eq!(t.server.terminate().0, 0);
}

#[test]
fn an_oauth_only_server_takes_a_policy() {
    // A principal is then its OAuth token's sub (with its scopes): no token file is
    // needed. Before, --policy insisted on a token file naming every client, so an
    // OAuth-only server could not have a policy at all.
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[principal]]\nscope = \"tools:files\"\nprofile = \"files\"\n[profile.files]\nfiles = \"read-write\"\n",
    )
    .unwrap();
    let template = format!("{}/{{client}}", dir.path().display());
    let oauth = [
        "--oauth-issuer",
        "http://127.0.0.1:9",
        "--oauth-audience",
        "http://127.0.0.1/mcp",
    ];
    let mut args = vec![
        "serve",
        "--http",
        "127.0.0.1:0",
        "--session-root-template",
        &template,
        "--policy",
        dir_str(&policy),
    ];
    args.extend_from_slice(&oauth);
    let mut server = Server::start(&args);
    let reply = post(
        server.addr,
        &[],
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cli-test","version":"1"}}}"#,
    );
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert!(
        reply
            .header("www-authenticate")
            .is_some_and(|h| h.contains("resource_metadata=")),
        "{:?}",
        reply.headers
    );
    assert_eq!(server.terminate().0, 0);
    // Neither a token file nor an issuer: nobody has a name a policy could match.
    let output = host()
        .args(&args[..7])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(EXIT_SETUP), "{stderr}");
    assert!(
        stderr.contains("--policy needs --auth-token-file whose every line names its client (TOKEN NAME), or --oauth-issuer (a principal is then its OAuth token's sub)"),
        "{stderr}"
    );
}

mod quota;
