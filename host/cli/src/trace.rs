//! OpenTelemetry traces (`--otlp-endpoint`, the `OTEL_*` variables): one server span per
//! MCP `tools/call`, exported over OTLP/HTTP protobuf by a thread of its own.
//!
//! Hand-written on purpose: the export is a few protobuf messages and one HTTP POST, so
//! this module encodes `ExportTraceServiceRequest` itself and posts it over a plain
//! `std::net::TcpStream` (no new crate; the `opentelemetry-otlp` route would add an
//! HTTP client and `prost` to a build that must stay short). The cost: `http://`
//! endpoints only (point it at a local collector, which forwards over TLS).
//!
//! A call never waits for the export: [`Tracer::finished`] puts the span on a bounded
//! queue ([`QUEUE_SPANS`]) with `try_send`; a full queue drops the span, counts it
//! ([`Tracer::dropped`]) and logs once. A collector that is down, answers 500 or hangs
//! only slows the export thread (bounded by [`EXPORT_TIMEOUT`] per batch).
//!
//! What a span holds: the tool's name, the session id, the JSON-RPC id, the outcome
//! class and the limit hit: never the arguments, the result, an error's text, a config
//! value or a token.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use toolhost::registry::{CallEnd, Limit, ToolError, TraceParent};

mod entry;
mod proto;
#[cfg(test)]
mod tests;

/// Calls whose spans wait for export at most (each call's span with its handler's
/// child); one more call's spans are dropped (and counted).
pub(crate) const QUEUE_SPANS: usize = 2048;
/// Calls' spans in one export request at most.
pub(crate) const BATCH_SPANS: usize = 512;
/// How long the exporter gathers a batch after its first span.
const BATCH_WAIT: Duration = Duration::from_millis(200);
/// Connecting, sending and reading the answer of one export, each at most this long.
pub(crate) const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest text attribute or span name kept, in bytes (longer ones are cut at a
/// character boundary): a tool name the model made up can be megabytes.
pub(crate) const MAX_ATTRIBUTE_BYTES: usize = 256;

/// Which calls get a span (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sampler {
    /// The decision for a call without a parent (or for every call when not parent-based).
    root: Root,
    /// Whether a client's `traceparent` decides (its sampled flag).
    parent_based: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Root {
    On,
    Off,
    /// Sampled when the trace id's low 8 bytes are below this.
    Ratio(u64),
}

impl Sampler {
    /// The default: `parentbased_always_on`.
    pub(crate) const DEFAULT: Sampler = Sampler {
        root: Root::On,
        parent_based: true,
    };

    /// Reads `OTEL_TRACES_SAMPLER` (`always_on`, `always_off`, `traceidratio`,
    /// `parentbased_always_on`, `parentbased_always_off`, `parentbased_traceidratio`)
    /// and, for the ratios, `arg` (0 to 1, default 1).
    ///
    /// # Errors
    /// An unknown sampler or a ratio outside 0..=1.
    pub(crate) fn parse(name: &str, arg: Option<&str>) -> Result<Self, String> {
        let ratio = || -> Result<Root, String> {
            let ratio = match arg {
                None => 1.0,
                Some(text) => text.trim().parse::<f64>().map_err(|_| {
                    format!("OTEL_TRACES_SAMPLER_ARG=\"{text}\" is not a number; give a ratio from 0 to 1, e.g. 0.25")
                })?,
            };
            if !(0.0..=1.0).contains(&ratio) {
                return Err(format!(
                    "OTEL_TRACES_SAMPLER_ARG={ratio} is outside 0..1; give a ratio from 0 to 1"
                ));
            }
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss,
                reason = "a ratio in 0..=1 of 2^64, saturating at the top"
            )]
            let threshold = if ratio >= 1.0 {
                u64::MAX
            } else {
                (ratio * u64::MAX as f64) as u64
            };
            Ok(Root::Ratio(threshold))
        };
        let (root, parent_based) = match name.trim() {
            "always_on" => (Root::On, false),
            "always_off" => (Root::Off, false),
            "traceidratio" => (ratio()?, false),
            "parentbased_always_on" => (Root::On, true),
            "parentbased_always_off" => (Root::Off, true),
            "parentbased_traceidratio" => (ratio()?, true),
            other => return Err(format!("OTEL_TRACES_SAMPLER=\"{other}\" is not a sampler this host knows; use always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio")),
        };
        Ok(Self { root, parent_based })
    }

    /// Whether a span of trace `trace_id` (with `parent`, if the client sent one) is kept.
    fn sampled(self, trace_id: &[u8; 16], parent: Option<&TraceParent>) -> bool {
        if let (true, Some(parent)) = (self.parent_based, parent) {
            return parent.sampled();
        }
        match self.root {
            Root::On => true,
            Root::Off => false,
            Root::Ratio(threshold) => {
                let mut low = [0u8; 8];
                low.copy_from_slice(&trace_id[8..]);
                threshold == u64::MAX || u64::from_be_bytes(low) < threshold
            }
        }
    }
}

