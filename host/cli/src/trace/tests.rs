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
                _ => match one(&any, 3) {
                    #[allow(clippy::cast_possible_wrap, reason = "int64 as sent")]
                    Some(Field::Varint(n)) => Value::from(n as i64),
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
/// `greet` answers, `hog` hits the memory limit, `slow` sleeps 50 ms.
fn traced(url: &str, sampler: Sampler, queue: usize) -> (Registry, Arc<Observers>) {
    let registry = Registry::new();
    let schema = serde_json::json!({"type": "object"});
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
                }
                Ok(ToolResult::new(Value::from("done")))
            },
        )
        .unwrap();
    let tracer = Tracer::start(config(url, sampler), queue).unwrap();
    let observers = Arc::new(Observers {
        audit: None,
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
    let mut ctx = CallContext::new();
    if let Some(parent) = parent.and_then(TraceParent::parse) {
        ctx = ctx.with_trace_parent(parent);
    }
    let mut call = ToolCall::new(name, r#"{"token": "s3cret-bearer-token"}"#);
    call.id = id.to_owned();
    let env = Environment {
        session_id: "session-1".to_owned(),
        turn_id: "turn-1".to_owned(),
    };
    let _ = registry.dispatch(&ctx, &call, &env).await;
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

#[tokio::test]
async fn a_calls_span_has_the_mcp_attributes_and_the_clients_parent() {
    let (url, bodies) = collector(Answer::Ok);
    let (registry, observers) = traced(&url, Sampler::DEFAULT, 64);
    call(&registry, "greet", "7", Some(PARENT)).await;
    call(&registry, "hog", r#""req-8""#, None).await;
    let (resource, all_spans, raw) = received(&bodies, 4);
    assert_eq!(all_spans.len(), 4, "{all_spans:?}");
    let (spans, children): (Vec<&Span>, Vec<&Span>) = all_spans.iter().partition(|s| s.kind == 2);
    assert!(resource.contains(&("service.name".to_owned(), Value::from("toolhost-test"))));
    assert!(resource.contains(&("deployment.environment".to_owned(), Value::from("ci"))));
    assert!(resource.contains(&("team".to_owned(), Value::from("tools"))));

    let greet = spans[0];
    let parent = TraceParent::parse(PARENT).unwrap();
    assert_eq!(greet.name, "tools/call greet");
    assert_eq!(greet.kind, 2, "SERVER");
    assert_eq!(greet.trace_id, parent.trace_id);
    assert_eq!(greet.parent.as_deref(), Some(&parent.span_id[..]));
    assert_eq!(greet.span_id.len(), 8);
    assert_ne!(greet.span_id, parent.span_id);
    assert!(greet.start <= greet.end && greet.start > 0);
    assert_eq!(greet.status_code, None);
    for (key, value) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "greet"),
        ("gen_ai.operation.name", "execute_tool"),
        ("mcp.session.id", "session-1"),
        ("jsonrpc.request.id", "7"),
        ("network.transport", "pipe"),
        ("toolhost.outcome", "ok"),
    ] {
        assert_eq!(greet.attr(key), Some(&Value::from(value)), "{key}");
    }
    assert_eq!(greet.attr("error.type"), None);
    assert!(greet.events.is_empty());

    let hog = spans[1];
    assert_eq!(hog.name, "tools/call hog");
    assert_eq!(hog.parent, None, "no traceparent: a root span");
    assert_eq!(hog.trace_id.len(), 16);
    assert_ne!(hog.trace_id, greet.trace_id);
    assert_eq!(hog.attr("jsonrpc.request.id"), Some(&Value::from("req-8")));
    assert_eq!(hog.attr("error.type"), Some(&Value::from("memory")));
    assert_eq!(hog.status_code, Some(2), "ERROR");
    assert_eq!(
        hog.events,
        [(
            "toolhost.limit_exceeded".to_owned(),
            vec![
                ("toolhost.limit".to_owned(), Value::from("memory")),
                ("toolhost.limit.value".to_owned(), Value::from(1 << 20)),
            ]
        )]
    );
    // The handler's run is a child of each: INTERNAL, within its parent.
    for (child, parent) in children.iter().zip([greet, hog]) {
        assert_eq!(child.kind, 1, "INTERNAL");
        assert_eq!(
            child.name,
            parent.name.replace("tools/call", "execute_tool")
        );
        assert_eq!(child.trace_id, parent.trace_id);
        assert_eq!(child.parent.as_deref(), Some(&parent.span_id[..]));
        assert!(
            parent.start <= child.start && child.end <= parent.end,
            "{child:?} {parent:?}"
        );
        assert_eq!(child.status_code, parent.status_code);
        assert_eq!(
            child.attr("gen_ai.tool.name"),
            parent.attr("gen_ai.tool.name")
        );
    }
    // Neither the arguments nor the error's text are sent.
    for body in raw {
        let text = String::from_utf8_lossy(&body);
        assert!(!text.contains("s3cret"), "{text}");
        assert!(!text.contains("grew past"), "{text}");
    }
    assert_eq!(tracer(&observers).dropped(), 0);
}

/// What a plugin call did through the host is exported as the handler's descendants:
/// `plugin.instantiate` and `plugin.call` under `execute_tool`, the file read and the
/// HTTP request (a CLIENT span) under the guest call, each with its attributes, within
/// its parent's time.
#[tokio::test]
async fn a_plugin_calls_file_read_and_request_are_child_spans_of_its_guest_call() {
    let (url, bodies) = collector(Answer::Ok);
    let (registry, observers) = traced(&url, Sampler::DEFAULT, 64);
    call(&registry, "touch", "3", Some(PARENT)).await;
    let (_, spans, _) = received(&bodies, 6);
    assert_eq!(spans.len(), 6, "{spans:?}");
    let named = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}: {spans:?}"))
    };
    let server = named("tools/call touch");
    let handler = named("execute_tool touch");
    let instantiate = named("plugin.instantiate touch");
    let guest = named("plugin.call touch");
    let read = named("files.read");
    let get = named("GET");
    let ids: std::collections::HashSet<&Vec<u8>> = spans.iter().map(|s| &s.span_id).collect();
    assert_eq!(ids.len(), 6, "distinct span ids");
    for (child, parent) in [
        (handler, server),
        (instantiate, handler),
        (guest, handler),
        (read, guest),
        (get, guest),
    ] {
        assert_eq!(
            child.parent.as_deref(),
            Some(&parent.span_id[..]),
            "{}",
            child.name
        );
        assert_eq!(child.trace_id, server.trace_id);
        assert!(
            parent.start <= child.start && child.start <= child.end && child.end <= parent.end,
            "{child:?} within {parent:?}"
        );
    }
    assert_eq!(
        (instantiate.kind, guest.kind, read.kind, get.kind),
        (1, 1, 1, 3)
    );
    assert_eq!(read.attr("file.path"), Some(&Value::from("notes/a.md")));
    assert_eq!(read.attr("toolhost.file.bytes"), Some(&Value::from(12)));
    assert_eq!(read.status_code, None);
    for (key, value) in [
        ("http.request.method", Value::from("GET")),
        ("server.address", Value::from("127.0.0.1")),
        ("server.port", Value::from(8080)),
        ("url.full", Value::from("http://127.0.0.1:8080/page")),
        ("http.response.status_code", Value::from(200)),
        ("http.response.body.size", Value::from(5)),
    ] {
        assert_eq!(get.attr(key), Some(&value), "{key}");
    }
    assert_eq!(tracer(&observers).dropped(), 0);
}

