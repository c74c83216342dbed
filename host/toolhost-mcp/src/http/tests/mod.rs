//! The HTTP transport against a real HTTP client: hostile hosts, origins, tokens,
//! bodies and floods first, then sessions, streams and shutdown.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, StatusCode};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Notify};

use toolhost::registry::{
    Arguments, CallContext, Environment, Registry, ToolDefinition, ToolError, ToolResult,
};

use super::streams::event_stream;
use super::*;
use crate::session::Message;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
const TOKEN_A: &str = "token-aaaaaaaaaaaaaaaa";
const TOKEN_B: &str = "token-bbbbbbbbbbbbbbbb";

/// Tools for the tests: `greet`, `hold` (runs until the test releases it or it is
/// cancelled, counting how many run at once), `wait` (until cancelled; counts
/// cancellations) and `nap` (300 ms).
#[derive(Default)]
struct Probe {
    running: AtomicUsize,
    peak: AtomicUsize,
    cancelled: AtomicUsize,
    release: Notify,
}

fn registry(probe: &Arc<Probe>) -> Arc<Registry> {
    let registry = Registry::new();
    let object = json!({"type": "object"});
    registry
        .register(
            ToolDefinition::new("greet", "Greet.", object.clone()),
            |_ctx: CallContext, args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new(format!(
                    "Hello, {}!",
                    args.optional_str("name")?.unwrap_or("you")
                )))
            },
        )
        .unwrap();
    let p = Arc::clone(probe);
    registry
        .register(
            ToolDefinition::new("hold", "Hold.", object.clone()),
            move |ctx: CallContext, _args: Arguments, _env: Environment| {
                let p = Arc::clone(&p);
                async move {
                    let now = p.running.fetch_add(1, Ordering::SeqCst) + 1;
                    p.peak.fetch_max(now, Ordering::SeqCst);
                    tokio::select! {
                        () = p.release.notified() => {}
                        () = ctx.cancellation().cancelled() => {}
                    }
                    p.running.fetch_sub(1, Ordering::SeqCst);
                    Ok(ToolResult::new("held"))
                }
            },
        )
        .unwrap();
    let p = Arc::clone(probe);
    registry
        .register(
            ToolDefinition::new("wait", "Wait.", object.clone()),
            move |ctx: CallContext, _args: Arguments, _env: Environment| {
                let p = Arc::clone(&p);
                async move {
                    ctx.cancellation().cancelled().await;
                    p.cancelled.fetch_add(1, Ordering::SeqCst);
                    Err::<ToolResult, _>(ToolError::failed("cancelled"))
                }
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("nap", "Nap.", object),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok(ToolResult::new("rested"))
            },
        )
        .unwrap();
    Arc::new(registry.with_call_timeout(Duration::from_secs(20)))
}

struct Running {
    addr: SocketAddr,
    app: Arc<App>,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<Result<(), HttpError>>,
}

impl Running {
    async fn stop(mut self) -> Duration {
        let started = Instant::now();
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(20), self.done)
            .await
            .expect("the server stops")
            .unwrap()
            .unwrap();
        started.elapsed()
    }
}

async fn start(config: HttpConfig, probe: &Arc<Probe>) -> Running {
    let server = HttpServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        config,
        Registries::Shared(registry(probe)),
    )
    .await
    .unwrap();
    let (addr, app) = (server.local_addr(), Arc::clone(&server.app));
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        app,
        stop: Some(stop),
        done,
    }
}

fn stateful() -> HttpConfig {
    HttpConfig::new(Some(SessionKey::random().unwrap()))
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.body))
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
    fn session(&self) -> String {
        self.header(SESSION_HEADER)
            .expect("a session id")
            .to_owned()
    }
}

/// One request on a fresh HTTP/1.1 connection. `headers` replace the defaults
/// (Host, Content-Type, Accept) of the same name.
async fn send(addr: SocketAddr, method: Method, headers: &[(&str, &str)], body: &str) -> Reply {
    send_body(
        addr,
        method,
        headers,
        Full::new(Bytes::from(body.to_owned())),
    )
    .await
}

