//! Log lines for the client: MCP's `logging/setLevel` (legacy era) and per-request
//! `io.modelcontextprotocol/logLevel` (2026-07-28), answered with `notifications/message`.
//!
//! The host logs through `tracing`. [`log_layer`] is a `tracing_subscriber` layer that
//! hands each event to the MCP session it belongs to: the server runs every tool call
//! inside a span naming the session's (or, in the modern era, the request's) log sink, so
//! a plugin's log lines and the host's lines about that call reach the client that made
//! it, and no other. Events the host wants every listening session to see (a plugin
//! reloaded or failing to reload) are logged inside [`broadcast_span`].
//!
//! Without the layer installed (an embedder with its own subscriber), `logging/setLevel`
//! is still answered, and nothing is forwarded.
//!
//! # Sandbox
//! Nothing here may grow or stall the host: each sink passes at most
//! [`MAX_LINES_PER_SECOND`] lines a second (bursts of [`MAX_BURST`]); a line is cut to
//! [`MAX_MESSAGE_BYTES`]; a line that finds the response queue full is dropped, never
//! waited for; and an event logged while forwarding one is not forwarded.
//!
//! ```
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! // The `host` binary's set-up: stderr as before, plus the layer.
//! let subscriber = tracing_subscriber::registry().with(toolhost_mcp::log_layer());
//! let _guard = tracing::subscriber::set_default(subscriber);
//! ```

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError, RwLock};
use std::time::Instant;

