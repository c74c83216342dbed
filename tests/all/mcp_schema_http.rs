//! Every message the MCP server sends over Streamable HTTP, checked against the official
//! schema of the session's revision: the scripts of `mcp_schema.rs`, posted by a bare
//! HTTP/1.1 client so that what goes over the wire is what is checked.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use toolhost::registry::Registry;
use toolhost_mcp::Revision;

use super::mcp_schema::*;

/// One HTTP/1.1 exchange with the server: the status, the headers (names in lower
/// case) and the JSON-RPC messages of the body as they come (one for a JSON answer,
/// each event's for an event stream). A bare client on purpose: what goes over the
/// wire is what is checked.
pub(crate) struct Exchange {
    pub(crate) status: u16,
    pub(crate) headers: std::collections::HashMap<String, String>,
    pub(crate) messages: tokio::sync::mpsc::UnboundedReceiver<Value>,
}

pub(crate) async fn post(
    addr: std::net::SocketAddr,
    headers: &[(&str, &str)],
    body: &str,
) -> Exchange {
    use tokio::io::AsyncReadExt;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n",
        addr.port(),
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).await.unwrap();
    let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut head = std::collections::HashMap::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).await.unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        head.insert(name.to_ascii_lowercase(), value.trim().to_owned());
    }
    let chunked = head
        .get("transfer-encoding")
        .is_some_and(|v| v == "chunked");
    let events = head
        .get("content-type")
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let length: Option<usize> = head.get("content-length").map(|v| v.parse().unwrap());
    let (sender, messages) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut body: Vec<u8> = Vec::new();
        let take = |body: &mut Vec<u8>, last: bool| {
            if events {
                while let Some(end) = body.windows(2).position(|w| w == b"\n\n") {
                    let event = String::from_utf8(body.drain(..end + 2).collect()).unwrap();
                    let data: String = event
                        .lines()
                        .filter_map(|line| line.strip_prefix("data:"))
                        .map(str::trim_start)
                        .collect();
                    if !data.is_empty() {
                        let _ = sender.send(serde_json::from_str(&data).unwrap());
                    }
                }
            } else if last && !body.trim_ascii().is_empty() {
                let _ = sender.send(serde_json::from_slice(body).unwrap());
            }
        };
        if chunked {
            loop {
                let mut size = String::new();
                if reader.read_line(&mut size).await.unwrap_or(0) == 0 {
                    break;
                }
                let size = usize::from_str_radix(size.trim(), 16).unwrap();
                if size == 0 {
                    break;
                }
                let mut chunk = vec![0; size + 2];
                if reader.read_exact(&mut chunk).await.is_err() {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
                take(&mut body, false);
            }
        } else if let Some(length) = length {
            body.resize(length, 0);
            reader.read_exact(&mut body).await.unwrap();
        } else {
            reader.read_to_end(&mut body).await.unwrap();
        }
        take(&mut body, true);
    });
    Exchange {
        status,
        headers: head,
        messages,
    }
}

