//! Outbound HTTP, configuration and secrets against real plugins (`hostile_http`,
//! `webfetch`, `metadata`, built by `toolhost-tests`) and a local HTTP server on
//! 127.0.0.1 (allowed explicitly, as the operator would).
//!
//! Name resolution is injected ([`Resolve`]): a test needs no DNS, and a name can be
//! made to resolve to a private address (`internal.test` → 127.0.0.1) offline. A public
//! name that resolves to 127.0.0.1 (`127.0.0.1.nip.io`, `localtest.me`) would need the
//! network, which tests may not use.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

use toolhost::registry::{CallContext, Environment, Registry, ToolCall, ToolError};

use super::*;

/// One request the server saw.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body_bytes: usize,
}

/// A tiny HTTP/1.1 server on 127.0.0.1: one thread per connection, `Connection: close`.
///
/// | path | answer |
/// |---|---|
/// | `/hello` | 200 `hello` |
/// | `/redirect?to=URL` | 302 to URL |
/// | `/big` | 200 with a 2 MiB body (content-length) |
/// | `/stream` | 200 with 2 MiB chunked (no content-length) |
/// | `/slow` | 200 after 5 s |
/// | anything else | 404 |
struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    fn start() -> Server {
        Server::bind("127.0.0.1:0").unwrap()
    }

    /// A server on `addr` (any 127/8 address works on Linux, without configuration).
    fn bind(addr: &str) -> std::io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = Arc::clone(&log);
                std::thread::spawn(move || {
                    let _ = serve(stream, &log);
                });
            }
        });
        Ok(Server { addr, seen })
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port())
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Seen>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = BTreeMap::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    log.lock().unwrap().push(Seen {
        method,
        path: path.clone(),
        headers,
        body_bytes: length,
    });
    let mut out = stream;
    let respond = |out: &mut TcpStream, status: &str, extra: &str, body: &[u8]| {
        write!(
            out,
            "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n",
            body.len()
        )?;
        out.write_all(body)
    };
    if path == "/hello" {
        respond(&mut out, "200 OK", "content-type: text/plain\r\n", b"hello")
    } else if let Some(to) = path.strip_prefix("/redirect?to=") {
        respond(&mut out, "302 Found", &format!("location: {to}\r\n"), b"")
    } else if path == "/big" {
        respond(&mut out, "200 OK", "", &vec![b'x'; 2 << 20])
    } else if path == "/stream" {
        write!(
            out,
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        )?;
        let chunk = vec![b'y'; 64 * 1024];
        for _ in 0..32 {
            write!(out, "{:x}\r\n", chunk.len())?;
            out.write_all(&chunk)?;
            out.write_all(b"\r\n")?;
        }
        out.write_all(b"0\r\n\r\n")
    } else if path == "/slow" {
        std::thread::sleep(Duration::from_secs(5));
        respond(&mut out, "200 OK", "", b"late")
    } else {
        respond(&mut out, "404 Not Found", "", b"")
    }
}

/// A resolver with a fixed table that records every lookup.
#[derive(Default)]
struct FakeResolver {
    table: BTreeMap<String, Vec<IpAddr>>,
    asked: Mutex<Vec<String>>,
}

