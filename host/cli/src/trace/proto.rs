//! The OTLP protobuf messages the exporter sends (opentelemetry-proto's
//! `collector/trace/v1` `ExportTraceServiceRequest`), encoded by hand: only the fields
//! the host fills. A batch is encoded into one buffer: attributes are written in place
//! (their lengths known ahead), each span is written into a scratch buffer reused for
//! the whole batch, so a span costs no allocation.

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
    fn string2(&mut self, field: u32, first: &str, second: &str) {
        self.key(field, 2);
        self.varint((first.len() + second.len()) as u64);
        self.0.extend_from_slice(first.as_bytes());
        self.0.extend_from_slice(second.as_bytes());
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
    /// `AnyValue { string_value = 1; int_value = 3 }`, written in place.
    #[allow(
        clippy::cast_sign_loss,
        reason = "int64 is sent as its two's complement varint"
    )]
    fn key_value(&mut self, field: u32, key: &str, value: Value<'_>) {
        let any = match value {
            Value::Str(text) => field_len(text.len() as u64),
            Value::Int(n) => 1 + varint_len(n as u64),
        };
        self.key(field, 2);
        self.varint(field_len(key.len() as u64) + field_len(any));
        self.bytes(1, key.as_bytes());
        self.key(2, 2);
        self.varint(any);
        match value {
            Value::Str(text) => self.bytes(1, text),
            Value::Int(n) => self.uint(3, n as u64),
        }
    }

    fn str_value(&mut self, field: u32, key: &str, value: &str) {
        self.key_value(field, key, Value::Str(value.as_bytes()));
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
    kind: u64,
    start: u64,
    end: u64,
) {
    m.bytes(1, &call.trace_id);
    m.bytes(2, &span_id);
    if let Some(parent) = parent {
        m.bytes(4, &parent);
    }
    m.string2(5, name, &call.tool);
    m.uint(6, kind);
    m.fixed64(7, start);
    m.fixed64(8, end);
}

/// `Status { StatusCode code = 3 }` (ERROR = 2) as field 15; unset when the call went well.
fn status(m: &mut Message, error: bool) {
    if error {
        m.key(15, 2);
        m.varint(2);
        m.uint(3, 2);
    }
}

/// A call's spans (`repeated KeyValue attributes = 9; repeated Event events = 11;
/// Status status = 15` after the head) as `Span` fields `field` of `out`, each written
/// in `scratch` first.
fn call_spans(out: &mut Message, field: u32, call: &CallSpans, scratch: &mut Message) {
    if let Some((id, start, end)) = &call.handler {
        scratch.0.clear();
        span_head(
            scratch,
            call,
            *id,
            Some(call.span_id),
            "execute_tool ",
            1,
            *start,
            *end,
        );
        scratch.str_value(9, "gen_ai.operation.name", "execute_tool");
        scratch.str_value(9, "gen_ai.tool.name", &call.tool);
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
        2,
        call.start_unix_nanos,
        call.end_unix_nanos,
    );
    scratch.str_value(9, "mcp.method.name", "tools/call");
    scratch.str_value(9, "gen_ai.operation.name", "execute_tool");
    scratch.str_value(9, "gen_ai.tool.name", &call.tool);
    scratch.str_value(9, "mcp.session.id", &call.session);
    scratch.str_value(9, "network.transport", call.transport);
    scratch.str_value(9, "toolhost.outcome", call.outcome);
    if let Some(id) = &call.request {
        scratch.str_value(9, "jsonrpc.request.id", id);
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