async fn send_body<B>(addr: SocketAddr, method: Method, headers: &[(&str, &str)], body: B) -> Reply
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut request = hyper::Request::builder().method(method).uri(MCP_PATH);
    let host = format!("127.0.0.1:{}", addr.port());
    for (name, value) in [
        ("host", host.as_str()),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ] {
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
            request = request.header(name, value);
        }
    }
    for (name, value) in headers {
        if !value.is_empty() {
            request = request.header(*name, *value);
        }
    }
    let response = tokio::time::timeout(
        Duration::from_secs(20),
        sender.send_request(request.body(body).unwrap()),
    )
    .await
    .expect("an answer in time")
    .unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

async fn post(addr: SocketAddr, headers: &[(&str, &str)], body: &str) -> Reply {
    send(addr, Method::POST, headers, body).await
}

fn call(id: u64, tool: &str) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{}}})
        .to_string()
}

#[tokio::test]
async fn foreign_hosts_and_origins_are_refused() {
    let probe = Arc::default();
    let server = start(stateful(), &probe).await;
    let port = server.addr.port();
    // DNS rebinding: the attacker's name in Host, with or without its Origin.
    for headers in [
        vec![("host", "evil.example.com")],
        vec![
            ("host", "evil.example.com:1"),
            ("origin", "http://evil.example.com"),
        ],
        vec![("host", "")],
        vec![("host", "127.0.0.1.evil.example.com")],
    ] {
        let reply = post(server.addr, &headers, INIT).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{headers:?}");
        assert!(
            reply.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--allow-host"),
            "{}",
            reply.body
        );
    }
    // A Host that is not text does not fall back to the request line's authority.
    let stream = TcpStream::connect(server.addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::post(format!("http://127.0.0.1:{port}{MCP_PATH}"))
        .header(
            "host",
            axum::http::HeaderValue::from_bytes(b"evil\xff.example").unwrap(),
        )
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(INIT)))
        .unwrap();
    let status = sender.send_request(request).await.unwrap().status();
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A page on another local port (another app's, or an attacker's) is refused.
    let reply = post(server.addr, &[("origin", "http://localhost:3000")], INIT).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert!(reply.body.contains("--allow-origin http://localhost:3000"));
    let reply = post(server.addr, &[("origin", "null")], INIT).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    // The server's own origin, by any loopback name, and no Origin at all, pass.
    for origin in [
        format!("http://127.0.0.1:{port}"),
        format!("http://LOCALHOST:{port}/"),
    ] {
        let reply = post(server.addr, &[("origin", &origin)], INIT).await;
        assert_eq!(reply.status, StatusCode::OK, "{origin}: {}", reply.body);
    }
    for host in ["localhost", &format!("[::1]:{port}")] {
        let reply = post(server.addr, &[("host", host)], INIT).await;
        assert_eq!(reply.status, StatusCode::OK, "{host}");
    }
    server.stop().await;
}

