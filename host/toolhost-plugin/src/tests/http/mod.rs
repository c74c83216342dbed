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
use tracing_subscriber::layer::SubscriberExt;

use toolhost::registry::{CallContext, Environment, Registry, ToolCall, ToolError};

use super::*;
use crate::http_policy::{parse_allowed_net, Resolve};

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

    /// `http://127.0.0.1:PORT`, as a grant pattern (leaked: [`Operator`] holds `'static`
    /// patterns; a test leaks a few bytes).
    fn origin(&self) -> &'static str {
        Box::leak(format!("http://127.0.0.1:{}", self.port()).into_boxed_str())
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
                observer: None,
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

mod config;
mod requests;
