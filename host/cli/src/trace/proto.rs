//! The OTLP protobuf messages the exporter sends (opentelemetry-proto's
//! `collector/trace/v1` `ExportTraceServiceRequest`), encoded by hand: only the fields
//! the host fills. A batch is encoded into one buffer: attributes are written in place
//! (their lengths known ahead), each span is written into a scratch buffer reused for
//! the whole batch, so a span costs no allocation.

use std::sync::LazyLock;

use toolhost::registry::{Step, StepKind};

use super::CallSpans;

/// A protobuf message being written.
#[derive(Default)]
struct Message(Vec<u8>);

/// The bytes of `value` as a varint.
fn varint_len(mut value: u64) -> u64 {
    let mut len = 1;
    while value >= 0x80 {
        value >>= 7;
        len += 1;
    }
    len
}

/// The bytes of a length-delimited field of `len` bytes (field numbers below 16).
fn field_len(len: u64) -> u64 {
    1 + varint_len(len) + len
}

/// An attribute's value as written: a string's bytes, or an integer.
#[derive(Clone, Copy)]
enum Value<'a> {
    Str(&'a [u8]),
    Int(i64),
    Bool(bool),
}

impl Message {
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            #[allow(clippy::cast_possible_truncation, reason = "the low 7 bits")]
            self.0.push((value as u8) | 0x80);
            value >>= 7;
        }
        #[allow(clippy::cast_possible_truncation, reason = "less than 0x80")]
        self.0.push(value as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.key(field, 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    /// A string field given in two parts (a span's name: `tools/call ` and the tool).
    fn string2(&mut self, field: u32, first: &str, second: &[u8]) {
        self.key(field, 2);
        self.varint((first.len() + second.len()) as u64);
        self.0.extend_from_slice(first.as_bytes());
        self.0.extend_from_slice(second);
    }

    fn uint(&mut self, field: u32, value: u64) {
        self.key(field, 0);
        self.varint(value);
    }

    fn fixed64(&mut self, field: u32, value: u64) {
        self.key(field, 1);
        self.0.extend_from_slice(&value.to_le_bytes());
    }

    /// `KeyValue { key = 1; AnyValue value = 2 }` as field `field`, with
    /// `AnyValue { string_value = 1; bool_value = 2; int_value = 3 }`, written in place.
    #[allow(
        clippy::cast_sign_loss,
        reason = "int64 is sent as its two's complement varint"
    )]
    fn key_value(&mut self, field: u32, key: &str, value: Value<'_>) {
        let any = match value {
            Value::Str(text) => field_len(text.len() as u64),
            Value::Int(n) => 1 + varint_len(n as u64),
            Value::Bool(_) => 2,
        };
        self.key(field, 2);
        self.varint(field_len(key.len() as u64) + field_len(any));
        self.bytes(1, key.as_bytes());
        self.key(2, 2);
        self.varint(any);
        match value {
            Value::Str(text) => self.bytes(1, text),
            Value::Int(n) => self.uint(3, n as u64),
            Value::Bool(b) => self.uint(2, u64::from(b)),
        }
    }

    fn str_value(&mut self, field: u32, key: &str, value: &str) {
        self.key_value(field, key, Value::Str(value.as_bytes()));
    }

    fn bytes_value(&mut self, field: u32, key: &str, value: &[u8]) {
        self.key_value(field, key, Value::Str(value));
    }
}

/// `Resource { repeated KeyValue attributes = 1 }`, encoded once.
pub(super) fn resource(service_name: &str, attributes: &[(String, String)]) -> Vec<u8> {
    let mut resource = Message::default();
    resource.str_value(1, "service.name", service_name);
    resource.str_value(1, "telemetry.sdk.name", "wasm-toolhost");
    for (key, value) in attributes {
        resource.str_value(1, key, value);
    }
    resource.0
}

/// The limit event of a call's span:
/// `Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3 }`.
fn limit_event(at: u64, limit: &str, value: Option<i64>) -> Message {
    let mut m = Message::default();
    m.fixed64(1, at);
    m.bytes(2, b"toolhost.limit_exceeded");
    m.str_value(3, "toolhost.limit", limit);
    if let Some(value) = value {
        m.key_value(3, "toolhost.limit.value", Value::Int(value));
    }
    m
}