#[tokio::test]
async fn allowed_hosts_and_origins_can_be_added() {
    let probe = Arc::default();
    let mut config = stateful();
    config.allowed_hosts = vec!["mcp.example.org".into()];
    config.allowed_origins = vec!["https://app.example.org/".into()];
    let server = start(config, &probe).await;
    let reply = post(
        server.addr,
        &[
            ("host", "MCP.example.org:443"),
            ("origin", "https://app.example.org"),
        ],
        INIT,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let reply = post(server.addr, &[("host", "other.example.org")], INIT).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    server.stop().await;
}

fn tokens() -> Tokens {
    let mut tokens = Tokens::default();
    tokens.add(TOKEN_A, Some("alice")).unwrap();
    tokens.add(TOKEN_B, Some("bob")).unwrap();
    tokens
}

#[tokio::test]
async fn bearer_tokens_are_required_and_checked() {
    let probe = Arc::default();
    let mut config = stateful();
    config.tokens = Some(tokens());
    let server = start(config, &probe).await;
    let reply = post(server.addr, &[], INIT).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        reply.header("www-authenticate"),
        Some(r#"Bearer realm="wasm-toolhost""#)
    );
    assert_eq!(reply.json()["error"]["code"], -32000);
    for wrong in [
        "Bearer token-aaaaaaaaaaaaaaab",
        "Bearer token-aaaaaaaaaaaaaaa",
        "Bearer ",
        &format!("Basic {TOKEN_A}"),
        TOKEN_A,
    ] {
        let reply = post(server.addr, &[("authorization", wrong)], INIT).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{wrong}");
        assert!(!reply.body.contains(TOKEN_A), "no token echoed");
    }
    let reply = post(
        server.addr,
        &[("authorization", "Bearer token-wrongwrongwrong")],
        INIT,
    )
    .await;
    assert_eq!(
        reply.header("www-authenticate"),
        Some(r#"Bearer realm="wasm-toolhost", error="invalid_token""#)
    );
    let auth_a = format!("Bearer {TOKEN_A}");
    let reply = post(server.addr, &[("authorization", &auth_a)], INIT).await;
    assert_eq!(reply.status, StatusCode::OK);
    let session = reply.session();
    // Alice's session is not Bob's: his token with her session id finds nothing.
    let auth_b = format!("bearer {TOKEN_B}");
    let reply = post(
        server.addr,
        &[("authorization", &auth_b), (SESSION_HEADER, &session)],
        LIST,
    )
    .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    let reply = post(
        server.addr,
        &[("authorization", &auth_a), (SESSION_HEADER, &session)],
        LIST,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    // Every method is guarded.
    for method in [Method::GET, Method::DELETE] {
        let reply = send(
            server.addr,
            method.clone(),
            &[(SESSION_HEADER, &session)],
            "",
        )
        .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{method}");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_public_address_needs_tokens_or_the_explicit_flag() {
    let registries = || Registries::Shared(Arc::new(Registry::new()));
    let public: SocketAddr = "0.0.0.0:0".parse().unwrap();
    let err = HttpServer::bind(public, stateful(), registries())
        .await
        .unwrap_err();
    assert!(matches!(err, HttpError::PublicWithoutAuth { .. }), "{err}");
    assert!(err.to_string().contains("--auth-token-file"), "{err}");
    let mut config = stateful();
    config.tokens = Some(tokens());
    assert!(HttpServer::bind(public, config, registries()).await.is_ok());
    let mut config = stateful();
    config.insecure_public = true;
    assert!(HttpServer::bind(public, config, registries()).await.is_ok());
    let mut config = stateful();
    config.max_body_bytes = 0;
    let err = HttpServer::bind("127.0.0.1:0".parse().unwrap(), config, registries())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the request body limit is 0, which would serve nothing; give at least 1"
    );
}

#[tokio::test]
async fn bodies_over_the_limit_are_refused_declared_or_streamed() {
    let probe = Arc::default();
    let mut config = HttpConfig::new(None);
    config.max_body_bytes = 1000;
    let server = start(config, &probe).await;
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"greet","arguments":{{"name":"{}"}}}}}}"#,
        "x".repeat(2000)
    );
    let reply = post(server.addr, &[], &big).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(reply.body.contains("over 1000 bytes"), "{}", reply.body);
    // Chunked, no declared length: cut off while reading.
    let chunks = futures_util::stream::iter(
        (0..100)
            .map(|_| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(vec![b' '; 100])))),
    );
    let reply = send_body(server.addr, Method::POST, &[], StreamBody::new(chunks)).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    // Just under it is served.
    let reply = post(server.addr, &[], &call(1, "greet")).await;
    assert_eq!(reply.status, StatusCode::OK);
    server.stop().await;
}