impl FakeResolver {
    fn with(name: &str, ip: &str) -> Arc<FakeResolver> {
        let mut table = BTreeMap::new();
        table.insert(name.to_owned(), vec![ip.parse().unwrap()]);
        Arc::new(FakeResolver {
            table,
            asked: Mutex::default(),
        })
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl Resolve for FakeResolver {
    fn lookup(
        &self,
        host: &str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<Vec<IpAddr>>> + Send>>
    {
        self.asked.lock().unwrap().push(host.to_owned());
        let answer = self
            .table
            .get(host)
            .cloned()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such name"));
        Box::pin(async move { answer })
    }
}

/// A resolver whose answers change from one lookup to the next (DNS rebinding): the
/// `n`th lookup of any name gets `answers[n]` (the last one once they run out).
struct Rebinding {
    answers: Vec<Vec<IpAddr>>,
    asked: Mutex<usize>,
}

impl Resolve for Rebinding {
    fn lookup(
        &self,
        _host: &str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<Vec<IpAddr>>> + Send>>
    {
        let mut asked = self.asked.lock().unwrap();
        let answer = self.answers[(*asked).min(self.answers.len() - 1)].clone();
        *asked += 1;
        Box::pin(async move { Ok(answer) })
    }
}

/// The operator's side of a test.
#[derive(Default)]
struct Operator {
    allow: Vec<&'static str>,
    allow_nets: Vec<&'static str>,
    resolver: Arc<FakeResolver>,
    config: Vec<String>,
}

impl Operator {
    fn config(&self) -> PluginHostConfig {
        let mut values = ConfigValues::default();
        for text in &self.config {
            values.set_assignment(text).unwrap();
        }
        let resolver: Arc<dyn Resolve> = Arc::<FakeResolver>::clone(&self.resolver);
        PluginHostConfig {
            http: HttpPolicy {
                allow: self.allow.iter().map(|p| p.parse().unwrap()).collect(),
                allow_nets: self
                    .allow_nets
                    .iter()
                    .map(|n| parse_allowed_net(n).unwrap())
                    .collect(),
                resolver,
            },
            config: values,
            ..config()
        }
    }
}

/// `plugin` installed with `manifest` (instead of its own), loaded under `operator`.
fn load(
    plugin: &str,
    manifest: &str,
    operator: &Operator,
) -> (tempfile::TempDir, Result<Registry, PluginError>) {
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(dir.path(), &[plugin]).unwrap();
    std::fs::write(dir.path().join(format!("{plugin}.toml")), manifest).unwrap();
    let host = PluginHost::new(operator.config()).unwrap();
    let registry = Registry::new();
    let loaded = host
        .load_file(&dir.path().join(format!("{plugin}.wasm")), &registry)
        .map(|_| registry);
    (dir, loaded)
}

async fn call(registry: &Registry, tool: &str, arguments: Value) -> Result<Value, ToolError> {
    registry
        .dispatch(
            &CallContext::new(),
            &ToolCall::new(tool, arguments.to_string()),
            &Environment::generate(),
        )
        .await
        .map(|result| result.content)
}

fn failed_message(result: Result<Value, ToolError>) -> String {
    match result {
        Err(ToolError::Failed { message, .. }) => message,
        other => panic!("expected ToolError::Failed, got {other:?}"),
    }
}

#[test]
fn a_manifest_asking_for_a_host_the_operator_does_not_allow_is_not_loaded() {
    let manifest = "[grants]\nhttp = [\"api.example.org\", \"http://127.0.0.1:8080\"]\n";
    let operator = Operator {
        allow: vec!["*.example.org"],
        ..Operator::default()
    };
    let (dir, loaded) = load("hostile_http", manifest, &operator);
    let err = loaded.expect_err("refused");
    let path = dir.path().join("hostile_http.toml");
    assert_eq!(
        err.to_string(),
        format!("{}: the manifest asks for HTTP access to http://127.0.0.1:8080, which the host does not allow; the plugin was not loaded. To allow it, start the host with `--plugin-http http://127.0.0.1:8080` (PluginHostConfig::http), or remove it from [grants] http", path.display())
    );
    assert_eq!(err.name(), "http_denied");
    // Deny by default: with no operator pattern, the first host is named.
    let (_dir, loaded) = load("hostile_http", manifest, &Operator::default());
    assert!(
        matches!(loaded.as_ref().map_err(PluginError::kind), Err(PluginErrorKind::HttpDenied { host }) if host == "api.example.org"),
        "{loaded:?}"
    );
    let (_dir, loaded) = load(
        "hostile_http",
        "[grants]\nhttp = [\"ftp://x.test\"]\n",
        &operator,
    );
    let err = loaded.expect_err("refused");
    assert!(matches!(err.kind(), PluginErrorKind::Manifest { .. }));
    assert!(
        err.to_string().contains("grants.http: \"ftp://x.test\" is not a host pattern: only the http and https schemes exist"),
        "{err}"
    );
}

#[tokio::test]
async fn without_a_grant_every_request_is_denied_before_anything_is_sent() {
    let server = Server::start();
    let operator = Operator {
        allow: vec!["http://127.0.0.1:1"],
        allow_nets: vec!["127.0.0.1"],
        ..Operator::default()
    };
    let (_dir, registry) = load("hostile_http", "", &operator);
    let registry = registry.unwrap();
    let message =
        failed_message(call(&registry, "send", json!({"url": server.url("/hello")})).await);
    assert_eq!(
        message,
        format!("the request to http://127.0.0.1:{} was refused: this tool may only reach the hosts its plugin was granted; use a URL on one of those hosts", server.port())
    );
    assert!(server.seen().is_empty(), "{:?}", server.seen());
}

#[tokio::test]
async fn a_granted_loopback_host_is_refused_unless_the_operator_allows_its_network() {
    let server = Server::start();
    let pattern: &'static str =
        Box::leak(format!("http://127.0.0.1:{}", server.port()).into_boxed_str());
    let manifest = format!("[grants]\nhttp = [\"{pattern}\"]\n");

    let refused = Operator {
        allow: vec![pattern],
        ..Operator::default()
    };
    let (_dir, registry) = load("hostile_http", &manifest, &refused);
    let registry = registry.unwrap();
    let message =
        failed_message(call(&registry, "send", json!({"url": server.url("/hello")})).await);
    assert_eq!(
        message,
        format!("the request to {pattern} was refused: its address is on a private or local network, which this tool may not reach")
    );
    assert!(server.seen().is_empty());

    let allowed = Operator {
        allow: vec![pattern],
        allow_nets: vec!["127.0.0.1"],
        ..Operator::default()
    };
    let (_dir, registry) = load("hostile_http", &manifest, &allowed);
    let registry = registry.unwrap();
    let answer = call(&registry, "send", json!({"url": server.url("/hello")}))
        .await
        .unwrap();
    assert_eq!(
        answer,
        json!({"status": 200, "body_bytes": 5, "url": server.url("/hello")})
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("GET", "/hello")
    );
    assert_eq!(
        seen[0].headers["host"],
        format!("127.0.0.1:{}", server.port())
    );
    // Another port of the same address is outside the grant.
    let message =
        failed_message(call(&registry, "send", json!({"url": "http://127.0.0.1:1/"})).await);
    assert!(
        message
            .starts_with("the request to http://127.0.0.1:1 was refused: this tool may only reach"),
        "{message}"
    );
}

#[tokio::test]
async fn a_redirect_to_a_host_outside_the_grant_is_refused_without_a_lookup() {
    let server = Server::start();
    let pattern: &'static str =
        Box::leak(format!("http://127.0.0.1:{}", server.port()).into_boxed_str());
    let operator = Operator {
        allow: vec![pattern, "http://denied.test"],
        allow_nets: vec!["127.0.0.1"],
        ..Operator::default()
    };
    let manifest = format!("[grants]\nhttp = [\"{pattern}\"]\n");
    let (_dir, registry) = load("hostile_http", &manifest, &operator);
    let registry = registry.unwrap();
    let url = server.url("/redirect?to=http://denied.test/steal");
    let message = failed_message(call(&registry, "send", json!({ "url": url })).await);
    assert_eq!(
        message,
        "the request to http://denied.test was refused: this tool may only reach the hosts its plugin was granted; use a URL on one of those hosts"
    );
    assert_eq!(server.seen().len(), 1, "only the first request was sent");
    assert!(
        operator.resolver.asked().is_empty(),
        "denied.test was never looked up"
    );
    // A redirect within the grant is followed.
    let url = server.url(&format!("/redirect?to={}", server.url("/hello")));
    let answer = call(&registry, "send", json!({ "url": url }))
        .await
        .unwrap();
    assert_eq!(answer["status"], 200);
    assert_eq!(answer["url"], server.url("/hello"));
}

#[tokio::test]
async fn a_name_resolving_to_a_private_address_is_refused_at_connect_time() {
    let server = Server::start();
    let pattern: &'static str =
        Box::leak(format!("http://internal.test:{}", server.port()).into_boxed_str());
    let manifest = format!("[grants]\nhttp = [\"{pattern}\"]\n");
    let url = format!("{pattern}/hello");

    let operator = Operator {
        allow: vec![pattern],
        resolver: FakeResolver::with("internal.test", "127.0.0.1"),
        ..Operator::default()
    };
    let (_dir, registry) = load("hostile_http", &manifest, &operator);
    let registry = registry.unwrap();
    let message = failed_message(call(&registry, "send", json!({ "url": url })).await);
    assert_eq!(
        message,
        format!("the request to {pattern} was refused: its address is on a private or local network, which this tool may not reach")
    );
    assert_eq!(operator.resolver.asked(), ["internal.test"]);
    assert!(server.seen().is_empty(), "nothing reached the server");

    // The operator allows the network: the connection goes to the address checked.
    let operator = Operator {
        allow: vec![pattern],
        allow_nets: vec!["127.0.0.0/8"],
        resolver: FakeResolver::with("internal.test", "127.0.0.1"),
        ..Operator::default()
    };
    let (_dir, registry) = load("hostile_http", &manifest, &operator);
    let registry = registry.unwrap();
    let answer = call(&registry, "send", json!({ "url": url }))
        .await
        .unwrap();
    assert_eq!(answer["status"], 200);
    assert_eq!(
        server.seen()[0].headers["host"],
        format!("internal.test:{}", server.port())
    );
}

#[tokio::test]
async fn requests_per_call_and_body_sizes_are_limited() {
    let server = Server::start();
    let pattern: &'static str =
        Box::leak(format!("http://127.0.0.1:{}", server.port()).into_boxed_str());
    let operator = Operator {
        allow: vec![pattern],
        allow_nets: vec!["127.0.0.1"],
        ..Operator::default()
    };
    let manifest = format!(
        "[grants]\nhttp = [\"{pattern}\"]\n[limits]\nmax_http_requests = 3\nmax_http_request_bytes = 1024\nmax_http_response_bytes = 65536\n"
    );
    let (_dir, registry) = load("hostile_http", &manifest, &operator);
    let registry = registry.unwrap();

    let flood = call(
        &registry,
        "flood",
        json!({"url": server.url("/hello"), "count": 10}),
    )
    .await
    .unwrap();
    assert_eq!(
        flood,
        json!({"answered": 3, "errors": ["this tool call reached the host's limit of HTTP requests per call; ask for less at once (one page, one item)"]})
    );
    assert_eq!(server.seen().len(), 3);
    // The count is per call: the next call may send again.
    let again = call(
        &registry,
        "flood",
        json!({"url": server.url("/hello"), "count": 1}),
    )
    .await
    .unwrap();
    assert_eq!(again["answered"], 1);

    // A body too big to sit in the pipe (4 MB) is still being written when the host
    // refuses the request and closes it: the plugin must get the reason all the same,
    // not a broken pipe.
    for body_bytes in [4096, 4_000_000] {
        let message = failed_message(
            call(
                &registry,
                "send",
                json!({"url": server.url("/hello"), "method": "POST", "body_bytes": body_bytes}),
            )
            .await,
        );
        assert_eq!(
            message, "the request body is larger than the host allows (at most 1024 bytes)",
            "{body_bytes} bytes"
        );
    }
    let small = call(
        &registry,
        "send",
        json!({"url": server.url("/hello"), "method": "POST", "body_bytes": 1000}),
    )
    .await
    .unwrap();
    assert_eq!(small["status"], 200);
    assert_eq!(server.seen().last().unwrap().body_bytes, 1000);

    let message = failed_message(call(&registry, "send", json!({"url": server.url("/big")})).await);
    assert_eq!(
        message,
        "the response is larger than the host allows (at most 65536 bytes); ask for less (a smaller page, a narrower query)"
    );
    // Without a content-length the body is cut off where it passes the cap.
    let message =
        failed_message(call(&registry, "send", json!({"url": server.url("/stream")})).await);
    assert_eq!(
        message,
        format!("the request to {pattern} failed: reading the response body failed (the connection broke, or the body is larger than the host allows)")
    );
}

#[tokio::test]
async fn a_slow_server_is_cut_off_at_the_call_deadline() {
    let server = Server::start();
    let pattern: &'static str =
        Box::leak(format!("http://127.0.0.1:{}", server.port()).into_boxed_str());
    let operator = Operator {
        allow: vec![pattern],
        allow_nets: vec!["127.0.0.1"],
        ..Operator::default()
    };
    let manifest = format!("[grants]\nhttp = [\"{pattern}\"]\n[limits]\ntimeout_ms = 1000\n");
    let (_dir, registry) = load("hostile_http", &manifest, &operator);
    let registry = registry.unwrap();
    let started = Instant::now();
    let result = call(&registry, "send", json!({"url": server.url("/slow")})).await;
    let elapsed = started.elapsed();
    assert!(
        matches!(result, Err(ToolError::TimedOut { limit, .. }) if limit == Duration::from_secs(1)),
        "{result:?}"
    );
    assert!(elapsed < Duration::from_secs(4), "took {elapsed:?}");
}

/// The messages of every `plugin` event.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<String>>>);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        self.0.lock().unwrap().push(message.0);
    }
}

/// Every event of threads without their own subscriber, for the whole test process:
/// wasmtime-wasi-http sends a request (and the host logs its refusal) on a thread a
/// test's `set_default` does not reach. Tests running in parallel log here too, so a
/// test looks only for what is its own.
fn global_capture() -> &'static Capture {
    static GLOBAL: std::sync::OnceLock<Capture> = std::sync::OnceLock::new();
    GLOBAL.get_or_init(|| {
        let capture = Capture::default();
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(capture.clone()),
        )
        .expect("no other global subscriber in this test process");
        capture
    })
}