/// Where and as whom spans are exported.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TraceConfig {
    /// The collector's `host:port`.
    pub(crate) authority: String,
    /// The path spans are posted to (`/v1/traces` by default).
    pub(crate) path: String,
    /// `service.name` (`OTEL_SERVICE_NAME`, default `wasm-toolhost`).
    pub(crate) service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES`, as given.
    pub(crate) resource: Vec<(String, String)>,
    /// `OTEL_TRACES_SAMPLER`.
    pub(crate) sampler: Sampler,
    /// `network.transport` of the calls: `pipe` (stdio) or `tcp` (HTTP).
    pub(crate) transport: &'static str,
}

impl TraceConfig {
    /// The configuration from `--otlp-endpoint` (`flag`) and the `OTEL_*` variables
    /// (read through `var`); `None` when no endpoint is set, or `OTEL_SDK_DISABLED` is
    /// `true`. `--otlp-endpoint` and `OTEL_EXPORTER_OTLP_ENDPOINT` are base URLs
    /// (`/v1/traces` is added); `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is used as given
    /// and wins over `OTEL_EXPORTER_OTLP_ENDPOINT`; the flag wins over both.
    ///
    /// # Errors
    /// An endpoint that is not an `http://` URL, a protocol other than `http/protobuf`
    /// (`OTEL_EXPORTER_OTLP_PROTOCOL`), a bad sampler, a malformed
    /// `OTEL_RESOURCE_ATTRIBUTES`.
    pub(crate) fn from_env(
        flag: Option<&str>,
        var: impl Fn(&str) -> Option<String>,
        transport: &'static str,
    ) -> Result<Option<Self>, String> {
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let (url, origin, base) = if let Some(flag) = flag {
            (flag.to_owned(), "--otlp-endpoint", true)
        } else if let Some(url) =
            var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").filter(|v| !v.is_empty())
        {
            (url, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", false)
        } else if let Some(url) = var("OTEL_EXPORTER_OTLP_ENDPOINT").filter(|v| !v.is_empty()) {
            (url, "OTEL_EXPORTER_OTLP_ENDPOINT", true)
        } else {
            return Ok(None);
        };
        let (authority, mut path) =
            split_http_url(url.trim()).map_err(|why| format!("{origin}={url}: {why}"))?;
        if base {
            path = format!("{}/v1/traces", path.trim_end_matches('/'));
        }
        let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .filter(|v| !v.trim().is_empty());
        if let Some(protocol) = protocol.filter(|p| p.trim() != "http/protobuf") {
            return Err(format!("OTLP protocol \"{protocol}\" is not supported: this host exports http/protobuf only; unset OTEL_EXPORTER_OTLP_PROTOCOL or set it to http/protobuf (and use the collector's HTTP port, 4318 by default)"));
        }
        let sampler = match var("OTEL_TRACES_SAMPLER").filter(|v| !v.is_empty()) {
            Some(name) => Sampler::parse(&name, var("OTEL_TRACES_SAMPLER_ARG").as_deref())?,
            None => Sampler::DEFAULT,
        };
        let mut resource = Vec::new();
        if let Some(text) = var("OTEL_RESOURCE_ATTRIBUTES") {
            for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
                let Some((key, value)) = pair.split_once('=') else {
                    return Err(format!("OTEL_RESOURCE_ATTRIBUTES: \"{pair}\" is not key=value; give e.g. deployment.environment=prod,team=tools"));
                };
                resource.push((key.trim().to_owned(), value.trim().to_owned()));
            }
        }
        let service_name = var("OTEL_SERVICE_NAME")
            .filter(|v| !v.trim().is_empty())
            .or_else(|| {
                resource
                    .iter()
                    .find(|(key, _)| key == "service.name")
                    .map(|(_, value)| value.clone())
            })
            .unwrap_or_else(|| "wasm-toolhost".to_owned());
        resource.retain(|(key, _)| key != "service.name");
        Ok(Some(Self {
            authority,
            path,
            service_name,
            resource,
            sampler,
            transport,
        }))
    }
}

