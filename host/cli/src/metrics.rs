//! `--metrics ADDR`: counters of the calls in the Prometheus text format (0.0.4), on
//! their own loopback listener (`GET /metrics`). See docs/operations.md for every metric.
//!
//! The encoder is written here rather than taken from `prometheus-client`: a dozen
//! series of three kinds, whose only subtle part (label value escaping) is tested, do
//! not justify a new dependency in a host whose every dependency is attack surface.
//!
//! Label cardinality is bounded: the `tool` label takes the names of tools a call
//! reached (registered names, bounded by the registry) up to [`MAX_TOOL_LABELS`]; a
//! name no tool has is counted as `_unknown`, and names past the bound as `_other`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use toolhost::registry::{CallEnd, ToolError, OUTCOME_CLASSES};

/// Distinct `tool` label values kept; past it, `_other`.
pub(crate) const MAX_TOOL_LABELS: usize = 1000;
/// Scrapes served at once; a connection past it is closed at once.
pub(crate) const MAX_SCRAPES: usize = 8;
/// How long a scrape may take to send its request.
pub(crate) const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest request head read.
const MAX_REQUEST: usize = 8 * 1024;

/// The duration histogram's bucket bounds, in seconds.
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
];

/// One tool's counters.
#[derive(Debug, Default)]
struct ToolStats {
    /// Calls by [`OUTCOME_CLASSES`] index.
    outcomes: [AtomicU64; OUTCOME_CLASSES.len()],
    /// Calls whose handler ran, by bucket (not cumulative; the last is +Inf).
    buckets: [AtomicU64; BUCKETS.len() + 1],
    /// Sum of those calls' durations, in microseconds.
    sum_micros: AtomicU64,
}

/// The process's metrics.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    tools: RwLock<HashMap<String, Arc<ToolStats>>>,
    in_flight: AtomicI64,
    plugin_loads: AtomicU64,
    plugin_reloads: AtomicU64,
    plugin_failures: AtomicU64,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    /// Reads the server's own figures at each scrape ([`Metrics::set_server`]).
    server: std::sync::OnceLock<ServerFigures>,
    /// Trace spans dropped because the export queue was full ([`Metrics::count_dropped_spans`]).
    spans_dropped: std::sync::OnceLock<Arc<AtomicU64>>,
    /// Plugins' outgoing HTTP requests by plugin, then by [`HTTP_CLASSES`] index.
    plugin_http: RwLock<HashMap<String, Arc<[AtomicU64; HTTP_CLASSES.len()]>>>,
}

/// The `status` label values of `toolhost_plugin_http_requests_total`, in order.
const HTTP_CLASSES: [&str; 8] = [
    "1xx", "2xx", "3xx", "4xx", "5xx", "other", "refused", "error",
];

impl toolhost_plugin::http_policy::HttpObserver for Metrics {
    fn request(&self, plugin: &str, outcome: toolhost_plugin::http_policy::HttpOutcome) {
        let class = outcome.class();
        let index = HTTP_CLASSES
            .iter()
            .position(|known| *known == class)
            .unwrap_or(HTTP_CLASSES.len() - 1);
        let known = self
            .plugin_http
            .read()
            .ok()
            .and_then(|plugins| plugins.get(plugin).cloned());
        let counters = known.unwrap_or_else(|| {
            let mut plugins = self
                .plugin_http
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let key = if plugins.len() >= MAX_TOOL_LABELS && !plugins.contains_key(plugin) {
                OTHER_TOOL
            } else {
                plugin
            };
            Arc::clone(plugins.entry(key.to_owned()).or_default())
        });
        counters[index].fetch_add(1, Ordering::Relaxed);
    }
}

/// Reads what the MCP server holds now.
pub(crate) struct ServerFigures(pub(crate) Box<dyn Fn() -> ServerGauges + Send + Sync>);

/// What the MCP server holds now, read at each scrape.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ServerGauges {
    /// Sessions open (stdio: 1).
    pub(crate) sessions: usize,
    /// Tool calls waiting for a slot (stdio).
    pub(crate) calls_queued: usize,
    /// HTTP connections holding a slot (`None` over stdio).
    pub(crate) connections: Option<usize>,
    /// The plugin instance pool now, when there are plugins: calls running, idle
    /// instances kept, places for calls.
    pub(crate) pool: Option<(u32, u32, u32)>,
    /// Tasks created since start.
    pub(crate) tasks_created: usize,
    /// Tasks ended since start, by [`TASK_ENDS`] index.
    pub(crate) tasks_ended: [usize; TASK_ENDS.len()],
    /// HTTP requests refused before a session, by
    /// [`REFUSAL_STATUSES`](toolhost_mcp::REFUSAL_STATUSES) index (shown over HTTP only).
    pub(crate) http_refusals: [usize; 4],
}