const SECRETS: &str =
    "[config]\nkeys = [\"REGION\"]\n[config.SECRET]\ndescription = \"A token\"\nsecret = true\n";

#[tokio::test(flavor = "current_thread")]
async fn a_plugin_sees_exactly_its_config_and_its_secret_never_reaches_a_log_or_error() {
    let global = global_capture();
    let capture = Capture::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let operator = Operator {
        config: vec![
            "hostile_http.SECRET=hunter2-s3cr3t".into(),
            "hostile_http.REGION=eu-west".into(),
            "hostile_http.UNDECLARED=not-given".into(),
            "webfetch.SECRET=someone-elses".into(),
        ],
        ..Operator::default()
    };
    let (_dir, registry) = load("hostile_http", SECRETS, &operator);
    let registry = registry.unwrap();
    let env = call(&registry, "env", json!({})).await.unwrap();
    assert_eq!(
        env,
        json!({"REGION": "eu-west", "SECRET": "hunter2-s3cr3t"})
    );

    let result = call(&registry, "leak", json!({})).await;
    assert_eq!(
        result,
        Err(ToolError::Failed {
            tool: "leak".into(),
            message: "the error has [REDACTED]".into()
        })
    );
    // A secret put into a host name (and a query) of a refused request: the refusal's
    // log line and the error the model gets name the host with the secret redacted.
    let message = failed_message(
        call(
            &registry,
            "send",
            json!({"url": "http://hunter2-s3cr3t.denied.test/x?k=hunter2-s3cr3t"}),
        )
        .await,
    );
    assert_eq!(
        message,
        "the request to http://[REDACTED].denied.test was refused: this tool may only reach the hosts its plugin was granted; use a URL on one of those hosts"
    );
    let mut messages = capture.0.lock().unwrap().clone();
    messages.extend(global.0.lock().unwrap().iter().cloned());
    let all = messages.join("\n");
    assert!(!all.contains("hunter2"), "a secret reached the log:\n{all}");
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("HTTP request to http://[REDACTED].denied.test:80 refused: ")),
        "no refusal line in:\n{all}"
    );
    for line in [
        "stdout has [REDACTED]",
        "stderr has [REDACTED]",
        "log has [REDACTED]",
    ] {
        assert!(messages.iter().any(|m| m == line), "no {line:?} in:\n{all}");
    }
    assert!(
        messages.iter().any(|m| m == "config values given for hostile_http that its manifest does not declare are not passed to it: UNDECLARED"),
        "{all}"
    );
}