#[tokio::test]
async fn malformed_requests_get_clear_errors() {
    let probe = Arc::default();
    let server = start(stateful(), &probe).await;
    let reply = post(server.addr, &[("content-type", "text/plain")], INIT).await;
    assert_eq!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let reply = post(server.addr, &[("accept", "text/html")], INIT).await;
    assert_eq!(reply.status, StatusCode::NOT_ACCEPTABLE);
    // A client that takes only event streams gets its answer as one event.
    let reply = post(server.addr, &[("accept", "text/event-stream")], INIT).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    assert!(
        reply.body.starts_with("event: message\ndata: {\"id\":1,") && reply.body.ends_with("}\n\n"),
        "{}",
        reply.body
    );
    let reply = post(server.addr, &[(PROTOCOL_HEADER, "1999-01-01")], INIT).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.json()["error"]["code"], -32022);
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Bad Request: unsupported MCP-Protocol-Version \"1999-01-01\"; this server speaks 2026-07-28, 2025-11-25"),
        "{}",
        reply.body
    );
    let reply = post(server.addr, &[], "not json").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.json()["error"]["code"], -32700);
    assert_eq!(reply.json()["id"], Value::Null);
    let reply = post(server.addr, &[], "").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let reply = post(server.addr, &[], r#"{"jsonrpc":"2.0","id":3}"#).await;
    assert_eq!(
        (reply.status, reply.json()["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!(-32600))
    );
    // Only /mcp, and only its methods.
    let reply = send(server.addr, Method::PUT, &[], INIT).await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    server.stop().await;
}

#[tokio::test]
async fn sessions_from_initialize_to_delete() {
    let probe = Arc::default();
    let server = start(stateful(), &probe).await;
    let addr = server.addr;
    let reply = post(addr, &[], INIT).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.json()["result"]["protocolVersion"], "2025-06-18");
    let id = reply.session();
    assert_eq!(id.len(), SESSION_ID_LEN);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
    // Each initialize opens a new session.
    assert_ne!(post(addr, &[], INIT).await.session(), id);

    let reply = post(addr, &[], LIST).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(
        reply.body.contains("no Mcp-Session-Id header"),
        "{}",
        reply.body
    );
    let forged = format!("{}{}", &id[..32], "0".repeat(32));
    for bad in [forged.as_str(), "x", "../../etc"] {
        let reply = post(addr, &[(SESSION_HEADER, bad)], LIST).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{bad}");
    }
    let session = [
        (SESSION_HEADER, id.as_str()),
        (PROTOCOL_HEADER, "2025-06-18"),
    ];
    let reply = post(
        addr,
        &session,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::ACCEPTED, "")
    );
    let reply = post(addr, &session, LIST).await;
    assert_eq!(reply.status, StatusCode::OK);
    let list = reply.json();
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["greet", "hold", "wait", "nap"]);
    let reply = post(addr, &session, &call(5, "greet")).await;
    assert_eq!(
        reply.json(),
        json!({"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"Hello, you!"}],"isError":false}})
    );
    // The calls run in the session: its id is the environment's session id.
    assert_eq!(
        server
            .app
            .sessions
            .find(&id, None)
            .await
            .unwrap()
            .environment()
            .session_id,
        id
    );

    let reply = send(addr, Method::DELETE, &session, "").await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT);
    let reply = post(addr, &session, LIST).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert!(reply.body.contains("send initialize"), "{}", reply.body);
    let reply = send(addr, Method::DELETE, &session, "").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    server.stop().await;
}

#[tokio::test]
async fn another_process_with_the_same_key_serves_the_session() {
    let probe = Arc::default();
    let secret = b"a secret shared by both processes, 32+ bytes";
    let config = || HttpConfig::new(Some(SessionKey::from_secret(secret).unwrap()));
    let (one, two) = (start(config(), &probe).await, start(config(), &probe).await);
    let other = start(stateful(), &probe).await;
    let id = post(one.addr, &[], INIT).await.session();
    let reply = post(two.addr, &[(SESSION_HEADER, &id)], &call(1, "greet")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let reply = post(other.addr, &[(SESSION_HEADER, &id)], LIST).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "a key of its own");
    for server in [one, two, other] {
        server.stop().await;
    }
}

#[tokio::test]
async fn stateless_serves_every_request_alone() {
    let probe = Arc::default();
    let server = start(HttpConfig::new(None), &probe).await;
    let reply = post(server.addr, &[], INIT).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header(SESSION_HEADER), None);
    let reply = post(server.addr, &[], &call(1, "greet")).await;
    assert_eq!(reply.status, StatusCode::OK);
    for method in [Method::GET, Method::DELETE] {
        let reply = send(server.addr, method.clone(), &[], "").await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
        assert_eq!(reply.header("allow"), Some("POST"));
    }
    server.stop().await;
}

