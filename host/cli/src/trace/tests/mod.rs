use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use toolhost::registry::{
    CallContext, CallObserver, Environment, Limit, Registry, StepKind, ToolCall, ToolDefinition,
    ToolError, ToolResult, TraceParent,
};

use super::{Sampler, TraceConfig, Tracer, MAX_ATTRIBUTE_BYTES};
use crate::observe::Observers;

mod export;
mod sampling;
mod spans;

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

// ---- a minimal protobuf reader, to check what the collector receives ----

#[derive(Debug, Clone)]
enum Field<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], at: &mut usize) -> u64 {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let byte = buf[*at];
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return value;
        }
        shift += 7;
    }
}

fn fields(buf: &[u8]) -> Vec<(u64, Field<'_>)> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < buf.len() {
        let key = varint(buf, &mut at);
        let field = match key & 7 {
            0 => Field::Varint(varint(buf, &mut at)),
            1 => {
                let value = u64::from_le_bytes(buf[at..at + 8].try_into().unwrap());
                at += 8;
                Field::Fixed64(value)
            }
            2 => {
                let len = usize::try_from(varint(buf, &mut at)).unwrap();
                let bytes = &buf[at..at + len];
                at += len;
                Field::Bytes(bytes)
            }
            wire => panic!("wire type {wire}"),
        };
        out.push((key >> 3, field));
    }
    out
}

fn all(buf: &[u8], number: u64) -> Vec<&[u8]> {
    fields(buf)
        .into_iter()
        .filter_map(|(n, f)| match (n == number, f) {
            (true, Field::Bytes(bytes)) => Some(bytes),
            _ => None,
        })
        .collect()
}

fn one(buf: &[u8], number: u64) -> Option<Field<'_>> {
    fields(buf)
        .into_iter()
        .find(|(n, _)| *n == number)
        .map(|(_, f)| f)
}

fn bytes_of(buf: &[u8], number: u64) -> Vec<u8> {
    match one(buf, number) {
        Some(Field::Bytes(bytes)) => bytes.to_vec(),
        other => panic!("field {number}: {other:?}"),
    }
}

/// KeyValue list into (key, JSON value).
fn attributes(buf: &[u8], number: u64) -> Vec<(String, Value)> {
    all(buf, number)
        .into_iter()
        .map(|kv| {
            let key = String::from_utf8(bytes_of(kv, 1)).unwrap();
            let any = bytes_of(kv, 2);
            let value = match one(&any, 1) {
                Some(Field::Bytes(text)) => Value::from(String::from_utf8(text.to_vec()).unwrap()),
                _ => match (one(&any, 3), one(&any, 2)) {
                    #[allow(clippy::cast_possible_wrap, reason = "int64 as sent")]
                    (Some(Field::Varint(n)), _) => Value::from(n as i64),
                    (None, Some(Field::Varint(b @ (0 | 1)))) => Value::from(b == 1),
                    other => panic!("{key}: {other:?}"),
                },
            };
            (key, value)
        })
        .collect()
}

/// What a test reads of one exported span.
#[derive(Debug)]
struct Span {
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent: Option<Vec<u8>>,
    name: String,
    kind: u64,
    start: u64,
    end: u64,
    attributes: Vec<(String, Value)>,
    events: Vec<(String, Vec<(String, Value)>)>,
    status_code: Option<u64>,
}

impl Span {
    fn attr(&self, key: &str) -> Option<&Value> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }
}