#[test]
fn a_missing_required_config_key_is_a_load_error_naming_it() {
    let (dir, loaded) = load(
        "hostile_http",
        SECRETS,
        &Operator {
            config: vec!["hostile_http.REGION=eu".into()],
            ..Operator::default()
        },
    );
    let err = loaded.expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!("{}: the plugin needs the config key SECRET (A token) and no value was given; the plugin was not loaded. Give it with `--plugin-config hostile_http.SECRET=VALUE`, `--plugin-config-env hostile_http.SECRET=ENV_VAR` or in a --plugin-config-file ([hostile_http] SECRET = ...), or mark it `required = false` in the manifest", dir.path().join("hostile_http.toml").display())
    );
    assert_eq!(err.name(), "config_missing");
    // Optional keys may stay unset; the plugin then sees nothing for them.
    let optional = "[config.SECRET]\nsecret = true\nrequired = false\n";
    let (_dir, loaded) = load("hostile_http", optional, &Operator::default());
    assert!(loaded.is_ok(), "{:?}", loaded.err());
}

#[tokio::test]
async fn inspect_shows_hosts_and_config_keys_even_when_not_allowed_and_never_values() {
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install(dir.path(), &["webfetch"]).unwrap();
    let operator = Operator {
        config: vec!["webfetch.API_TOKEN=tok-123".into()],
        ..Operator::default()
    };
    let host = PluginHost::new(operator.config()).unwrap();
    let info = host.inspect(&dir.path().join("webfetch.wasm")).unwrap();
    let hosts: Vec<String> = info.http.iter().map(ToString::to_string).collect();
    assert_eq!(hosts, ["example.com", "www.example.com"]);
    assert!(!info.http_allowed);
    let keys: Vec<(&str, bool, bool, bool)> = info
        .config
        .entries()
        .iter()
        .map(|e| {
            (
                e.key.name.as_str(),
                e.key.secret,
                e.key.required,
                e.value.is_some(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            ("API_TOKEN", true, false, true),
            ("USER_AGENT", false, false, false)
        ]
    );
    assert!(!format!("{info:?}").contains("tok-123"));
    assert_eq!(info.exports, ["toolhost:plugin/tools@0.2.0"]);
    assert!(
        info.imports
            .iter()
            .any(|i| i.starts_with("wasi:http/outgoing-handler@0.2.")),
        "{:?}",
        info.imports
    );
}

#[tokio::test]
async fn tool_metadata_of_a_0_2_0_plugin_reaches_the_registry() {
    let (_dir, registry) = load("metadata", "", &Operator::default());
    let registry = registry.unwrap();
    let definitions = registry.definitions();
    let weather = definitions.iter().find(|d| d.name == "weather").unwrap();
    assert_eq!(weather.title.as_deref(), Some("Get weather"));
    assert_eq!(
        weather.annotations,
        toolhost::registry::ToolAnnotations {
            read_only_hint: Some(true),
            destructive_hint: None,
            idempotent_hint: Some(true),
            open_world_hint: Some(true),
        }
    );
    assert_eq!(
        weather.output_schema,
        Some(
            json!({"type":"object","properties":{"celsius":{"type":"number"}},"required":["celsius"]})
        )
    );
    let plain = definitions.iter().find(|d| d.name == "plain").unwrap();
    assert_eq!(
        (plain.title.as_ref(), plain.output_schema.as_ref()),
        (None, None)
    );
    assert!(plain.annotations.is_empty());
    assert_eq!(
        call(&registry, "weather", json!({})).await.unwrap(),
        json!({"celsius": 21.5})
    );

    // Through the SDK's builders on `Tool` (webfetch sets a title and two hints).
    let (_dir, registry) = load("webfetch", "", &Operator::default());
    let definitions = registry.unwrap().definitions();
    let fetch = definitions.iter().find(|d| d.name == "fetch").unwrap();
    assert_eq!(fetch.title.as_deref(), Some("Fetch a web page"));
    assert_eq!(
        fetch.annotations,
        toolhost::registry::ToolAnnotations {
            read_only_hint: Some(true),
            destructive_hint: None,
            idempotent_hint: None,
            open_world_hint: Some(true),
        }
    );
    assert_eq!(fetch.output_schema, None);
}

/// A self-signed certificate for `localhost.test` (made with openssl for this test; no
/// public root signs it).
const SELF_SIGNED_CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBpDCCAUqgAwIBAgIUILLPBVi9DyOjrwRoZZX/gD9zxscwCgYIKoZIzj0EAwIw
GTEXMBUGA1UEAwwObG9jYWxob3N0LnRlc3QwIBcNMjYxMjAzMDk0NzI4WhgPMjEy
NjExMDkwOTQ3MjhaMBkxFzAVBgNVBAMMDmxvY2FsaG9zdC50ZXN0MFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAEo/fY4lpGehZHxbrvnMuQ4jLfjFzvbwZFK6WcwEI5
cpKDvHdavatPQ6Sca688MSUSdpeNKENiKe6ySSfNydOBJqNuMGwwHQYDVR0OBBYE
FO63vV91o50PVuIDZYiQ2iY/5jm7MB8GA1UdIwQYMBaAFO63vV91o50PVuIDZYiQ
2iY/5jm7MA8GA1UdEwEB/wQFMAMBAf8wGQYDVR0RBBIwEIIObG9jYWxob3N0LnRl
c3QwCgYIKoZIzj0EAwIDSAAwRQIgY9GMRmfbyEeImqGzRfscj0F9LKKP5VTJojRW
Ve6eliYCIQClmACx1IzM/XjLnhBbmQtuFLi6qDXrL4ERtFWufA9Sgg==
-----END CERTIFICATE-----
";
const SELF_SIGNED_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgaCQvqboZlXaB1f91
N7gBn47NMPIL2A7zpykNiyBOcumhRANCAASj99jiWkZ6FkfFuu+cy5DiMt+MXO9v
BkUrpZzAQjlykoO8d1q9q09DpJxrrzwxJRJ2l40oQ2Ip7rJJJ83J04Em
-----END PRIVATE KEY-----
";

/// HTTPS is TLS with certificate checks: a server whose certificate no trusted root
/// signs is refused during the handshake, before any HTTP is sent.
#[tokio::test]
async fn https_refuses_a_certificate_no_trusted_root_signed() {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let certs = vec![CertificateDer::from_pem_slice(SELF_SIGNED_CERT.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(SELF_SIGNED_KEY.as_bytes()).unwrap();
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let handshakes: Arc<Mutex<Vec<bool>>> = Arc::default();
    let seen = Arc::clone(&handshakes);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let ok = acceptor.accept(stream).await.is_ok();
            seen.lock().unwrap().push(ok);
        }
    });

    let pattern: &'static str = Box::leak(format!("localhost.test:{port}").into_boxed_str());
    let operator = Operator {
        allow: vec![pattern],
        allow_nets: vec!["127.0.0.1"],
        resolver: FakeResolver::with("localhost.test", "127.0.0.1"),
        ..Operator::default()
    };
    let manifest = format!("[grants]\nhttp = [\"{pattern}\"]\n");
    let (_dir, registry) = load("hostile_http", &manifest, &operator);
    let registry = registry.unwrap();
    let message = failed_message(
        call(
            &registry,
            "send",
            json!({"url": format!("https://{pattern}/")}),
        )
        .await,
    );
    assert_eq!(
        message,
        format!("the request to https://{pattern} failed: its TLS certificate is not valid for that host")
    );
    // The server's side of the refused handshake may land just after the call returns.
    let deadline = Instant::now() + Duration::from_secs(5);
    while handshakes.lock().unwrap().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        *handshakes.lock().unwrap(),
        [false],
        "one handshake, refused"
    );
}