use serde_json::{json, Map, Value};
use tracing::field::{Field, Visit};
use tracing::{span, Event, Metadata, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::LookupSpan;

/// A log level of MCP (syslog's, RFC 5424), least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum LogLevel {
    /// Detailed debugging information (`tracing`'s DEBUG and TRACE).
    Debug,
    /// General information (INFO).
    Info,
    /// Normal but significant.
    Notice,
    /// Warning conditions (WARN).
    Warning,
    /// Error conditions (ERROR).
    Error,
    /// Critical conditions.
    Critical,
    /// Action must be taken immediately.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LogLevel {
    /// The levels' names, least severe first.
    pub const NAMES: [&'static str; 8] = [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];
    pub(crate) const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    /// The level named `name` (`"warning"`), if MCP has it.
    pub fn parse(name: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .position(|&known| known == name)
            .map(|at| Self::ALL[at])
    }

    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The MCP level of a `tracing` level.
    pub fn of(level: &tracing::Level) -> Self {
        match *level {
            tracing::Level::ERROR => LogLevel::Error,
            tracing::Level::WARN => LogLevel::Warning,
            tracing::Level::INFO => LogLevel::Info,
            _ => LogLevel::Debug,
        }
    }
}

/// Lines one sink forwards per second at most (beyond a burst); the rest are dropped.
pub const MAX_LINES_PER_SECOND: f64 = 50.0;
/// Lines one sink may forward at once before the rate applies.
pub const MAX_BURST: f64 = 200.0;
/// Longest message forwarded, in bytes; the rest is cut.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024;

/// The span name whose events go to one sink (its `mcp_log_sink` field).
pub(crate) const CALL_SPAN: &str = "mcp_call";
/// The span name whose events go to every session that asked for logs.
const BROADCAST_SPAN: &str = "mcp_broadcast";
const SINK_FIELD: &str = "mcp_log_sink";

/// Where one session's (or one request's) forwarded lines go.
pub(crate) struct Sink {
    /// 0: off; else the least severe level forwarded, as `LogLevel as u8 + 1`.
    level: AtomicU8,
    /// Whether host-wide events ([`broadcast_span`]) reach it.
    broadcast: bool,
    send: Box<dyn Fn(String) + Send + Sync>,
    bucket: Mutex<Bucket>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Sink {
    fn wants(&self, level: LogLevel) -> bool {
        match self.level.load(Ordering::Relaxed) {
            0 => false,
            least => level as u8 + 1 >= least,
        }
    }

    fn admit(&self) -> bool {
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let refill = now.duration_since(bucket.at).as_secs_f64() * MAX_LINES_PER_SECOND;
        bucket.tokens = (bucket.tokens + refill).min(MAX_BURST);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[derive(Default)]
struct Hub {
    sinks: RwLock<HashMap<u64, Arc<Sink>>>,
    next: AtomicU64,
    /// Sinks with a level set: the layer does nothing while it is 0.
    listening: AtomicUsize,
    /// The most verbose `tracing` level a sink needs now ([`hint_level`]), as the layer's
    /// `max_level_hint`: 0 (off) while no sink listens.
    hint: AtomicU8,
}

static HUB: LazyLock<Hub> = LazyLock::new(Hub::default);

/// The `tracing` level filter stored in [`Hub::hint`].
fn hint_level(hint: u8) -> LevelFilter {
    match hint {
        0 => LevelFilter::OFF,
        1 => LevelFilter::ERROR,
        2 => LevelFilter::WARN,
        3 => LevelFilter::INFO,
        _ => LevelFilter::DEBUG,
    }
}

/// The hint for sinks at these levels (0: off, else `LogLevel as u8 + 1`): off while
/// none listens, else at least INFO (the call spans are INFO spans), DEBUG when one wants
/// debug lines.
fn hint_for(levels: impl Iterator<Item = u8>) -> u8 {
    match levels.filter(|&least| least != 0).min() {
        None => 0,
        Some(1) => 4,
        Some(_) => 3,
    }
}

/// Recomputes the level hint after a sink's level changed, and, when it changed, has
/// `tracing` ask every call site again. The hint matters: `tracing` (and the `log`
/// bridge) skip every event above the most verbose level any layer may want before
/// asking any filter, so a layer with no hint would make every debug and trace line of
/// every dependency (Cranelift's, while compiling a plugin) reach the filters: a cold
/// start measured 8 times slower.
fn refresh_hint() {
    let hint = {
        let sinks = HUB.sinks.read().unwrap_or_else(PoisonError::into_inner);
        hint_for(sinks.values().map(|sink| sink.level.load(Ordering::SeqCst)))
    };
    if HUB.hint.swap(hint, Ordering::SeqCst) != hint {
        tracing::callsite::rebuild_interest_cache();
    }
}

/// A registered sink; dropping it unregisters it.
pub(crate) struct SinkGuard {
    id: u64,
    sink: Arc<Sink>,
}

impl SinkGuard {
    /// A sink forwarding at `level` (none: off until [`SinkGuard::set_level`]) through
    /// `send`, which must not block and must not log.
    pub(crate) fn new(
        level: Option<LogLevel>,
        broadcast: bool,
        send: impl Fn(String) + Send + Sync + 'static,
    ) -> Self {
        let sink = Arc::new(Sink {
            level: AtomicU8::new(0),
            broadcast,
            send: Box::new(send),
            bucket: Mutex::new(Bucket {
                tokens: MAX_BURST,
                at: Instant::now(),
            }),
        });
        let id = HUB.next.fetch_add(1, Ordering::Relaxed) + 1;
        HUB.sinks
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, Arc::clone(&sink));
        let guard = Self { id, sink };
        if let Some(level) = level {
            guard.set_level(level);
        }
        guard
    }

    /// The id a call span names this sink by.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The least severe level forwarded, `None` while off.
    pub(crate) fn level(&self) -> Option<LogLevel> {
        match self.sink.level.load(Ordering::SeqCst) {
            0 => None,
            least => LogLevel::ALL.get(usize::from(least) - 1).copied(),
        }
    }

    /// Forwards lines at `level` and above from now on.
    pub(crate) fn set_level(&self, level: LogLevel) {
        if self.sink.level.swap(level as u8 + 1, Ordering::SeqCst) == 0 {
            HUB.listening.fetch_add(1, Ordering::SeqCst);
        }
        refresh_hint();
    }
}

impl Drop for SinkGuard {
    fn drop(&mut self) {
        HUB.sinks
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
        if self.sink.level.load(Ordering::SeqCst) != 0 {
            HUB.listening.fetch_sub(1, Ordering::SeqCst);
            refresh_hint();
        }
    }
}

/// The span a tool call runs in, tying the events inside to the sink `sink` (0: none).
pub(crate) fn call_span(sink: u64) -> tracing::Span {
    tracing::info_span!(target: "toolhost_mcp", "mcp_call", mcp_log_sink = sink)
}

/// A span whose events go to every session that asked for log lines (legacy
/// `logging/setLevel`): host-wide news such as a plugin reloaded, or failing to.
pub fn broadcast_span() -> tracing::Span {
    tracing::info_span!(target: "toolhost_mcp", "mcp_broadcast")
}

/// The layer that forwards log events to MCP clients; add it to the process's
/// `tracing` subscriber (see [the module docs](self)). It has its own filter, so the
/// other layers' filters (`RUST_LOG`) do not limit what a client asked for, and it costs
/// one atomic load per event while no client listens.
pub fn log_layer<S>() -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    McpLogLayer.with_filter(McpLogFilter)
}

struct McpLogLayer;
struct McpLogFilter;

/// The sink a span ties its events to.
struct SinkId(u64);
/// Marks a broadcast span.
struct Broadcast;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Filter<S> for McpLogFilter {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        if meta.is_span() {
            return meta.name() == CALL_SPAN || meta.name() == BROADCAST_SPAN;
        }
        HUB.listening.load(Ordering::Relaxed) > 0
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(hint_level(HUB.hint.load(Ordering::SeqCst)))
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        if meta.is_span() && meta.name() != CALL_SPAN && meta.name() != BROADCAST_SPAN {
            return tracing::subscriber::Interest::never();
        }
        // While no client listens, no event is wanted; the interest is asked again when
        // one starts (refresh_hint), and then per event.
        if !meta.is_span() && HUB.hint.load(Ordering::SeqCst) == 0 {
            return tracing::subscriber::Interest::never();
        }
        tracing::subscriber::Interest::sometimes()
    }
}

thread_local! {
    /// Set while an event is forwarded, so one logged meanwhile is not (no loops).
    static FORWARDING: Cell<bool> = const { Cell::new(false) };
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for McpLogLayer {
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        struct Find(Option<u64>);
        impl Visit for Find {
            fn record_u64(&mut self, field: &Field, value: u64) {
                if field.name() == SINK_FIELD {
                    self.0 = Some(value);
                }
            }
            fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
        }
        let Some(span) = ctx.span(id) else { return };
        if attrs.metadata().name() == BROADCAST_SPAN {
            span.extensions_mut().insert(Broadcast);
            return;
        }
        let mut find = Find(None);
        attrs.record(&mut find);
        if let Some(sink) = find.0.filter(|&sink| sink != 0) {
            span.extensions_mut().insert(SinkId(sink));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if FORWARDING.with(Cell::get) {
            return;
        }
        let level = LogLevel::of(event.metadata().level());
        let Some(scope) = ctx.event_scope(event) else {
            return;
        };
        let mut targets: Vec<Arc<Sink>> = Vec::new();
        for span in scope {
            let extensions = span.extensions();
            if let Some(SinkId(id)) = extensions.get::<SinkId>() {
                let sinks = HUB.sinks.read().unwrap_or_else(PoisonError::into_inner);
                targets.extend(sinks.get(id).cloned());
                break;
            }
            if extensions.get::<Broadcast>().is_some() {
                let sinks = HUB.sinks.read().unwrap_or_else(PoisonError::into_inner);
                targets.extend(sinks.values().filter(|sink| sink.broadcast).cloned());
                break;
            }
        }
        targets.retain(|sink| sink.wants(level));
        if targets.is_empty() {
            return;
        }
        FORWARDING.with(|flag| flag.set(true));
        let line = notification(level, event);
        for sink in targets {
            if sink.admit() {
                (sink.send)(line.clone());
            }
        }
        FORWARDING.with(|flag| flag.set(false));
    }
}

/// The `notifications/message` line for `event`: its target as the logger, its message
/// and fields as the data.
fn notification(level: LogLevel, event: &Event<'_>) -> String {
    struct Fields(Map<String, Value>);
    impl Visit for Fields {
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().into(), json!(cut(value)));
        }
        fn record_i64(&mut self, field: &Field, value: i64) {
            self.0.insert(field.name().into(), json!(value));
        }
        fn record_u64(&mut self, field: &Field, value: u64) {
            self.0.insert(field.name().into(), json!(value));
        }
        fn record_f64(&mut self, field: &Field, value: f64) {
            self.0.insert(field.name().into(), json!(value));
        }
        fn record_bool(&mut self, field: &Field, value: bool) {
            self.0.insert(field.name().into(), json!(value));
        }
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            let mut text = String::new();
            let _ = write!(text, "{value:?}");
            self.0.insert(field.name().into(), json!(cut(&text)));
        }
    }
    let mut fields = Fields(Map::new());
    event.record(&mut fields);
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {
            "level": level.as_str(),
            "logger": event.metadata().target(),
            "data": fields.0,
        },
    })
    .to_string()
}