/// A span's fields up to its name: `bytes trace_id = 1; bytes span_id = 2;
/// bytes parent_span_id = 4; string name = 5; SpanKind kind = 6 (INTERNAL = 1,
/// SERVER = 2); fixed64 start = 7; fixed64 end = 8`.
#[allow(
    clippy::too_many_arguments,
    reason = "the span's fields, in their order"
)]
fn span_head(
    m: &mut Message,
    call: &CallSpans,
    span_id: [u8; 8],
    parent: Option<[u8; 8]>,
    name: &str,
    suffix: &[u8],
    kind: u8,
    start: u64,
    end: u64,
) {
    // Fields 1, 2 and 4 (key, length, id) in one write, then the name, then fields 6,
    // 7 and 8 in another: a few copies where a write per field cost about a third of a
    // span's encoding.
    let mut ids = [0u8; 38];
    ids[0] = 1 << 3 | 2;
    ids[1] = 16;
    ids[2..18].copy_from_slice(&call.trace_id);
    ids[18] = 2 << 3 | 2;
    ids[19] = 8;
    ids[20..28].copy_from_slice(&span_id);
    let ids_len = match parent {
        Some(parent) => {
            ids[28] = 4 << 3 | 2;
            ids[29] = 8;
            ids[30..38].copy_from_slice(&parent);
            38
        }
        None => 28,
    };
    m.0.extend_from_slice(&ids[..ids_len]);
    m.string2(5, name, suffix);
    let mut times = [0u8; 20];
    times[0] = 6 << 3;
    times[1] = kind;
    times[2] = 7 << 3 | 1;
    times[3..11].copy_from_slice(&start.to_le_bytes());
    times[11] = 8 << 3 | 1;
    times[12..20].copy_from_slice(&end.to_le_bytes());
    m.0.extend_from_slice(&times);
}

/// `Status { StatusCode code = 3 }` (ERROR = 2) as field 15; unset when the call went well.
fn status(m: &mut Message, error: bool) {
    if error {
        m.key(15, 2);
        m.varint(2);
        m.uint(3, 2);
    }
}

/// The id of step `index` of the call whose span is `span_id`: derived (splitmix64), so
/// the call's thread draws no id per step; distinct from the call's and the other steps'
/// ids but by a 2^-64 chance.
pub(super) fn step_id(span_id: [u8; 8], index: usize) -> [u8; 8] {
    let offset = (index as u64 + 1).wrapping_mul(super::GOLDEN);
    let id = super::mix(u64::from_be_bytes(span_id).wrapping_add(offset));
    if id == 0 { 1 } else { id }.to_be_bytes()
}

/// The spans of what the call did through the host, as `Span` fields `field` of `out`:
/// its arguments' check (`INTERNAL`, `tool.arguments.check`, a child of the call's span,
/// with `toolhost.arguments.valid`; a refusal has `error.type` `invalid_arguments`), the
/// plugin's instantiation and guest call (`INTERNAL`, children of the handler's
/// span), its file calls (`INTERNAL`, `files.read` / `files.write` with `file.path` and
/// `toolhost.file.bytes`) and HTTP requests (`CLIENT`, named by the method, with
/// `http.request.method`, `server.address`, `server.port`, `url.full` without query,
/// `http.response.status_code`, `http.response.body.size`), children of the guest call
/// (of the handler's span for a built-in tool).
fn step_spans(out: &mut Message, field: u32, call: &CallSpans, scratch: &mut Message) {
    let handler = call.handler.map_or(call.span_id, |(id, _, _)| id);
    let guest = call
        .steps
        .each()
        .position(|step| step.kind == StepKind::GuestCall)
        .map_or(handler, |index| step_id(call.span_id, index));
    let at = |offset: std::time::Duration| {
        call.start_unix_nanos
            .saturating_add(super::nanos_of(offset))
            .min(call.end_unix_nanos)
    };
    for (index, step) in call.steps.each().enumerate() {
        let Step {
            kind,
            start,
            end,
            failed,
        } = &*step;
        let (name, suffix, span_kind, parent) = match kind {
            StepKind::ArgumentCheck => ("tool.arguments.check", &b""[..], 1, call.span_id),
            StepKind::Instantiate => ("plugin.instantiate ", call.tool(), 1, handler),
            StepKind::GuestCall => ("plugin.call ", call.tool(), 1, handler),
            StepKind::FileRead { .. } => ("files.read", &b""[..], 1, guest),
            StepKind::FileWrite { .. } => ("files.write", &b""[..], 1, guest),
            StepKind::Http { method, .. } => (method.as_str(), &b""[..], 3, guest),
            _ => continue,
        };
        // A request whose traceparent named its span: that id, which the server
        // behind it took as its parent.
        let span_id = match kind {
            StepKind::Http {
                span_id: Some(id), ..
            } => *id,
            _ => step_id(call.span_id, index),
        };
        scratch.0.clear();
        span_head(
            scratch,
            call,
            span_id,
            Some(parent),
            name,
            suffix,
            span_kind,
            at(*start),
            at(*end),
        );
        let int = |n: u64| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
        let mut error = *failed;
        match kind {
            StepKind::ArgumentCheck if *failed => scratch.0.extend_from_slice(&CHECK_REFUSED),
            StepKind::ArgumentCheck => scratch.0.extend_from_slice(&CHECK_PASSED),
            StepKind::FileRead { path, bytes } | StepKind::FileWrite { path, bytes } => {
                scratch.str_value(9, "file.path", path);
                scratch.key_value(9, "toolhost.file.bytes", int(*bytes));
            }
            StepKind::Http {
                method,
                host,
                port,
                url,
                status,
                bytes,
                ..
            } => {
                scratch.str_value(9, "http.request.method", method);
                scratch.str_value(9, "server.address", host);
                scratch.key_value(9, "server.port", int(u64::from(*port)));
                scratch.str_value(9, "url.full", url);
                if let Some(status) = status {
                    scratch.key_value(9, "http.response.status_code", int(u64::from(*status)));
                    error |= *status >= 400;
                }
                scratch.key_value(9, "http.response.body.size", int(*bytes));
            }
            _ => {}
        }
        status(scratch, error);
        out.bytes(field, &scratch.0);
    }
}