/// DNS rebinding: a name first resolves to an allowed address, then to a forbidden one
/// (127.0.0.2 here, standing for an internal service). Each request is looked up once
/// and the connection goes to the address that was checked, so the second answer is
/// refused and never reached, and an answer mixing both reaches only the allowed one.
#[tokio::test]
async fn dns_rebinding_cannot_reach_an_address_that_was_not_checked() {
    let public = Server::start();
    let port = public.port();
    let Ok(internal) = Server::bind(&format!("127.0.0.2:{port}")) else {
        panic!("cannot listen on 127.0.0.2:{port}; this test needs Linux's 127/8 loopback");
    };
    let pattern: &'static str = Box::leak(format!("http://rebind.test:{port}").into_boxed_str());
    let manifest = format!("[grants]\nhttp = [\"{pattern}\"]\n");
    let allowed: IpAddr = "127.0.0.1".parse().unwrap();
    let forbidden: IpAddr = "127.0.0.2".parse().unwrap();
    let resolver = Arc::new(Rebinding {
        answers: vec![vec![allowed], vec![forbidden], vec![forbidden, allowed]],
        asked: Mutex::new(0),
    });
    let operator = Operator {
        allow: vec![pattern],
        // Only 127.0.0.1 is opened; 127.0.0.2 stays a forbidden loopback address.
        allow_nets: vec!["127.0.0.1/32"],
        ..Operator::default()
    };
    let mut config = operator.config();
    config.http.resolver = Arc::<Rebinding>::clone(&resolver);
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(dir.path(), &["hostile_http"]).unwrap();
    std::fs::write(dir.path().join("hostile_http.toml"), manifest).unwrap();
    let registry = Registry::new();
    PluginHost::new(config)
        .unwrap()
        .load_file(&dir.path().join("hostile_http.wasm"), &registry)
        .unwrap();
    let url = format!("{pattern}/hello");

    let answer = call(&registry, "send", json!({ "url": url }))
        .await
        .unwrap();
    assert_eq!(answer["status"], 200);
    assert_eq!(*resolver.asked.lock().unwrap(), 1, "one lookup per request");
    assert_eq!(public.seen().len(), 1);

    let message = failed_message(call(&registry, "send", json!({ "url": url })).await);
    assert_eq!(
        message,
        format!("the request to {pattern} was refused: its address is on a private or local network, which this tool may not reach")
    );
    assert_eq!(*resolver.asked.lock().unwrap(), 2);

    let answer = call(&registry, "send", json!({ "url": url }))
        .await
        .unwrap();
    assert_eq!(answer["status"], 200);
    assert_eq!(*resolver.asked.lock().unwrap(), 3);
    assert_eq!(public.seen().len(), 2);
    assert!(
        internal.seen().is_empty(),
        "the rebound address was reached: {:?}",
        internal.seen()
    );
}

