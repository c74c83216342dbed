//! The OTLP protobuf messages the exporter sends (opentelemetry-proto's
//! `collector/trace/v1` `ExportTraceServiceRequest`), encoded by hand: only the fields
//! the host fills.

use super::{AttrValue, SpanEvent, SpanRecord};

/// A protobuf message being written.
#[derive(Default)]
struct Message(Vec<u8>);

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

    fn string(&mut self, field: u32, text: &str) {
        self.bytes(field, text.as_bytes());
    }

    fn message(&mut self, field: u32, message: &Message) {
        self.bytes(field, &message.0);
    }

    fn uint(&mut self, field: u32, value: u64) {
        self.key(field, 0);
        self.varint(value);
    }

    fn fixed64(&mut self, field: u32, value: u64) {
        self.key(field, 1);
        self.0.extend_from_slice(&value.to_le_bytes());
    }
}

/// `KeyValue { key = 1; AnyValue value = 2 }`, `AnyValue { string_value = 1; int_value = 3 }`.
fn key_value(key: &str, value: &AttrValue) -> Message {
    let mut any = Message::default();
    match value {
        AttrValue::Str(text) => any.string(1, text),
        #[allow(
            clippy::cast_sign_loss,
            reason = "int64 is sent as its two's complement varint"
        )]
        AttrValue::Int(n) => any.uint(3, *n as u64),
    }
    let mut kv = Message::default();
    kv.string(1, key);
    kv.message(2, &any);
    kv
}

/// `Resource { repeated KeyValue attributes = 1 }`, encoded once.
pub(super) fn resource(service_name: &str, attributes: &[(String, String)]) -> Vec<u8> {
    let mut resource = Message::default();
    resource.message(
        1,
        &key_value("service.name", &AttrValue::Str(service_name.to_owned())),
    );
    resource.message(
        1,
        &key_value(
            "telemetry.sdk.name",
            &AttrValue::Str("wasm-toolhost".to_owned()),
        ),
    );
    for (key, value) in attributes {
        resource.message(1, &key_value(key, &AttrValue::Str(value.clone())));
    }
    resource.0
}

fn event(event: &SpanEvent) -> Message {
    // Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3 }
    let mut m = Message::default();
    m.fixed64(1, event.unix_nanos);
    m.string(2, event.name);
    for (key, value) in &event.attributes {
        m.message(3, &key_value(key, value));
    }
    m
}

fn span(span: &SpanRecord) -> Message {
    // Span { bytes trace_id = 1; bytes span_id = 2; bytes parent_span_id = 4;
    //   string name = 5; SpanKind kind = 6 (INTERNAL = 1, SERVER = 2); fixed64 start = 7; fixed64 end = 8;
    //   repeated KeyValue attributes = 9; repeated Event events = 11; Status status = 15 }
    let mut m = Message::default();
    m.bytes(1, &span.trace_id);
    m.bytes(2, &span.span_id);
    if let Some(parent) = &span.parent_span_id {
        m.bytes(4, parent);
    }
    m.string(5, &span.name);
    m.uint(6, span.kind);
    m.fixed64(7, span.start_unix_nanos);
    m.fixed64(8, span.end_unix_nanos);
    for (key, value) in &span.attributes {
        m.message(9, &key_value(key, value));
    }
    for e in &span.events {
        m.message(11, &event(e));
    }
    // Status { StatusCode code = 3 } (ERROR = 2); unset when the call went well.
    if span.error {
        let mut status = Message::default();
        status.uint(3, 2);
        m.message(15, &status);
    }
    m
}

/// `ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1 }` with one
/// `ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2 }` and one
/// `ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2 }`.
pub(super) fn export_request(resource: &[u8], spans: &[SpanRecord]) -> Vec<u8> {
    let mut scope = Message::default();
    scope.string(1, "wasm-toolhost");
    scope.string(2, env!("CARGO_PKG_VERSION"));
    let mut scope_spans = Message::default();
    scope_spans.message(1, &scope);
    for record in spans {
        scope_spans.message(2, &span(record));
    }
    let mut resource_spans = Message::default();
    resource_spans.bytes(1, resource);
    resource_spans.message(2, &scope_spans);
    let mut request = Message::default();
    request.message(1, &resource_spans);
    request.0
}