/// The resource's attributes and the spans of one ExportTraceServiceRequest.
fn decode(body: &[u8]) -> (Vec<(String, Value)>, Vec<Span>) {
    let mut resource = Vec::new();
    let mut spans = Vec::new();
    for resource_spans in all(body, 1) {
        resource.extend(attributes(&bytes_of(resource_spans, 1), 1));
        for scope_spans in all(resource_spans, 2) {
            for span in all(scope_spans, 2) {
                let fixed = |n| match one(span, n) {
                    Some(Field::Fixed64(v)) => v,
                    other => panic!("{other:?}"),
                };
                spans.push(Span {
                    trace_id: bytes_of(span, 1),
                    span_id: bytes_of(span, 2),
                    parent: all(span, 4).first().map(|b| b.to_vec()),
                    name: String::from_utf8(bytes_of(span, 5)).unwrap(),
                    kind: match one(span, 6) {
                        Some(Field::Varint(v)) => v,
                        other => panic!("{other:?}"),
                    },
                    start: fixed(7),
                    end: fixed(8),
                    attributes: attributes(span, 9),
                    events: all(span, 11)
                        .into_iter()
                        .map(|e| (String::from_utf8(bytes_of(e, 2)).unwrap(), attributes(e, 3)))
                        .collect(),
                    status_code: all(span, 15).first().and_then(|s| match one(s, 3) {
                        Some(Field::Varint(v)) => Some(v),
                        _ => None,
                    }),
                });
            }
        }
    }
    (resource, spans)
}

// ---- loopback collectors ----

/// How a test collector answers.
#[derive(Clone, Copy)]
enum Answer {
    Ok,
    Status500,
    /// Reads nothing, answers nothing, keeps the connection.
    Hang,
}

/// A loopback collector: (its URL, the bodies it received with their path and
/// content type).
fn collector(answer: Answer) -> (String, mpsc::Receiver<(String, String, Vec<u8>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        // Bounded: a test makes at most a few hundred exports.
        for stream in listener.incoming().take(1000) {
            let Ok(mut stream) = stream else { return };
            if let Answer::Hang = answer {
                held.push(stream);
                continue;
            }
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            let path = request_line
                .split(' ')
                .nth(1)
                .unwrap_or_default()
                .to_owned();
            let (mut length, mut content_type) = (0, String::new());
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                let (name, value) = line.split_once(": ").unwrap();
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.parse().unwrap(),
                    "content-type" => content_type = value.to_owned(),
                    _ => {}
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let status = match answer {
                Answer::Ok => "200 OK",
                _ => "500 Internal Server Error",
            };
            let _ = write!(stream, "HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
            if sender.send((path, content_type, body)).is_err() {
                return;
            }
        }
    });
    (url, receiver)
}

fn config(url: &str, sampler: Sampler) -> TraceConfig {
    let vars = |name: &str| match name {
        "OTEL_SERVICE_NAME" => Some("toolhost-test".to_owned()),
        "OTEL_RESOURCE_ATTRIBUTES" => Some("deployment.environment=ci,team=tools".to_owned()),
        _ => None,
    };
    let mut config = TraceConfig::from_env(Some(url), vars, "pipe")
        .unwrap()
        .unwrap();
    config.sampler = sampler;
    config
}

/// A registry whose calls are traced by a tracer to `url` (queue of `queue` spans):
/// `greet` answers, `hog` hits the memory limit, `slow` sleeps 50 ms, `need` requires
/// `path`, `touch` records a file read and a request when its call is recorded (and
/// answers `recorded` then, `unrecorded` otherwise).
fn traced(url: &str, sampler: Sampler, queue: usize) -> (Registry, Arc<Observers>) {
    traced_audited(url, sampler, queue, None)
}