/// The connect limit (`http_connect_timeout_ms`, lowered to 300 ms here) bounds resolve,
/// connect and TLS handshake: a server that accepts the connection and never answers the
/// handshake is given up on after it, long before the call's deadline (10 s).
#[tokio::test]
async fn a_silent_server_is_given_up_on_at_the_connect_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    let keep = Arc::clone(&held);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            keep.lock().unwrap().push(stream); // accepted, never read or written
        }
    });
    let pattern: &'static str = Box::leak(format!("silent.test:{port}").into_boxed_str());
    let operator = Operator {
        allow: vec![pattern],
        allow_nets: vec!["127.0.0.1"],
        resolver: FakeResolver::with("silent.test", "127.0.0.1"),
        ..Operator::default()
    };
    let manifest = format!(
        "[grants]\nhttp = [\"{pattern}\"]\n[limits]\ntimeout_ms = 10000\nhttp_connect_timeout_ms = 300\n"
    );
    let (_dir, registry) = load("hostile_http", &manifest, &operator);
    let registry = registry.unwrap();
    let started = Instant::now();
    let message = failed_message(
        call(
            &registry,
            "send",
            json!({"url": format!("https://{pattern}/")}),
        )
        .await,
    );
    let elapsed = started.elapsed();
    assert_eq!(
        message,
        format!("the request to https://{pattern} timed out; the service may be slow or down, try again later or ask for less")
    );
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(5),
        "took {elapsed:?}"
    );
    assert_eq!(held.lock().unwrap().len(), 1, "one connection was made");
}