/// Runs `script` over Streamable HTTP, one POST per message (a legacy client on the
/// session `initialize` opened, with a GET stream for the session's own notifications; a
/// modern one standing alone), and returns what came back.
async fn http_session(
    registry: Arc<Registry>,
    revision: Revision,
    script: Vec<(Option<&str>, Value)>,
    between: impl FnOnce(&Registry),
) -> Transcript {
    use toolhost_mcp::http::{HttpConfig, HttpServer, Registries, SessionKey};
    let config = HttpConfig::new(Some(SessionKey::random().unwrap())).with_list_changed(true);
    let server = HttpServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        config,
        Registries::shared(Arc::clone(&registry)),
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    let mut methods = std::collections::HashMap::new();
    let mut messages = Vec::new();
    let mut session: Option<String> = None;
    let mut get_stream: Option<tokio::sync::mpsc::UnboundedReceiver<Value>> = None;
    let mut subscription = None;
    for (method, message) in script {
        if let (Some(method), Some(id)) = (method, message.get("id")) {
            methods.insert(id.to_string(), method.to_owned());
        }
        let body = if message == json!("garbage") {
            "{not json".to_owned()
        } else {
            message.to_string()
        };
        let mut headers = Vec::new();
        if let Some(id) = &session {
            headers.push(("mcp-session-id", id.as_str()));
        }
        // A modern request names its version, method and tool in headers too, as the
        // body does (the unknown-version request sends the version it asks for).
        let version = message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
            .as_str()
            .unwrap_or(revision.as_str())
            .to_owned();
        let (method_header, name_header) = (
            message["method"].as_str().unwrap_or_default().to_owned(),
            message["params"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        if revision >= Revision::V2025_06_18 && (session.is_some() || revision.is_modern()) {
            headers.push(("mcp-protocol-version", version.as_str()));
        }
        if revision.is_modern() {
            headers.push(("mcp-method", method_header.as_str()));
            if method_header == "tools/call" {
                headers.push(("mcp-name", name_header.as_str()));
            }
        }
        let mut exchange = post(addr, &headers, &body).await;
        if method == Some("subscriptions/listen") {
            let ack = tokio::time::timeout(Duration::from_secs(20), exchange.messages.recv())
                .await
                .expect("an acknowledgement")
                .expect("a message");
            messages.push(ack);
            subscription = Some(exchange.messages);
            continue;
        }
        if method.is_none() {
            assert_eq!(exchange.status, 202, "{body}");
        }
        while let Some(value) =
            tokio::time::timeout(Duration::from_secs(20), exchange.messages.recv())
                .await
                .expect("the answer in time")
        {
            messages.push(value);
        }
        if method == Some("initialize") {
            session = exchange.headers.get("mcp-session-id").cloned();
            let id = session.clone().expect("a session id");
            // The session's own stream: tool-list changes come on it.
            let stream = get(addr, &id, revision).await;
            assert_eq!(stream.status, 200);
            get_stream = Some(stream.messages);
        }
    }
    between(&registry);
    let wait = Duration::from_secs(5);
    for receiver in [get_stream.as_mut(), subscription.as_mut()]
        .into_iter()
        .flatten()
    {
        let note = tokio::time::timeout(wait, receiver.recv())
            .await
            .expect("a tool-list change in time")
            .expect("a message");
        messages.push(note);
    }
    drop((get_stream, subscription));
    let _ = stop.send(());
    serving.await.unwrap().unwrap();
    let messages = messages
        .into_iter()
        .map(|message| {
            let method = message
                .get("id")
                .and_then(|id| methods.get(&id.to_string()).cloned());
            (method, message)
        })
        .collect();
    Transcript { messages }
}

/// Opens the session's GET event stream.
pub(crate) async fn get(addr: std::net::SocketAddr, session: &str, revision: Revision) -> Exchange {
    use tokio::io::AsyncReadExt;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!(
        "GET /mcp HTTP/1.1\r\nhost: 127.0.0.1:{}\r\naccept: text/event-stream\r\nmcp-session-id: {session}\r\n",
        addr.port()
    );
    if revision >= Revision::V2025_06_18 {
        request.push_str(&format!("mcp-protocol-version: {revision}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).await.unwrap();
    let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).await.unwrap();
        if line.trim_end().is_empty() {
            break;
        }
    }
    let (sender, messages) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        // Chunked: a size line, the chunk, its line end.
        let mut pending = String::new();
        loop {
            let mut size = String::new();
            if reader.read_line(&mut size).await.unwrap_or(0) == 0 {
                return;
            }
            let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
                return;
            };
            if size == 0 {
                return;
            }
            let mut chunk = vec![0; size + 2];
            if reader.read_exact(&mut chunk).await.is_err() {
                return;
            }
            pending.push_str(std::str::from_utf8(&chunk[..size]).unwrap());
            while let Some(end) = pending.find("\n\n") {
                let event: String = pending.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if !data.is_empty() && sender.send(serde_json::from_str(&data).unwrap()).is_err() {
                    return;
                }
            }
        }
    });
    Exchange {
        status,
        headers: std::collections::HashMap::new(),
        messages,
    }
}

/// The same scripts over Streamable HTTP: every message the transport carries (JSON
/// answers, the event streams of calls that asked for progress or log lines, the
/// session's GET stream, a subscription's stream) fits the schema of its revision.
#[tokio::test(flavor = "current_thread")]
async fn every_message_over_http_fits_the_schema_of_its_revision() {
    use tracing_subscriber::layer::SubscriberExt;
    let dir = schema_dir();
    let _default = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(toolhost_mcp::log_layer()),
    );
    for revision in Revision::ALL {
        let schema = Schema::load(&dir, revision);
        let transcript = http_session(registry(), revision, script(revision), |registry| {
            registry.register_all(vec![extra_tool()]).unwrap();
        })
        .await;
        let checked = check_transcript(revision, &schema, &transcript);
        if revision.is_modern() {
            // The subscription is left open (the client goes): no result for it.
            assert_eq!(checked, (5, 4), "{revision}");
        } else {
            let batch = if revision.accepts_batches() { 2 } else { 0 };
            assert_eq!(checked, (8 + batch, 3), "{revision}");
        }
    }
}