fn cut(text: &str) -> String {
    if text.len() <= MAX_MESSAGE_BYTES {
        return text.to_owned();
    }
    let end = text.floor_char_boundary(MAX_MESSAGE_BYTES);
    format!("{} … ({} more bytes cut)", &text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Instrument;
    use tracing_subscriber::layer::SubscriberExt;

    fn collector() -> (Arc<Mutex<Vec<Value>>>, impl Fn(String) + Send + Sync) {
        let lines: Arc<Mutex<Vec<Value>>> = Arc::default();
        let sink = Arc::clone(&lines);
        (lines, move |line: String| {
            sink.lock()
                .unwrap()
                .push(serde_json::from_str(&line).unwrap());
        })
    }

    #[test]
    fn the_level_hint_stays_off_until_someone_listens() {
        assert_eq!(hint_level(hint_for([0, 0].into_iter())), LevelFilter::OFF);
        assert_eq!(hint_for(std::iter::empty()), 0);
        let error = LogLevel::Error as u8 + 1;
        let debug = LogLevel::Debug as u8 + 1;
        assert_eq!(
            hint_level(hint_for([0, error].into_iter())),
            LevelFilter::INFO
        );
        assert_eq!(
            hint_level(hint_for([error, debug].into_iter())),
            LevelFilter::DEBUG
        );
    }

    #[test]
    fn levels() {
        for (at, name) in LogLevel::NAMES.iter().enumerate() {
            let level = LogLevel::parse(name).unwrap();
            assert_eq!((level as usize, level.as_str()), (at, *name));
        }
        assert_eq!(LogLevel::parse("WARNING"), None);
        assert!(LogLevel::Debug < LogLevel::Emergency);
        assert_eq!(LogLevel::of(&tracing::Level::TRACE), LogLevel::Debug);
    }

    #[tokio::test]
    async fn events_reach_only_their_own_sink_at_its_level() {
        let subscriber = tracing_subscriber::registry().with(log_layer());
        let _default = tracing::subscriber::set_default(subscriber);
        let (mine, send_mine) = collector();
        let (theirs, send_theirs) = collector();
        let me = SinkGuard::new(Some(LogLevel::Info), true, send_mine);
        let them = SinkGuard::new(None, true, send_theirs);

        async {
            tracing::debug!("too detailed");
            tracing::info!(target: "plugin", plugin = "greet", "hello from {}", "greet");
        }
        .instrument(call_span(me.id()))
        .await;
        async { tracing::error!("their error") }
            .instrument(call_span(them.id()))
            .await;
        tracing::error!("outside any call");

        assert_eq!(
            *mine.lock().unwrap(),
            [
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {
                    "level": "info", "logger": "plugin",
                    "data": {"message": "hello from greet", "plugin": "greet"},
                }})
            ]
        );
        // "them" set no level: nothing, not even its own call's error.
        assert!(theirs.lock().unwrap().is_empty());
        them.set_level(LogLevel::Error);
        broadcast_span().in_scope(|| tracing::warn!("plugin x reloaded"));
        broadcast_span().in_scope(|| tracing::error!("plugin y failed to reload"));
        assert_eq!(theirs.lock().unwrap().len(), 1);
        assert_eq!(mine.lock().unwrap().len(), 3);
        drop(me);
        broadcast_span().in_scope(|| tracing::error!("after"));
        assert_eq!(theirs.lock().unwrap().len(), 2);
    }

    #[test]
    fn a_flood_is_cut_to_the_burst_and_long_lines_are_cut() {
        let subscriber = tracing_subscriber::registry().with(log_layer());
        let _default = tracing::subscriber::set_default(subscriber);
        let (lines, send) = collector();
        let sink = SinkGuard::new(Some(LogLevel::Debug), false, send);
        let long = "x".repeat(MAX_MESSAGE_BYTES + 10);
        let started = Instant::now();
        call_span(sink.id()).in_scope(|| {
            for _ in 0..1000 {
                tracing::info!("{long}");
            }
        });
        let refilled = started.elapsed().as_secs_f64() * MAX_LINES_PER_SECOND;
        let lines = lines.lock().unwrap();
        // The burst, plus what the rate refilled while the loop ran; far from 1000.
        let most = (MAX_BURST + refilled).ceil() as usize + 1;
        assert!(
            (MAX_BURST as usize..=most).contains(&lines.len()) && most < 1000,
            "{} lines, at most {most}",
            lines.len()
        );
        assert_eq!(
            lines[0]["params"]["data"]["message"],
            format!("{} … (10 more bytes cut)", "x".repeat(MAX_MESSAGE_BYTES))
        );
    }
}