#[tokio::test]
async fn a_malformed_or_huge_traceparent_gives_a_root_span_and_the_call_runs() {
    let (url, bodies) = collector(Answer::Ok);
    let (registry, _observers) = traced(&url, Sampler::DEFAULT, 64);
    let huge = format!("{PARENT}{}", "0".repeat(1 << 20));
    call(&registry, "greet", "1", Some(&huge)).await;
    call(
        &registry,
        "greet",
        "2",
        Some("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
    )
    .await;
    let (_, spans, _) = received(&bodies, 4);
    assert_eq!(spans.len(), 4);
    for span in spans.iter().filter(|s| s.kind == 2) {
        assert_eq!(span.parent, None);
        assert_ne!(span.trace_id, TraceParent::parse(PARENT).unwrap().trace_id);
        assert_eq!(span.attr("toolhost.outcome"), Some(&Value::from("ok")));
    }
}

#[tokio::test]
async fn a_10_kb_tool_name_from_the_model_is_cut() {
    let (url, bodies) = collector(Answer::Ok);
    let (registry, _observers) = traced(&url, Sampler::DEFAULT, 64);
    let name = "é".repeat(5 * 1024);
    let id = format!("\"{}\"", "9".repeat(10 * 1024));
    call(&registry, &name, &id, None).await;
    let (_, spans, raw) = received(&bodies, 1);
    let span = &spans[0];
    let cut_name = "é".repeat(MAX_ATTRIBUTE_BYTES / 2);
    assert_eq!(
        span.attr("gen_ai.tool.name"),
        Some(&Value::from(cut_name.as_str()))
    );
    assert_eq!(span.name, format!("tools/call {cut_name}"));
    assert_eq!(
        span.attr("jsonrpc.request.id"),
        Some(&Value::from("9".repeat(MAX_ATTRIBUTE_BYTES)))
    );
    assert_eq!(span.attr("error.type"), Some(&Value::from("refused")));
    assert!(raw[0].len() < 4096, "{} bytes", raw[0].len());
}

#[tokio::test]
async fn an_unsampled_parent_or_always_off_sends_nothing() {
    let (url, bodies) = collector(Answer::Ok);
    let (registry, observers) = traced(&url, Sampler::DEFAULT, 64);
    call(
        &registry,
        "greet",
        "1",
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"),
    )
    .await;
    let (off_url, off_bodies) = collector(Answer::Ok);
    let off = Sampler::parse("always_off", None).unwrap();
    let (off_registry, off_observers) = traced(&off_url, off, 64);
    call(&off_registry, "greet", "1", Some(PARENT)).await;
    // A sampled call after them shows the exporter ran.
    call(&registry, "greet", "2", Some(PARENT)).await;
    let (_, spans, _) = received(&bodies, 2);
    assert_eq!(spans.len(), 2, "the sampled call and its handler's child");
    assert_eq!(spans[1].attr("jsonrpc.request.id"), Some(&Value::from("2")));
    tracer(&off_observers).flush(Duration::from_secs(2));
    assert!(off_bodies.recv_timeout(Duration::from_millis(500)).is_err());
    assert_eq!(tracer(&observers).dropped(), 0);
}

#[tokio::test]
async fn a_hanging_collector_neither_slows_calls_nor_blocks_them_and_drops_are_counted() {
    let (url, _bodies) = collector(Answer::Hang);
    let (registry, observers) = traced(&url, Sampler::DEFAULT, 16);
    let calls = 5000;
    let started = Instant::now();
    for n in 0..calls {
        call(&registry, "greet", &n.to_string(), None).await;
    }
    // 5,000 calls in-process take milliseconds; a call that waited for the export
    // (5 s timeouts) would take far longer.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let tracer = tracer(&observers);
    // The queue holds 16, the exporter's batch at most 512: all others are dropped.
    assert!(tracer.dropped() >= calls - 16 - 512, "{}", tracer.dropped());
    assert_eq!(tracer.exported(), 0);
    // The metrics show the same count.
    let metrics = crate::metrics::Metrics::default();
    metrics.count_dropped_spans(tracer.dropped_counter());
    let line = format!("toolhost_trace_spans_dropped_total {}\n", tracer.dropped());
    assert!(metrics.render().contains(&line), "{}", metrics.render());
}

#[tokio::test]
async fn a_collector_answering_500_is_a_counted_failure_and_calls_go_on() {
    let (url, bodies) = collector(Answer::Status500);
    let (registry, observers) = traced(&url, Sampler::DEFAULT, 64);
    call(&registry, "greet", "1", None).await;
    let (_, spans, _) = received(&bodies, 2);
    assert_eq!(spans.len(), 2);
    let tracer = tracer(&observers);
    tracer.flush(Duration::from_secs(5));
    assert_eq!(tracer.failures(), 1);
    assert_eq!(tracer.exported(), 0);
    call(&registry, "greet", "2", None).await;
    assert_eq!(received(&bodies, 2).1.len(), 2);
}

#[test]
fn the_configuration_comes_from_the_flag_and_the_otel_variables() {
    let none = |_: &str| None;
    assert_eq!(TraceConfig::from_env(None, none, "pipe"), Ok(None));
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let base = TraceConfig::from_env(
        None,
        env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")]),
        "tcp",
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (base.authority.as_str(), base.path.as_str()),
        ("127.0.0.1:4318", "/v1/traces")
    );
    assert_eq!(base.service_name, "wasm-toolhost");
    assert_eq!(base.sampler, Sampler::DEFAULT);
    let traces = TraceConfig::from_env(
        None,
        env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://[::1]/custom/traces",
            ),
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-resource,a=b"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.5"),
        ]),
        "tcp",
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (traces.authority.as_str(), traces.path.as_str()),
        ("[::1]:80", "/custom/traces")
    );
    assert_eq!(traces.service_name, "from-resource");
    assert_eq!(traces.resource, [("a".to_owned(), "b".to_owned())]);
    let flag = TraceConfig::from_env(
        Some("http://localhost:9999"),
        env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:1/x")]),
        "pipe",
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (flag.authority.as_str(), flag.path.as_str()),
        ("localhost:9999", "/v1/traces")
    );
    assert_eq!(
        TraceConfig::from_env(
            None,
            env(&[
                ("OTEL_SDK_DISABLED", "true"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
            ]),
            "pipe"
        ),
        Ok(None)
    );
    let https = TraceConfig::from_env(Some("https://collector:4318"), none, "pipe").unwrap_err();
    assert!(https.contains("https is not supported"), "{https}");
    let query =
        TraceConfig::from_env(Some("http://127.0.0.1:4318/v1?x=1"), none, "pipe").unwrap_err();
    assert!(query.contains("without user, query or fragment"), "{query}");
    let sampler = TraceConfig::from_env(
        Some("http://127.0.0.1:4318"),
        env(&[("OTEL_TRACES_SAMPLER", "sometimes")]),
        "pipe",
    )
    .unwrap_err();
    assert!(
        sampler.contains("\"sometimes\" is not a sampler"),
        "{sampler}"
    );
    let grpc = TraceConfig::from_env(
        Some("http://127.0.0.1:4317"),
        env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]),
        "pipe",
    )
    .unwrap_err();
    assert!(grpc.contains("\"grpc\" is not supported"), "{grpc}");
    assert!(TraceConfig::from_env(
        Some("http://127.0.0.1:4318"),
        env(&[("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")]),
        "pipe",
    )
    .unwrap()
    .is_some());
    let ratio = Sampler::parse("traceidratio", Some("1.5")).unwrap_err();
    assert!(ratio.contains("outside 0..1"), "{ratio}");
}

#[test]
fn samplers_decide_by_parent_and_ratio() {
    let sampled = TraceParent::parse(PARENT).unwrap();
    let unsampled = TraceParent {
        flags: 0,
        ..sampled
    };
    let low = [0u8; 16];
    let high = [0xffu8; 16];
    let on = Sampler::parse("always_on", None).unwrap();
    assert!(on.sampled(&low, Some(&unsampled)));
    let parent_on = Sampler::parse("parentbased_always_on", None).unwrap();
    assert!(!parent_on.sampled(&low, Some(&unsampled)));
    assert!(parent_on.sampled(&low, None));
    let parent_off = Sampler::parse("parentbased_always_off", None).unwrap();
    assert!(parent_off.sampled(&low, Some(&sampled)));
    assert!(!parent_off.sampled(&low, None));
    let half = Sampler::parse("traceidratio", Some("0.5")).unwrap();
    assert!(half.sampled(&low, None));
    assert!(!half.sampled(&high, None));
    let none = Sampler::parse("traceidratio", Some("0")).unwrap();
    assert!(!none.sampled(&low, None));
}
