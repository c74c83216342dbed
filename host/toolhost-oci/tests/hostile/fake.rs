//! A small fake registry on 127.0.0.1: HTTP/1.1, one request per connection, answers
//! chosen per test by a routing function, every request recorded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A request as the fake saw it.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: HashMap<String, String>,
}

impl Request {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// What the fake answers.
pub(crate) enum Reply {
    /// A complete answer.
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// `status` and headers, then `chunk` again and again (after `pause` each time)
    /// until the client hangs up, or until the fake's `Endless` answers together wrote
    /// `up_to` bytes (no length).
    Endless {
        status: u16,
        headers: Vec<(String, String)>,
        chunk: Vec<u8>,
        pause: Duration,
        up_to: u64,
    },
    /// Accept, read the request, never answer.
    Hang,
}

impl Reply {
    pub(crate) fn json(status: u16, body: &serde_json::Value) -> Self {
        Reply::Full {
            status,
            headers: vec![(
                "Content-Type".into(),
                "application/vnd.oci.image.manifest.v1+json".into(),
            )],
            body: serde_json::to_vec(body).unwrap(),
        }
    }

    pub(crate) fn bytes(body: &[u8]) -> Self {
        Reply::Full {
            status: 200,
            headers: vec![("Content-Type".into(), "application/octet-stream".into())],
            body: body.to_vec(),
        }
    }

    pub(crate) fn status(status: u16, body: &str) -> Self {
        Reply::Full {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.as_bytes().to_vec(),
        }
    }

    /// 200, then `chunk` forever (up to 8 GiB).
    pub(crate) fn endless(chunk: Vec<u8>) -> Self {
        Reply::Endless {
            status: 200,
            headers: vec![],
            chunk,
            pause: Duration::ZERO,
            up_to: 8 << 30,
        }
    }

    pub(crate) fn redirect(location: &str) -> Self {
        Reply::Full {
            status: 307,
            headers: vec![("Location".into(), location.into())],
            body: Vec::new(),
        }
    }
}

type Route = dyn Fn(&Request) -> Reply + Send + Sync;

/// A running fake registry.
pub(crate) struct Fake {
    pub(crate) address: String,
    pub(crate) requests: Arc<Mutex<Vec<Request>>>,
    /// Body bytes written by `Endless` answers, all together.
    pub(crate) endless_bytes: Arc<AtomicU64>,
}

impl Fake {
    /// Starts serving `route` on a free port of 127.0.0.1.
    pub(crate) async fn start(route: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let endless_bytes = Arc::new(AtomicU64::new(0));
        let route: Arc<Route> = Arc::new(route);
        let (seen, sent) = (Arc::clone(&requests), Arc::clone(&endless_bytes));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (route, seen, sent) =
                    (Arc::clone(&route), Arc::clone(&seen), Arc::clone(&sent));
                tokio::spawn(async move {
                    let _ = serve(stream, route, seen, sent).await;
                });
            }
        });
        Fake {
            address,
            requests,
            endless_bytes,
        }
    }

    /// The requests so far.
    pub(crate) fn seen(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// The requests whose path starts with `prefix`.
    pub(crate) fn seen_at(&self, prefix: &str) -> Vec<Request> {
        self.seen()
            .into_iter()
            .filter(|r| r.path.starts_with(prefix))
            .collect()
    }
}

async fn serve(
    mut stream: TcpStream,
    route: Arc<Route>,
    seen: Arc<Mutex<Vec<Request>>>,
    sent: Arc<AtomicU64>,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut byte = [0_u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await? == 0 || head.len() > 64 * 1024 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let path = first.next().unwrap_or_default().to_owned();
    let headers: HashMap<String, String> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    // Drain a request body (uploads are not part of these tests, but be polite).
    if let Some(length) = headers
        .get("content-length")
        .and_then(|l| l.parse::<usize>().ok())
    {
        let mut body = vec![0_u8; length.min(1 << 20)];
        stream.read_exact(&mut body).await?;
    }
    let request = Request {
        method,
        path,
        headers,
    };
    seen.lock().unwrap().push(request.clone());
    match route(&request) {
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut out = format!(
                "HTTP/1.1 {status} X\r\nConnection: close\r\nContent-Length: {}\r\n",
                body.len()
            );
            for (name, value) in headers {
                out.push_str(&format!("{name}: {value}\r\n"));
            }
            out.push_str("\r\n");
            stream.write_all(out.as_bytes()).await?;
            stream.write_all(&body).await?;
            stream.shutdown().await
        }
        Reply::Endless {
            status,
            headers,
            chunk,
            pause,
            up_to,
        } => {
            let mut out = format!("HTTP/1.1 {status} X\r\nConnection: close\r\n");
            for (name, value) in headers {
                out.push_str(&format!("{name}: {value}\r\n"));
            }
            out.push_str("\r\n");
            stream.write_all(out.as_bytes()).await?;
            // Stop at `up_to` (at most 8 GiB) whatever happens, so a broken client cannot
            // hang the test.
            while sent.load(Ordering::Relaxed) < up_to.min(8 << 30) {
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
                stream.write_all(&chunk).await?;
                sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
            Ok(())
        }
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        }
    }
}

/// `sha256:` and the hex digest.
pub(crate) fn digest(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// A plugin artifact's manifest: a config of `config_type` and these layers
/// (media type, digest, size, alternate urls).
pub(crate) fn manifest(
    config: &[u8],
    layers: &[(&str, String, u64, Option<Vec<String>>)],
) -> serde_json::Value {
    let layers: Vec<serde_json::Value> = layers
        .iter()
        .map(|(media_type, digest, size, urls)| {
            let mut layer = serde_json::json!({
                "mediaType": media_type,
                "digest": digest,
                "size": size,
            });
            if let Some(urls) = urls {
                layer["urls"] = serde_json::json!(urls);
            }
            layer
        })
        .collect();
    serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.empty.v1+json",
            "digest": digest(config),
            "size": config.len(),
        },
        "layers": layers,
    })
}