/// Attributes of a fixed key and value, as `Span` fields 9, encoded once.
fn fixed_attributes(pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut m = Message::default();
    for (key, value) in pairs {
        m.str_value(9, key, value);
    }
    m.0
}

/// The call's span's first attributes, the same for every call.
static SERVER_FIXED: LazyLock<Vec<u8>> = LazyLock::new(|| {
    fixed_attributes(&[
        ("mcp.method.name", "tools/call"),
        ("gen_ai.operation.name", "execute_tool"),
    ])
});

/// The attributes of an arguments' check that passed.
static CHECK_PASSED: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let mut m = Message::default();
    m.key_value(9, "toolhost.arguments.valid", Value::Bool(true));
    m.0
});

/// The attributes of an arguments' check that refused the call.
static CHECK_REFUSED: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let mut m = Message::default();
    m.key_value(9, "toolhost.arguments.valid", Value::Bool(false));
    m.str_value(9, "error.type", "invalid_arguments");
    m.0
});

/// The handler's span's first attribute, the same for every call.
static HANDLER_FIXED: LazyLock<Vec<u8>> =
    LazyLock::new(|| fixed_attributes(&[("gen_ai.operation.name", "execute_tool")]));

/// A call's spans (`repeated KeyValue attributes = 9; repeated Event events = 11;
/// Status status = 15` after the head) as `Span` fields `field` of `out`, each written
/// in `scratch` first.
fn call_spans(out: &mut Message, field: u32, call: &CallSpans, scratch: &mut Message) {
    step_spans(out, field, call, scratch);
    if let Some((id, start, end)) = &call.handler {
        scratch.0.clear();
        span_head(
            scratch,
            call,
            *id,
            Some(call.span_id),
            "execute_tool ",
            call.tool(),
            1,
            *start,
            *end,
        );
        scratch.0.extend_from_slice(&HANDLER_FIXED);
        scratch.bytes_value(9, "gen_ai.tool.name", call.tool());
        status(scratch, call.error);
        out.bytes(field, &scratch.0);
    }
    scratch.0.clear();
    span_head(
        scratch,
        call,
        call.span_id,
        call.parent_span_id,
        "tools/call ",
        call.tool(),
        2,
        call.start_unix_nanos,
        call.end_unix_nanos,
    );
    scratch.0.extend_from_slice(&SERVER_FIXED);
    scratch.bytes_value(9, "gen_ai.tool.name", call.tool());
    scratch.bytes_value(9, "mcp.session.id", call.session());
    scratch.str_value(9, "network.transport", call.transport);
    scratch.str_value(9, "toolhost.outcome", call.outcome);
    if let Some(id) = call.request() {
        scratch.bytes_value(9, "jsonrpc.request.id", id);
    }
    if let Some(bytes) = call.bytes_out {
        scratch.key_value(9, "toolhost.bytes_out", Value::Int(bytes));
    }
    if call.error {
        scratch.str_value(9, "error.type", call.outcome);
    }
    if let Some((limit, value)) = call.limit {
        let event = limit_event(call.end_unix_nanos, limit, value);
        scratch.bytes(11, &event.0);
    }
    status(scratch, call.error);
    out.bytes(field, &scratch.0);
}

/// `ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1 }` with one
/// `ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2 }` and one
/// `ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2 }`.
/// The exporter's buffers, kept from one request to the next (a request is about 1 KiB
/// a call: allocating it anew every 200 ms cost the allocator more than the encoding).
#[derive(Default)]
pub(super) struct Buffers {
    spans: Message,
    scratch: Message,
    body: Message,
}

/// The request's body, in `buffers`.
pub(super) fn export_request<'b>(
    resource: &[u8],
    calls: &[CallSpans],
    buffers: &'b mut Buffers,
) -> &'b [u8] {
    let Buffers {
        spans,
        scratch,
        body,
    } = buffers;
    spans.0.clear();
    scratch.0.clear();
    scratch.bytes(1, b"wasm-toolhost");
    scratch.bytes(2, env!("CARGO_PKG_VERSION").as_bytes());
    spans.bytes(1, &scratch.0);
    for call in calls {
        call_spans(spans, 2, call, scratch);
    }
    let resource_spans = field_len(resource.len() as u64) + field_len(spans.0.len() as u64);
    body.0.clear();
    body.key(1, 2);
    body.varint(resource_spans);
    body.bytes(1, resource);
    body.bytes(2, &spans.0);
    &body.0
}