async fn until(what: &str, condition: impl Fn() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < Duration::from_secs(20), "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn calls_over_the_global_limit_get_503_and_the_rest_go_on() {
    let probe: Arc<Probe> = Arc::default();
    let mut config = HttpConfig::new(None);
    config.limits.max_in_flight = NonZeroUsize::new(2).unwrap();
    let server = start(config, &probe).await;
    let addr = server.addr;
    let held: Vec<_> = (0..2)
        .map(|i| tokio::spawn(async move { post(addr, &[], &call(i, "hold")).await }))
        .collect();
    until("two calls hold", || {
        probe.running.load(Ordering::SeqCst) == 2
    })
    .await;
    let reply = post(addr, &[], &call(9, "greet")).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.header("retry-after"), Some("1"));
    assert_eq!(reply.json()["id"], 9);
    assert_eq!(
        reply.json()["error"]["message"],
        "Service Unavailable: 2 tool calls are running, the most allowed at once; retry when one ends"
    );
    // Methods that run no tool are still answered.
    assert_eq!(post(addr, &[], LIST).await.status, StatusCode::OK);
    probe.release.notify_waiters();
    for held in held {
        let reply = held.await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.json()["result"]["content"][0]["text"], "held");
    }
    assert_eq!(
        post(addr, &[], &call(9, "greet")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        server
            .app
            .counters
            .peak_calls_running
            .load(Ordering::SeqCst),
        2
    );
    server.stop().await;
}

#[tokio::test]
async fn one_http2_connection_runs_at_most_its_share() {
    let probe: Arc<Probe> = Arc::default();
    let mut config = HttpConfig::new(None);
    config.max_in_flight_per_connection = 2;
    let server = start(config, &probe).await;
    let stream = TcpStream::connect(server.addr).await.unwrap();
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let authority = format!("127.0.0.1:{}", server.addr.port());
    let request = |body: String| {
        hyper::Request::post(format!("http://{authority}{MCP_PATH}"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap()
    };
    // A first exchange settles the connection's settings (its stream limit).
    let mut first = sender.clone();
    let status = first
        .send_request(request(LIST.into()))
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::OK);
    let calls: Vec<_> = (0..5)
        .map(|i| {
            let mut sender = sender.clone();
            let request = request(call(i, "hold"));
            tokio::spawn(async move {
                // A stream over the limit may be refused by HTTP/2 itself (REFUSED_STREAM).
                sender.send_request(request).await.map(|r| r.status())
            })
        })
        .collect();
    until("two calls hold", || {
        probe.running.load(Ordering::SeqCst) == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(probe.running.load(Ordering::SeqCst), 2, "the others wait");
    let mut answered = 0;
    while answered < 5 {
        probe.release.notify_waiters();
        tokio::time::sleep(Duration::from_millis(50)).await;
        answered = calls.iter().filter(|c| c.is_finished()).count();
    }
    let mut ok = 0;
    for call in calls {
        match call.await.unwrap() {
            Ok(StatusCode::OK) => ok += 1,
            Ok(status) => assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE),
            Err(err) => assert!(err.to_string().contains("refused"), "{err}"),
        }
    }
    assert!(ok >= 2, "{ok}");
    assert_eq!(probe.peak.load(Ordering::SeqCst), 2);
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_its_call() {
    let probe: Arc<Probe> = Arc::default();
    let server = start(HttpConfig::new(None), &probe).await;
    let addr = server.addr;
    let request = tokio::spawn(async move { post(addr, &[], &call(1, "wait")).await });
    until("the call runs", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 1
    })
    .await;
    request.abort();
    until("the call is cancelled", || {
        probe.cancelled.load(Ordering::SeqCst) == 1
    })
    .await;
    until("its slot is free", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 0
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn a_cancelled_call_is_not_answered() {
    let probe: Arc<Probe> = Arc::default();
    let server = start(stateful(), &probe).await;
    let addr = server.addr;
    let id = post(addr, &[], INIT).await.session();
    let session = id.clone();
    let request =
        tokio::spawn(
            async move { post(addr, &[(SESSION_HEADER, &session)], &call(7, "wait")).await },
        );
    until("the call runs", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 1
    })
    .await;
    let reply = post(
        addr,
        &[(SESSION_HEADER, &id)],
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#,
    )
    .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    let reply = request.await.unwrap();
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::NO_CONTENT, "")
    );
    server.stop().await;
}

#[tokio::test]
async fn shutdown_lets_running_calls_finish() {
    let probe: Arc<Probe> = Arc::default();
    let server = start(HttpConfig::new(None), &probe).await;
    let addr = server.addr;
    let napping = tokio::spawn(async move { post(addr, &[], &call(1, "nap")).await });
    until("the call runs", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 1
    })
    .await;
    let took = server.stop().await;
    let reply = napping.await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["result"]["content"][0]["text"], "rested");
    assert!(took < Duration::from_secs(5), "{took:?}");
    // No new connection is taken.
    assert!(TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn shutdown_cancels_what_outlives_the_grace_period() {
    let probe: Arc<Probe> = Arc::default();
    let mut config = stateful();
    config.shutdown_grace = Duration::from_millis(300);
    let server = start(config, &probe).await;
    let addr = server.addr;
    let id = post(addr, &[], INIT).await.session();
    let waiting =
        tokio::spawn(async move { post(addr, &[(SESSION_HEADER, &id)], &call(1, "wait")).await });
    until("the call runs", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 1
    })
    .await;
    let took = server.stop().await;
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(probe.cancelled.load(Ordering::SeqCst), 1);
    // Its client got no answer (the call was cancelled, or the connection closed).
    if let Ok(reply) = waiting.await {
        assert_ne!(reply.status, StatusCode::OK);
    }
}