/// [`traced`] with `audit` watching the calls too.
fn traced_audited(
    url: &str,
    sampler: Sampler,
    queue: usize,
    audit: Option<crate::audit::AuditLog>,
) -> (Registry, Arc<Observers>) {
    let registry = Registry::new();
    let schema = serde_json::json!({"type": "object"});
    registry
        .register(
            ToolDefinition::new("slow", "Sleeps 50 ms.", schema.clone()),
            |_ctx: CallContext, _args: toolhost::registry::Arguments, _env: Environment| async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(ToolResult::new(Value::from("late")))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new(
                "need",
                "Needs a path.",
                serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            ),
            |_ctx: CallContext, _args: toolhost::registry::Arguments, _env: Environment| async move {
                Ok(ToolResult::new(Value::from("found")))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("greet", "Greets.", schema.clone()),
            |_ctx: CallContext, _args: toolhost::registry::Arguments, _env: Environment| async move {
                Ok(ToolResult::new(Value::from("hello")))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("hog", "Hits the memory limit.", schema),
            |_ctx: CallContext, _args: toolhost::registry::Arguments, _env: Environment| async move {
                Err(ToolError::LimitExceeded {
                    tool: "hog".to_owned(),
                    limit: Limit::Memory { bytes: 1 << 20 },
                    message: "grew past its memory".to_owned(),
                })
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new(
                "touch",
                "Reads a file and fetches a URL, as a plugin would.",
                serde_json::json!({"type": "object"}),
            ),
            |ctx: CallContext, _args: toolhost::registry::Arguments, _env: Environment| async move {
                // What the plugin host records of a plugin's call: its instantiation, then
                // the guest call, during which it reads a file and makes a request.
                if let Some(record) = ctx.record() {
                    let start = record.now();
                    record.step(StepKind::Instantiate, start, false);
                    let guest = record.now();
                    record.file_read("notes/a.md", 12, record.now(), true);
                    let index = record.http(
                        "GET",
                        "127.0.0.1",
                        8080,
                        "http://127.0.0.1:8080/page",
                        Some(200),
                        record.now(),
                    );
                    record.http_body_read(index.unwrap(), 5);
                    record.step(StepKind::GuestCall, guest, false);
                    return Ok(ToolResult::new(Value::from("recorded")));
                }
                Ok(ToolResult::new(Value::from("unrecorded")))
            },
        )
        .unwrap();
    let tracer = Tracer::start(config(url, sampler), queue).unwrap();
    let observers = Arc::new(Observers {
        audit,
        metrics: None,
        tracer: Some(tracer),
    });
    registry
        .set_observer(Arc::clone(&observers) as Arc<dyn CallObserver>)
        .unwrap();
    (registry, observers)
}

fn tracer(observers: &Observers) -> &Tracer {
    observers.tracer.as_ref().unwrap()
}

async fn call(registry: &Registry, name: &str, id: &str, parent: Option<&str>) {
    let _ = call_with(registry, name, id, parent, CallContext::new()).await;
}

/// [`call`] in `ctx`, with the argument `token`, giving its answer.
async fn call_with(
    registry: &Registry,
    name: &str,
    id: &str,
    parent: Option<&str>,
    mut ctx: CallContext,
) -> Result<ToolResult, ToolError> {
    if let Some(parent) = parent.and_then(TraceParent::parse) {
        ctx = ctx.with_trace_parent(parent);
    }
    let mut call = ToolCall::new(name, r#"{"token": "s3cret-bearer-token"}"#);
    call.id = id.to_owned();
    let env = Environment {
        session_id: "session-1".to_owned(),
        turn_id: "turn-1".to_owned(),
    };
    registry.dispatch(&ctx, &call, &env).await
}

/// The last resource's attributes, the spans, and the raw bodies a collector got.
type Received = (Vec<(String, Value)>, Vec<Span>, Vec<Vec<u8>>);

/// Every span the collector receives within 10 s, until `count` are in.
fn received(bodies: &mpsc::Receiver<(String, String, Vec<u8>)>, count: usize) -> Received {
    let until = Instant::now() + Duration::from_secs(10);
    let (mut resource, mut spans, mut raw) = (Vec::new(), Vec::new(), Vec::new());
    while spans.len() < count {
        let left = until.saturating_duration_since(Instant::now());
        let Ok((path, content_type, body)) = bodies.recv_timeout(left) else {
            break;
        };
        assert_eq!(path, "/v1/traces");
        assert_eq!(content_type, "application/x-protobuf");
        let (r, s) = decode(&body);
        resource = r;
        spans.extend(s);
        raw.push(body);
    }
    (resource, spans, raw)
}
