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
    connections: Arc<conns::Table>,
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

    /// Calls `tool` (request id `id`, in `session` if given) in the background and
    /// returns once the call runs: the set-up of the tests of a call that is cancelled,
    /// outlives its client or meets the server's shutdown.
    async fn running_call(
        &self,
        session: Option<&str>,
        id: u64,
        tool: &str,
    ) -> tokio::task::JoinHandle<Reply> {
        let (addr, body) = (self.addr, call(id, tool));
        let session = session.map(str::to_owned);
        let request = tokio::spawn(async move {
            let headers: Vec<(&str, &str)> = session
                .iter()
                .map(|id| (SESSION_HEADER, id.as_str()))
                .collect();
            post(addr, &headers, &body).await
        });
        until("the call runs", || {
            self.app.counters.calls_running.load(Ordering::SeqCst) == 1
        })
        .await;
        request
    }
}

async fn start(config: HttpConfig, probe: &Arc<Probe>) -> Running {
    let server = HttpServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        config,
        Registries::shared(registry(probe)),
    )
    .await
    .unwrap();
    let (addr, app) = (server.local_addr(), Arc::clone(&server.service.app));
    let connections = Arc::clone(&server.table);
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        app,
        connections,
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
    send_to(addr, MCP_PATH, method, headers, body).await
}

/// [`send_body`] to `path`.
async fn send_to<B>(
    addr: SocketAddr,
    path: &str,
    method: Method,
    headers: &[(&str, &str)],
    body: B,
) -> Reply
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut request = hyper::Request::builder().method(method).uri(path);
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

fn tokens() -> Tokens {
    let mut tokens = Tokens::default();
    tokens.add(TOKEN_A, Some("alice")).unwrap();
    tokens.add(TOKEN_B, Some("bob")).unwrap();
    tokens
}

async fn until(what: &str, condition: impl Fn() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < Duration::from_secs(20), "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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

mod admit;
mod calls;
mod catalog;
mod elicit;
mod mount;
mod oauth;
mod quotas;
mod resources;
mod sessions;
mod storms;
mod streams;
mod tasks;