#[tokio::test]
async fn the_session_stream_carries_the_servers_own_messages() {
    let probe: Arc<Probe> = Arc::default();
    let server = start(stateful(), &probe).await;
    let addr = server.addr;
    let id = post(addr, &[], INIT).await.session();
    let reply = send(
        addr,
        Method::GET,
        &[(SESSION_HEADER, &id), ("accept", "application/json")],
        "",
    )
    .await;
    assert_eq!(reply.status, StatusCode::NOT_ACCEPTABLE);
    let reply = send(addr, Method::GET, &[("accept", "text/event-stream")], "").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);

    // Open the stream by hand, to read it while it is open.
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::get(MCP_PATH)
        .header("host", format!("127.0.0.1:{}", addr.port()))
        .header("accept", "text/event-stream")
        .header(SESSION_HEADER, &id)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    // One stream per session.
    let reply = send(
        addr,
        Method::GET,
        &[(SESSION_HEADER, &id), ("accept", "text/event-stream")],
        "",
    )
    .await;
    assert_eq!(reply.status, StatusCode::CONFLICT);

    let session = server.app.sessions.find(&id, None).await.unwrap();
    until("the stream is attached", || {
        session.notifier().is_connected()
    })
    .await;
    session
        .notifier()
        .notify("notifications/tools/list_changed", None)
        .await;
    let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        frame.into_data().unwrap(),
        Bytes::from_static(
            b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"
        )
    );
    // Ending the session ends its stream.
    assert_eq!(
        send(addr, Method::DELETE, &[(SESSION_HEADER, &id)], "")
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let end = tokio::time::timeout(Duration::from_secs(10), body.collect()).await;
    assert!(end.is_ok(), "the stream ended");
    server.stop().await;
}

#[tokio::test]
async fn a_call_with_messages_of_its_own_is_answered_as_an_event_stream() {
    let (messages_in, messages) = mpsc::channel(8);
    let (release, released) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = released.await;
        Some(Message::response(
            &RequestId::from(3),
            Bytes::from_static(b"{\"done\":true}"),
        ))
    });
    let token = CancellationToken::new();
    let response = event_stream(
        Message::notification("notifications/progress", Some(&json!({"progress": 1}))),
        messages,
        task,
        token.clone().drop_guard(),
    );
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    messages_in
        .send(Message::notification(
            "notifications/progress",
            Some(&json!({"progress": 2})),
        ))
        .await
        .unwrap();
    drop(messages_in);
    let _ = release.send(());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        std::str::from_utf8(&body).unwrap(),
        concat!(
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n",
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":2}}\n\n",
            "event: message\ndata: {\"id\":3,\"jsonrpc\":\"2.0\",\"result\":{\"done\":true}}\n\n",
        )
    );
    assert!(token.is_cancelled(), "the guard is dropped with the stream");
}