/// `http://host[:port][/path]` into `host:port` and the path (`""` for none).
fn split_http_url(url: &str) -> Result<(String, String), String> {
    if url.starts_with("https://") {
        return Err("https is not supported by the built-in exporter; give an http:// URL of a collector near the host (it may forward over TLS)".to_owned());
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return Err("not an http:// URL; give e.g. http://127.0.0.1:4318".to_owned());
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    if authority.is_empty() || authority.contains('@') || path.contains(['?', '#', ' ']) {
        return Err("give http://HOST:PORT[/PATH], without user, query or fragment".to_owned());
    }
    let has_port = match authority.rfind(']') {
        Some(close) => authority[close..].contains(':'),
        None => authority.contains(':'),
    };
    let authority = if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    Ok((authority, path.to_owned()))
}

/// One call's finished spans, ready to encode: the call's own (`SERVER`, named
/// `tools/call TOOL`) and, when its handler ran, the handler's run (`INTERNAL`, named
/// `execute_tool TOOL`, a child). Built on the call's thread with one allocation (the
/// tool name, the session id and the request id in one text); the rest is encoded by the
/// export thread.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallSpans {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    pub(crate) parent_span_id: Option<[u8; 8]>,
    /// The tool's name, the session id and the JSON-RPC id (each cut to
    /// [`MAX_ATTRIBUTE_BYTES`]) one after the other: [`CallSpans::tool`],
    /// [`CallSpans::session`], [`CallSpans::request`].
    pub(crate) texts: entry::Texts,
    /// Where the tool's name ends in `texts`.
    pub(crate) tool_end: usize,
    /// Where the session id ends in `texts`.
    pub(crate) session_end: usize,
    /// Whether the call has a JSON-RPC id (the rest of `texts`).
    pub(crate) has_request: bool,
    /// `network.transport`.
    pub(crate) transport: &'static str,
    /// The outcome class.
    pub(crate) outcome: &'static str,
    pub(crate) start_unix_nanos: u64,
    pub(crate) end_unix_nanos: u64,
    /// `toolhost.bytes_out`, for a call that went well.
    pub(crate) bytes_out: Option<i64>,
    /// `true`: the status is error (`error.type` is the outcome class).
    pub(crate) error: bool,
    /// The limit hit, and its value when it has one (an event on the call's span).
    pub(crate) limit: Option<(&'static str, Option<i64>)>,
    /// The handler's child span: its id, start and end.
    pub(crate) handler: Option<([u8; 8], u64, u64)>,
    /// What the call did through the host (instantiation, guest call, files, HTTP),
    /// moved out of its record (empty when it did nothing there): the handler's
    /// grandchildren, their ids derived from the call's span id at export.
    pub(crate) steps: entry::CallSteps,
}

impl CallSpans {
    /// The texts of a call's spans (each cut), and where the first two end.
    pub(crate) fn texts(
        tool: &str,
        session: &str,
        request: Option<&str>,
    ) -> (entry::Texts, usize, usize) {
        let (tool, session) = (cut(tool), cut(session));
        let request = request.map_or("", cut);
        let texts = entry::Texts::new([tool, session, request]);
        (texts, tool.len(), tool.len() + session.len())
    }

    /// The tool's name.
    pub(crate) fn tool(&self) -> &[u8] {
        self.texts.bytes().get(..self.tool_end).unwrap_or_default()
    }

    /// The session id.
    pub(crate) fn session(&self) -> &[u8] {
        self.texts
            .bytes()
            .get(self.tool_end..self.session_end)
            .unwrap_or_default()
    }

    /// The JSON-RPC id, when the call has one.
    pub(crate) fn request(&self) -> Option<&[u8]> {
        self.has_request.then(|| {
            self.texts
                .bytes()
                .get(self.session_end..)
                .unwrap_or_default()
        })
    }

    /// How many spans this is.
    fn count(&self) -> u64 {
        1 + u64::from(self.handler.is_some()) + self.steps.len() as u64
    }
}

/// The process's tracer: samples, builds and queues the calls' spans.
#[derive(Debug)]
pub(crate) struct Tracer {
    queue: SyncSender<CallSpans>,
    sampler: Sampler,
    transport: &'static str,
    /// The random seed span and trace ids are drawn from ([`Tracer::random_u64`]).
    seed: u64,
    next_id: AtomicU64,
    dropped: std::sync::Arc<AtomicU64>,
    dropped_logged: AtomicBool,
    shared: std::sync::Arc<ExportState>,
    /// The export thread, woken when a batch is full or at a flush (never per span).
    exporter: std::thread::Thread,
}

/// What the export thread tells: spans queued and not yet tried, export failures.
#[derive(Debug, Default)]
struct ExportState {
    pending: AtomicU64,
    exported: AtomicU64,
    failures: AtomicU64,
    failure_logged: AtomicBool,
}

impl Tracer {
    /// A tracer exporting to `config`'s collector, on a thread it starts, with a queue of
    /// `queue` spans ([`QUEUE_SPANS`] in the host).
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub(crate) fn start(config: TraceConfig, queue: usize) -> std::io::Result<Self> {
        let (sender, receiver) = std::sync::mpsc::sync_channel(queue);
        let shared = std::sync::Arc::new(ExportState::default());
        let sampler = config.sampler;
        let transport = config.transport;
        let exporter = Exporter {
            config,
            shared: std::sync::Arc::clone(&shared),
            buffers: proto::Buffers::default(),
        };
        let thread = std::thread::Builder::new()
            .name("otlp-export".to_owned())
            .spawn(move || exporter.run(&receiver))?;
        Ok(Self {
            exporter: thread.thread().clone(),
            queue: sender,
            sampler,
            transport,
            seed: {
                use std::hash::BuildHasher;
                std::collections::hash_map::RandomState::new().hash_one(0x746f_6f6c_686f_7374_u64)
            },
            next_id: AtomicU64::new(1),
            dropped: std::sync::Arc::new(AtomicU64::new(0)),
            dropped_logged: AtomicBool::new(false),
            shared,
        })
    }

    /// Spans dropped because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    /// The dropped-spans counter, for the metrics to read at each scrape.
    pub(crate) fn dropped_counter(&self) -> std::sync::Arc<AtomicU64> {
        std::sync::Arc::clone(&self.dropped)
    }

    /// Spans the collector accepted (a 2xx answer).
    pub(crate) fn exported(&self) -> u64 {
        self.shared.exported.load(Relaxed)
    }

    /// Export requests that failed (no connection, no answer in time, not 2xx).
    pub(crate) fn failures(&self) -> u64 {
        self.shared.failures.load(Relaxed)
    }

    /// Waits up to `limit` for the queued spans to be tried (at the host's exit).
    pub(crate) fn flush(&self, limit: Duration) {
        let until = Instant::now() + limit;
        while self.shared.pending.load(Relaxed) > 0 && Instant::now() < until {
            self.exporter.unpark();
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A random-looking, non-zero id: [`mix`] of a counter offset by this process's
    /// random seed. Distinct for each of the 2^64 counter values ([`mix`] is a
    /// bijection), unpredictable without the seed, and a few instructions where a
    /// SipHash per id cost about 160 (figure 13).
    fn random_u64(&self) -> u64 {
        loop {
            let n = self.next_id.fetch_add(1, Relaxed);
            let id = mix(self.seed.wrapping_add(n.wrapping_mul(GOLDEN)));
            if id != 0 {
                return id;
            }
        }
    }

    /// A call starts (or a refusal before one is told of): its trace id when it is
    /// sampled (the caller's, or a new one for a call without a parent), `None` when the
    /// sampler drops it. Decided once, at the start, so a dropped call records nothing.
    pub(crate) fn sample(&self, parent: Option<&TraceParent>) -> Option<[u8; 16]> {
        let trace_id = match parent {
            Some(parent) => parent.trace_id,
            None => {
                let mut id = [0u8; 16];
                id[..8].copy_from_slice(&self.random_u64().to_be_bytes());
                id[8..].copy_from_slice(&self.random_u64().to_be_bytes());
                id
            }
        };
        self.sampler.sampled(&trace_id, parent).then_some(trace_id)
    }

    /// A call ended: queue its spans when it was sampled at its start (never waits).
    pub(crate) fn finished(&self, end: &CallEnd<'_>) {
        let Some(trace_id) = end.watch.trace_id else {
            return;
        };
        let parent = end.trace_parent.as_ref();
        let end_nanos = unix_nanos(SystemTime::now());
        let start_nanos = end_nanos.saturating_sub(nanos_of(end.duration));
        // The id the call's outgoing requests named as their parent, when it has one.
        let span_id = end
            .trace_span_id
            .unwrap_or_else(|| self.random_u64().to_be_bytes());
        // The handler's run (for a plugin tool: instantiation and the guest call), a child.
        let handler = end.handler.map(|handler| {
            let start = start_nanos.saturating_add(nanos_of(handler.after));
            (
                self.random_u64().to_be_bytes(),
                start,
                start.saturating_add(nanos_of(handler.took)).min(end_nanos),
            )
        });
        let (bytes_out, limit) = match end.outcome {
            Ok(_) => (Some(i64::try_from(end.bytes_out).unwrap_or(i64::MAX)), None),
            Err(err) => (None, limit_hit(err)),
        };
        let request = request_id(&end.call.id);
        let (texts, tool_end, session_end) =
            CallSpans::texts(&end.call.name, &end.env.session_id, request);
        self.queue_spans(CallSpans {
            trace_id,
            span_id,
            parent_span_id: parent.map(|p| p.span_id),
            texts,
            tool_end,
            session_end,
            has_request: request.is_some(),
            transport: self.transport,
            outcome: end.outcome_class(),
            start_unix_nanos: start_nanos,
            end_unix_nanos: end_nanos,
            bytes_out,
            error: end.outcome.is_err(),
            limit,
            handler,
            // Moved, not copied: the audit log (told first) reads only the lists.
            steps: entry::CallSteps::take(end.record),
        });
    }

    /// Puts a call's `spans` on the export queue, or drops and counts them when the
    /// queue is full.
    fn queue_spans(&self, spans: CallSpans) {
        let count = spans.count();
        let pending = self.shared.pending.fetch_add(1, Relaxed) + 1;
        match self.queue.try_send(spans) {
            // The export thread wakes on its own every BATCH_WAIT; a call wakes it only
            // when a whole batch waits, so no call pays a thread switch for its span.
            Ok(()) if pending.is_multiple_of(BATCH_SPANS as u64) => self.exporter.unpark(),
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.shared.pending.fetch_sub(1, Relaxed);
                self.dropped.fetch_add(count, Relaxed);
                if !self.dropped_logged.swap(true, Relaxed) {
                    tracing::warn!(queue = QUEUE_SPANS, "the trace export queue is full (the collector is slow or down): spans are dropped and counted; calls go on");
                }
            }
        }
    }
}

/// The limit a call hit, and its value when it has one.
fn limit_hit(err: &ToolError) -> Option<(&'static str, Option<i64>)> {
    let int = |v: u64| Some(i64::try_from(v).unwrap_or(i64::MAX));
    match err {
        ToolError::LimitExceeded { limit, .. } => Some(match limit {
            Limit::Memory { bytes } => ("memory", int(*bytes)),
            Limit::Fuel { units } => ("fuel", int(*units)),
            Limit::Output { bytes } => ("output", int(*bytes)),
            Limit::Handles { count } => ("handles", int(*count)),
            Limit::ConcurrentInstances => ("concurrent_instances", None),
            Limit::ConcurrentWalks { walkers } => ("concurrent_walks", int(*walkers)),
            _ => ("other", None),
        }),
        ToolError::TimedOut { limit, .. } => Some((
            "timeout",
            Some(i64::try_from(limit.as_millis()).unwrap_or(i64::MAX)),
        )),
        ToolError::ResultTooLarge { cap, .. } => {
            Some(("result_cap", Some(i64::try_from(*cap).unwrap_or(i64::MAX))))
        }
        ToolError::FileTooLarge { .. } => Some(("file_size", None)),
        _ => None,
    }
}

/// The JSON-RPC id as text: a string id without its quotes, a number as written.
fn request_id(json: &str) -> Option<&str> {
    let id = json.trim();
    if id.is_empty() || id == "null" {
        return None;
    }
    Some(
        id.strip_prefix('"')
            .and_then(|inner| inner.strip_suffix('"'))
            .unwrap_or(id),
    )
}

/// `text` cut to [`MAX_ATTRIBUTE_BYTES`] at a character boundary.
pub(crate) fn cut(text: &str) -> &str {
    if text.len() <= MAX_ATTRIBUTE_BYTES {
        return text;
    }
    let mut at = MAX_ATTRIBUTE_BYTES;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    &text[..at]
}

/// The 64-bit golden ratio: the step between the inputs of [`mix`] (odd, so the inputs
/// of 2^64 steps are distinct).
pub(crate) const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// splitmix64's finalizer: a bijection of `u64` that spreads every input bit.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn nanos_of(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

fn unix_nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The export thread's side.
struct Exporter {
    config: TraceConfig,
    shared: std::sync::Arc<ExportState>,
    /// The requests' buffers, reused.
    buffers: proto::Buffers,
}

impl Exporter {
    /// Exports batches until the tracer is gone: wakes every [`BATCH_WAIT`] (or when a
    /// sender says a batch is full, or at a flush), takes what is queued without waiting,
    /// and sends it in batches of at most [`BATCH_SPANS`]. Nothing wakes it per span: a
    /// thread switch per call cost more than the rest of the span (figure 13).
    fn run(mut self, receiver: &Receiver<CallSpans>) {
        let resource = proto::resource(&self.config.service_name, &self.config.resource);
        let mut batch = Vec::with_capacity(BATCH_SPANS);
        loop {
            std::thread::park_timeout(BATCH_WAIT);
            let mut gone = false;
            loop {
                match receiver.try_recv() {
                    Ok(span) => {
                        batch.push(span);
                        if batch.len() == BATCH_SPANS {
                            self.export(&resource, &mut batch);
                        }
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        gone = true;
                        break;
                    }
                }
            }
            if !batch.is_empty() {
                self.export(&resource, &mut batch);
            }
            if gone {
                return;
            }
        }
    }

    /// Sends `batch` (then empties it), counting what was exported or failed.
    fn export(&mut self, resource: &[u8], batch: &mut Vec<CallSpans>) {
        let mut buffers = std::mem::take(&mut self.buffers);
        let body = proto::export_request(resource, batch, &mut buffers);
        let calls = batch.len() as u64;
        let count = batch.iter().map(CallSpans::count).sum();
        match self.post(body) {
            Ok(()) => {
                self.shared.exported.fetch_add(count, Relaxed);
            }
            Err(why) => {
                self.shared.failures.fetch_add(1, Relaxed);
                if !self.shared.failure_logged.swap(true, Relaxed) {
                    tracing::warn!(collector = %self.config.authority, %why, "cannot export spans (logged once); calls go on");
                }
            }
        }
        self.shared.pending.fetch_sub(calls, Relaxed);
        batch.clear();
        self.buffers = buffers;
    }

    /// One POST of `body`; `Err` says why it failed.
    fn post(&self, body: &[u8]) -> Result<(), String> {
        let addr = self
            .config
            .authority
            .to_socket_addrs()
            .map_err(|err| format!("cannot resolve {}: {err}", self.config.authority))?
            .next()
            .ok_or_else(|| format!("{} has no address", self.config.authority))?;
        let mut stream = TcpStream::connect_timeout(&addr, EXPORT_TIMEOUT)
            .map_err(|err| format!("cannot connect: {err}"))?;
        let _ = stream.set_write_timeout(Some(EXPORT_TIMEOUT));
        let _ = stream.set_read_timeout(Some(EXPORT_TIMEOUT));
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            if self.config.path.is_empty() { "/" } else { &self.config.path },
            self.config.authority,
            body.len()
        );
        stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(body))
            .map_err(|err| format!("cannot send: {err}"))?;
        // The status line is enough: "HTTP/1.1 200 ...".
        let mut answer = [0u8; 64];
        let mut got = 0;
        while got < 12 {
            match stream.read(&mut answer[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(err) => return Err(format!("no answer: {err}")),
            }
        }
        let status = answer.get(9..12).unwrap_or_default();
        if status.first() == Some(&b'2') {
            Ok(())
        } else {
            Err(format!(
                "the collector answered {}",
                String::from_utf8_lossy(status)
            ))
        }
    }
}