/// The `status` label values of `toolhost_tasks_ended_total`, in order.
pub(crate) const TASK_ENDS: [&str; 3] = ["completed", "failed", "cancelled"];

impl ServerGauges {
    /// The pool figures of `host`, if any.
    pub(crate) fn with_pool(mut self, host: Option<&toolhost_plugin::PluginHost>) -> Self {
        self.pool = host.map(|host| {
            (
                host.calls_running(),
                host.idle_instances(),
                host.pool().concurrent_calls,
            )
        });
        self
    }

    /// The task counts and HTTP refusals of `stats`.
    pub(crate) fn with_tasks(mut self, stats: &toolhost_mcp::McpStats) -> Self {
        self.http_refusals = stats.http_refusals;
        self.tasks_created = stats.tasks_created;
        self.tasks_ended = [
            stats.tasks_completed,
            stats.tasks_failed,
            stats.tasks_cancelled,
        ];
        self
    }
}

impl std::fmt::Debug for ServerFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerFigures")
    }
}

/// The label an unknown tool's calls are counted under.
pub(crate) const UNKNOWN_TOOL: &str = "_unknown";
/// The label past [`MAX_TOOL_LABELS`].
pub(crate) const OTHER_TOOL: &str = "_other";

impl Metrics {
    /// A call admitted.
    pub(crate) fn started(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// A call refused because the audit log cannot be written (before its name was
    /// checked: counted under its name only when that name was seen before).
    pub(crate) fn refused_unaudited(&self, tool: &str) {
        let stats = self.known(tool).unwrap_or_else(|| self.stats(UNKNOWN_TOOL));
        stats.outcomes[class_index("refused")].fetch_add(1, Ordering::Relaxed);
    }

    /// A call ended.
    pub(crate) fn finished(&self, end: &CallEnd<'_>) {
        if end.admitted {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        let unknown = matches!(end.outcome, Err(ToolError::UnknownTool { .. }));
        let stats = if unknown {
            self.stats(UNKNOWN_TOOL)
        } else {
            self.stats(&end.call.name)
        };
        stats.outcomes[class_index(end.outcome_class())].fetch_add(1, Ordering::Relaxed);
        if end.ran {
            let secs = end.duration.as_secs_f64();
            let bucket = BUCKETS
                .iter()
                .position(|bound| secs <= *bound)
                .unwrap_or(BUCKETS.len());
            stats.buckets[bucket].fetch_add(1, Ordering::Relaxed);
            let micros = u64::try_from(end.duration.as_micros()).unwrap_or(u64::MAX);
            stats.sum_micros.fetch_add(micros, Ordering::Relaxed);
        }
    }

    /// Plugins loaded at start or added later (`--watch`).
    pub(crate) fn plugin_loaded(&self, count: u64) {
        self.plugin_loads.fetch_add(count, Ordering::Relaxed);
    }

    /// Sets how to read the server's figures (once; later calls are ignored).
    pub(crate) fn set_server(&self, figures: ServerFigures) {
        let _ = self.server.set(figures);
    }

    /// Reads the trace exporter's dropped-spans counter at each scrape
    /// (`toolhost_trace_spans_dropped_total`, shown only when traces are exported).
    pub(crate) fn count_dropped_spans(&self, counter: Arc<AtomicU64>) {
        let _ = self.spans_dropped.set(counter);
    }

    /// A plugin's component came from the compile cache (`hit`) or was compiled.
    pub(crate) fn compiled(&self, hit: bool) {
        let counter = if hit {
            &self.cache_hits
        } else {
            &self.cache_misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A plugin reloaded (`--watch`).
    pub(crate) fn plugin_reloaded(&self) {
        self.plugin_reloads.fetch_add(1, Ordering::Relaxed);
    }

    /// Plugins that failed to load or reload.
    pub(crate) fn plugin_failed(&self, count: u64) {
        self.plugin_failures.fetch_add(count, Ordering::Relaxed);
    }

    fn known(&self, tool: &str) -> Option<Arc<ToolStats>> {
        self.tools.read().ok()?.get(tool).cloned()
    }

    /// `tool`'s counters, made at its first call (or `_other` past the bound).
    fn stats(&self, tool: &str) -> Arc<ToolStats> {
        if let Some(stats) = self.known(tool) {
            return stats;
        }
        let mut tools = self
            .tools
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = if tools.len() >= MAX_TOOL_LABELS && !tools.contains_key(tool) {
            OTHER_TOOL
        } else {
            tool
        };
        Arc::clone(tools.entry(key.to_owned()).or_default())
    }

    /// The text format (0.0.4).
    pub(crate) fn render(&self) -> String {
        let mut tools: Vec<(String, Arc<ToolStats>)> = match self.tools.read() {
            Ok(tools) => tools
                .iter()
                .map(|(name, stats)| (name.clone(), Arc::clone(stats)))
                .collect(),
            Err(_) => Vec::new(),
        };
        tools.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out = String::with_capacity(1024 + tools.len() * 1024);
        out.push_str("# HELP toolhost_tool_calls_total Tool calls ended, by tool and outcome.\n# TYPE toolhost_tool_calls_total counter\n");
        for (name, stats) in &tools {
            let tool = escape_label(name);
            for (class, count) in OUTCOME_CLASSES.iter().zip(&stats.outcomes) {
                let count = count.load(Ordering::Relaxed);
                if count > 0 {
                    let _ = writeln!(
                        out,
                        "toolhost_tool_calls_total{{tool=\"{tool}\",outcome=\"{class}\"}} {count}"
                    );
                }
            }
        }
        out.push_str("# HELP toolhost_tool_call_duration_seconds How long the calls that ran took, by tool.\n# TYPE toolhost_tool_call_duration_seconds histogram\n");
        for (name, stats) in &tools {
            let tool = escape_label(name);
            let mut cumulative = 0;
            for (index, count) in stats.buckets.iter().enumerate() {
                cumulative += count.load(Ordering::Relaxed);
                let bound = BUCKETS
                    .get(index)
                    .map_or_else(|| "+Inf".to_owned(), f64::to_string);
                let _ = writeln!(
                    out,
                    "toolhost_tool_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            let sum = stats.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(
                out,
                "toolhost_tool_call_duration_seconds_sum{{tool=\"{tool}\"}} {sum}\ntoolhost_tool_call_duration_seconds_count{{tool=\"{tool}\"}} {cumulative}"
            );
        }
        let gauge = |out: &mut String, name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        gauge(
            &mut out,
            "toolhost_tool_calls_in_flight",
            "gauge",
            "Tool calls admitted and not ended.",
            self.in_flight.load(Ordering::Relaxed).max(0).to_string(),
        );
        gauge(
            &mut out,
            "toolhost_plugin_loads_total",
            "counter",
            "Plugins loaded (at start, and added with --watch).",
            self.plugin_loads.load(Ordering::Relaxed).to_string(),
        );
        gauge(
            &mut out,
            "toolhost_plugin_reloads_total",
            "counter",
            "Plugins reloaded with --watch.",
            self.plugin_reloads.load(Ordering::Relaxed).to_string(),
        );
        gauge(
            &mut out,
            "toolhost_plugin_load_failures_total",
            "counter",
            "Plugin files that failed to load or reload.",
            self.plugin_failures.load(Ordering::Relaxed).to_string(),
        );
        gauge(
            &mut out,
            "toolhost_compile_cache_hits_total",
            "counter",
            "Plugin components loaded from the compile cache.",
            self.cache_hits.load(Ordering::Relaxed).to_string(),
        );
        gauge(
            &mut out,
            "toolhost_compile_cache_misses_total",
            "counter",
            "Plugin components compiled (not found in the compile cache, or no cache).",
            self.cache_misses.load(Ordering::Relaxed).to_string(),
        );
        self.render_plugin_http(&mut out);
        if let Some(dropped) = self.spans_dropped.get() {
            gauge(
                &mut out,
                "toolhost_trace_spans_dropped_total",
                "counter",
                "Trace spans dropped because the export queue was full (the collector slow or down).",
                dropped.load(Ordering::Relaxed).to_string(),
            );
        }
        if let Some(figures) = self.server.get() {
            let now = (figures.0)();
            gauge(
                &mut out,
                "toolhost_sessions_open",
                "gauge",
                "MCP sessions the server holds (stdio: 1).",
                now.sessions.to_string(),
            );
            gauge(
                &mut out,
                "toolhost_tool_calls_queued",
                "gauge",
                "Tool calls waiting for a slot (stdio; over HTTP a call past the limit is refused).",
                now.calls_queued.to_string(),
            );
            gauge(
                &mut out,
                "toolhost_tasks_created_total",
                "counter",
                "Tool calls run as MCP tasks.",
                now.tasks_created.to_string(),
            );
            out.push_str("# HELP toolhost_tasks_ended_total MCP tasks ended, by status (cancelled: by the client, or stopped with their session or at their time to live).\n# TYPE toolhost_tasks_ended_total counter\n");
            for (status, count) in TASK_ENDS.iter().zip(now.tasks_ended) {
                let _ = writeln!(
                    out,
                    "toolhost_tasks_ended_total{{status=\"{status}\"}} {count}"
                );
            }
            if now.connections.is_some() {
                out.push_str("# HELP toolhost_http_refusals_total HTTP requests refused before they reached a session, by status (401 no or a bad token, 403 host, origin, scope or policy, 429 a quota, 503 the OAuth keys or the quota table unavailable).\n# TYPE toolhost_http_refusals_total counter\n");
                for (status, count) in toolhost_mcp::REFUSAL_STATUSES.iter().zip(now.http_refusals)
                {
                    let _ = writeln!(
                        out,
                        "toolhost_http_refusals_total{{status=\"{status}\"}} {count}"
                    );
                }
            }
            if let Some((running, idle, places)) = now.pool {
                gauge(
                    &mut out,
                    "toolhost_plugin_calls_running",
                    "gauge",
                    "Plugin calls running (each holds an instance slot of the pool).",
                    running.to_string(),
                );
                gauge(
                    &mut out,
                    "toolhost_plugin_call_places",
                    "gauge",
                    "Plugin calls that may run at once.",
                    places.to_string(),
                );
                gauge(
                    &mut out,
                    "toolhost_plugin_instances_idle",
                    "gauge",
                    "Idle plugin instances kept for reuse (each holds an instance slot).",
                    idle.to_string(),
                );
            }
            if let Some(connections) = now.connections {
                gauge(
                    &mut out,
                    "toolhost_http_connections",
                    "gauge",
                    "HTTP connections holding a slot.",
                    connections.to_string(),
                );
            }
        }
        out
    }
}

impl Metrics {
    /// `toolhost_plugin_http_requests_total`, by plugin and status class.
    fn render_plugin_http(&self, out: &mut String) {
        let mut plugins: Vec<(String, Arc<[AtomicU64; HTTP_CLASSES.len()]>)> =
            match self.plugin_http.read() {
                Ok(plugins) => plugins
                    .iter()
                    .map(|(name, counters)| (name.clone(), Arc::clone(counters)))
                    .collect(),
                Err(_) => Vec::new(),
            };
        plugins.sort_by(|a, b| a.0.cmp(&b.0));
        out.push_str("# HELP toolhost_plugin_http_requests_total Plugins' outgoing HTTP requests, by plugin and status class (refused: outside the grant or past a per-call limit, never sent; error: no answer).\n# TYPE toolhost_plugin_http_requests_total counter\n");
        for (name, counters) in &plugins {
            let plugin = escape_label(name);
            for (class, count) in HTTP_CLASSES.iter().zip(counters.iter()) {
                let count = count.load(Ordering::Relaxed);
                if count > 0 {
                    let _ = writeln!(
                        out,
                        "toolhost_plugin_http_requests_total{{plugin=\"{plugin}\",status=\"{class}\"}} {count}"
                    );
                }
            }
        }
    }
}

fn class_index(class: &str) -> usize {
    OUTCOME_CLASSES
        .iter()
        .position(|known| *known == class)
        .unwrap_or(OUTCOME_CLASSES.len() - 1)
}

/// A label value as the text format wants it: `\`, `"` and newlines escaped.
pub(crate) fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Whether `addr` is a loopback address.
pub(crate) fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// Binds `addr` and serves `GET /metrics` until the task is aborted. At most
/// [`MAX_SCRAPES`] connections are served at once (more are closed at once), each must
/// send its request within [`SCRAPE_TIMEOUT`], and each gets one response, then is
/// closed.
///
/// # Errors
/// When `addr` cannot be bound.
pub(crate) async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves scrapes on `listener` (see [`bind`]).
pub(crate) async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    let slots = Arc::new(Semaphore::new(MAX_SCRAPES));
    let mut warned = false;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                debug!(%err, "metrics listener: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            if !warned {
                warn!(%peer, "metrics listener: {MAX_SCRAPES} scrapes already being served; closing further connections until one ends");
                warned = true;
            }
            drop(stream);
            continue;
        };
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(SCRAPE_TIMEOUT, answer(stream, &metrics)).await;
            drop(slot);
        });
    }
}

/// Reads one request head and answers it.
async fn answer(mut stream: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_REQUEST {
            return respond(&mut stream, "431 Request Header Fields Too Large", "").await;
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    if head.len() > MAX_REQUEST {
        return respond(&mut stream, "431 Request Header Fields Too Large", "").await;
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let (method, target) = (parts.next(), parts.next());
    match (method, target) {
        (Some(b"GET"), Some(b"/metrics")) => {
            respond(&mut stream, "200 OK", &metrics.render()).await
        }
        (Some(b"GET"), _) => {
            respond(&mut stream, "404 Not Found", "not found: scrape /metrics\n").await
        }
        _ => respond(&mut stream, "405 Method Not Allowed", "only GET /metrics\n").await,
    }
}

async fn respond(stream: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests;