/// A 2026-07-28 request whose `_meta` names its version, for `method` (and tool `name`).
fn modern(id: u64, method: &str, name: Option<&str>) -> String {
    let mut params = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }});
    if let Some(name) = name {
        params["name"] = json!(name);
        params["arguments"] = json!({});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// A hostile client (or a proxy routing on headers) cannot make the server act on a
/// tool or method other than the one its headers name: 2026-07-28 requests whose
/// mirrored headers are missing or differ from the body are refused with HeaderMismatch,
/// and nothing runs.
#[tokio::test]
async fn modern_requests_must_match_their_headers() {
    let probe = Arc::default();
    let server = start(stateful(), &probe).await;
    let v = (PROTOCOL_HEADER, "2026-07-28");
    let mismatch = |reply: &Reply, what: &str| {
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let body = reply.json();
        assert_eq!(body["error"]["code"], -32020, "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(what),
            "{body}"
        );
    };
    // The header names a harmless tool, the body a long-running one.
    let hold = modern(1, "tools/call", Some("hold"));
    let reply = post(
        server.addr,
        &[v, ("mcp-method", "tools/call"), ("mcp-name", "greet")],
        &hold,
    )
    .await;
    mismatch(
        &reply,
        "Mcp-Name header value \"greet\" does not match body value \"hold\"",
    );
    let reply = post(server.addr, &[v, ("mcp-method", "tools/call")], &hold).await;
    mismatch(&reply, "no Mcp-Name header");
    let reply = post(server.addr, &[v, ("mcp-name", "hold")], &hold).await;
    mismatch(&reply, "no Mcp-Method header");
    let reply = post(
        server.addr,
        &[v, ("mcp-method", "tools/list"), ("mcp-name", "hold")],
        &hold,
    )
    .await;
    mismatch(&reply, "Mcp-Method header value 'tools/list'");
    let reply = post(
        server.addr,
        &[("mcp-method", "tools/call"), ("mcp-name", "hold")],
        &hold,
    )
    .await;
    mismatch(&reply, "no MCP-Protocol-Version header");
    let reply = post(
        server.addr,
        &[
            (PROTOCOL_HEADER, "2025-11-25"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "hold"),
        ],
        &hold,
    )
    .await;
    mismatch(
        &reply,
        "'2025-11-25' does not match body value '2026-07-28'",
    );
    let reply = post(
        server.addr,
        &[
            v,
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?!!?="),
        ],
        &hold,
    )
    .await;
    mismatch(&reply, "not valid =?base64?...?=");
    assert_eq!(probe.peak.load(Ordering::SeqCst), 0, "nothing ran");

    // Matching headers (the name in its Base64 form too) are served, without a session.
    let greet = modern(2, "tools/call", Some("greet"));
    let reply = post(
        server.addr,
        &[
            v,
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?Z3JlZXQ=?="),
        ],
        &greet,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.json()["result"]["resultType"], "complete");
    assert!(reply.headers.get(SESSION_HEADER).is_none());
    // An unknown method is 404 with its JSON-RPC error; an unknown version 400 -32022.
    let reply = post(
        server.addr,
        &[v, ("mcp-method", "nope")],
        &modern(3, "nope", None),
    )
    .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);
    assert_eq!(reply.json()["error"]["code"], -32601);
    let reply = post(server.addr, &[(PROTOCOL_HEADER, "2099-01-01")], &greet).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let body = reply.json();
    assert_eq!(body["error"]["code"], -32022);
    assert_eq!(body["error"]["data"]["requested"], "2099-01-01");
    assert!(body.get("id").is_none(), "{body}");
    server.stop().await;
}

/// Batches over HTTP follow the session's revision: served after a 2025-03-26
/// `initialize` (one JSON array back), refused after any other.
#[tokio::test]
async fn batches_only_in_a_2025_03_26_session() {
    let probe = Arc::default();
    let server = start(stateful(), &probe).await;
    let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}]"#;
    for (version, served) in [("2025-03-26", true), ("2025-06-18", false)] {
        let init = INIT.replace("2025-06-18", version);
        let reply = post(server.addr, &[], &init).await;
        let id = reply.headers[SESSION_HEADER].to_str().unwrap().to_owned();
        let reply = post(server.addr, &[(SESSION_HEADER, id.as_str())], batch).await;
        if served {
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
            let answers = reply.json();
            assert_eq!(answers[0], json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
            assert_eq!(answers[1]["id"], 2);
            assert_eq!(answers[1]["result"]["content"][0]["text"], "Hello, Ada!");
            assert_eq!(answers.as_array().unwrap().len(), 2);
        } else {
            assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
            assert_eq!(reply.json()["error"]["code"], -32600, "{}", reply.body);
        }
    }
    server.stop().await;
}
