//! The process's [`CallObserver`]: the audit log (`--audit-log`) and the metrics
//! (`--metrics`), installed on every registry a server dispatches through. With
//! neither flag none is installed, and a call pays nothing for them.

use std::sync::{Arc, OnceLock};

use toolhost::registry::{CallEnd, CallObserver, CallStart, CallWatch, ObserverRefusal, Registry};

use crate::audit::AuditLog;
use crate::metrics::Metrics;

/// What watches the calls.
#[derive(Debug, Default)]
pub(crate) struct Observers {
    /// `--audit-log`.
    pub(crate) audit: Option<AuditLog>,
    /// `--metrics`.
    pub(crate) metrics: Option<Arc<Metrics>>,
    /// `--otlp-endpoint` / `OTEL_EXPORTER_OTLP_*`.
    pub(crate) tracer: Option<crate::trace::Tracer>,
}

impl CallObserver for Observers {
    fn admit(&self, call: &CallStart<'_>) -> Result<(), ObserverRefusal> {
        if let Some(audit) = &self.audit {
            if let Err(refusal) = audit.admit() {
                if let Some(metrics) = &self.metrics {
                    metrics.refused_unaudited(&call.call.name);
                }
                return Err(refusal);
            }
        }
        if let Some(metrics) = &self.metrics {
            metrics.started();
        }
        Ok(())
    }

    fn finished(&self, end: &CallEnd<'_>) {
        self.finished_as(end, None);
    }

    /// The tracer samples the call now; the call is recorded when it is sampled (the
    /// tracer makes spans of its steps) or audited (the audit log lists the files and
    /// hosts it touched). The metrics alone need no record.
    fn watch(&self, call: &CallStart<'_>) -> CallWatch {
        let trace_id = self
            .tracer
            .as_ref()
            .and_then(|tracer| tracer.sample(call.trace_parent.as_ref()));
        CallWatch {
            record: self.audit.is_some() || trace_id.is_some(),
            trace_id,
        }
    }
}

impl Observers {
    /// A call ended, for `principal` (the client name of the session's token) if known.
    fn finished_as(&self, end: &CallEnd<'_>, principal: Option<&str>) {
        if let Some(metrics) = &self.metrics {
            metrics.finished(end);
        }
        if let Some(audit) = &self.audit {
            audit.finished(end, principal);
        }
        if let Some(tracer) = &self.tracer {
            tracer.finished(end);
        }
    }
}

/// The observers for one session whose client is known (`--auth-token-file` names,
/// with `--session-root-template`): its records name the client.
struct SessionObservers {
    observers: Arc<Observers>,
    principal: String,
}

impl CallObserver for SessionObservers {
    fn admit(&self, call: &CallStart<'_>) -> Result<(), ObserverRefusal> {
        self.observers.admit(call)
    }

    fn finished(&self, end: &CallEnd<'_>) {
        self.observers.finished_as(end, Some(&self.principal));
    }

    fn watch(&self, call: &CallStart<'_>) -> CallWatch {
        self.observers.watch(call)
    }
}

/// Installs the process's observers on a session's `registry`, naming `principal` in
/// its records when known.
pub(crate) fn install_for(registry: &Registry, principal: Option<&str>) {
    let (Some(observers), Some(principal)) = (OBSERVERS.get(), principal) else {
        install(registry);
        return;
    };
    let observer: Arc<dyn CallObserver> = Arc::new(SessionObservers {
        observers: Arc::clone(observers),
        principal: principal.to_owned(),
    });
    let _ = registry.set_observer(observer);
}

static OBSERVERS: OnceLock<Arc<Observers>> = OnceLock::new();

/// Sets the process's observers (once, at start); nothing when both are off.
pub(crate) fn set(observers: Observers) {
    if observers.audit.is_some() || observers.metrics.is_some() || observers.tracer.is_some() {
        let _ = OBSERVERS.set(Arc::new(observers));
    }
}

/// The process's observers, if any.
pub(crate) fn get() -> Option<&'static Arc<Observers>> {
    OBSERVERS.get()
}

/// Installs the process's observers on `registry`, if any.
pub(crate) fn install(registry: &Registry) {
    if let Some(observers) = OBSERVERS.get() {
        let observer: Arc<dyn CallObserver> = Arc::clone(observers) as Arc<dyn CallObserver>;
        let _ = registry.set_observer(observer);
    }
}

/// Opens `--audit-log`, binds `--metrics` (serving it on a task), starts the trace
/// exporter (`--otlp-endpoint`, `OTEL_*`; calls reach the host over `transport`, `pipe`
/// or `tcp`), and sets the process's observers. Call before building the registries.
///
/// # Errors
/// When the audit log cannot be opened or is inside one of `roots` (where the file tools
/// reach), the metrics address is not loopback (without
/// `--metrics-public`) or cannot be bound, or the trace settings are wrong.
pub(crate) async fn start(
    args: &crate::args::observe::ObserveArgs,
    roots: &[std::path::PathBuf],
    transport: &'static str,
) -> anyhow::Result<()> {
    if args.no_trace_propagation {
        toolhost_plugin::http_policy::set_trace_propagation(false);
    }
    let tracer = match crate::trace::TraceConfig::from_env(
        args.otlp_endpoint.as_deref(),
        |name| std::env::var(name).ok(),
        transport,
    )
    .map_err(anyhow::Error::msg)?
    {
        Some(config) => {
            tracing::info!(collector = %config.authority, path = %config.path, "exporting traces over OTLP/HTTP");
            Some(crate::trace::Tracer::start(
                config,
                crate::trace::QUEUE_SPANS,
            )?)
        }
        None => None,
    };
    let audit = match &args.audit_log {
        Some(path) => {
            crate::audit::check_outside(path, roots)?;
            Some(AuditLog::open(
                path,
                args.audit_log_max_bytes,
                args.audit_log_keep,
                args.audit_arguments,
            )?)
        }
        None => None,
    };
    let metrics = match args.metrics {
        Some(addr) => {
            if !crate::metrics::is_loopback(&addr) && !args.metrics_public {
                anyhow::bail!("--metrics {addr} is not a loopback address; the metrics name the tools and count the calls: use 127.0.0.1:PORT, or add --metrics-public to expose them on purpose");
            }
            let listener = crate::metrics::bind(addr).await.map_err(|err| {
                anyhow::anyhow!("--metrics {addr}: cannot listen there ({err}); give a free port")
            })?;
            let bound = listener.local_addr().unwrap_or(addr);
            tracing::info!(addr = %bound, "serving metrics at http://{bound}/metrics");
            let metrics = Arc::new(Metrics::default());
            tokio::spawn(crate::metrics::serve(listener, Arc::clone(&metrics)));
            Some(metrics)
        }
        None => None,
    };
    if let (Some(metrics), Some(tracer)) = (&metrics, &tracer) {
        metrics.count_dropped_spans(tracer.dropped_counter());
    }
    set(Observers {
        audit,
        metrics,
        tracer,
    });
    Ok(())
}

/// Installs the observers on a toolset's `registry`, and [`note_plugins`] of its
/// plugins' load `report`.
pub(crate) fn install_toolset(
    registry: &toolhost::registry::Registry,
    report: Option<&toolhost_plugin::LoadReport>,
) {
    install(registry);
    note_plugins(report);
}

/// Tells the observers of a `--watch` event: counts it, and records a new version's
/// file and SHA-256 for its tools.
pub(crate) fn watch_event(event: &toolhost_plugin::watch::WatchEvent) {
    use toolhost_plugin::watch::WatchEvent;
    let Some(observers) = get() else { return };
    let plugin = match event {
        WatchEvent::Loaded(plugin) => {
            if let Some(metrics) = &observers.metrics {
                metrics.plugin_loaded(1);
                metrics.compiled(is_cache_hit(plugin));
            }
            plugin
        }
        WatchEvent::Reloaded { plugin, .. } => {
            if let Some(metrics) = &observers.metrics {
                metrics.plugin_reloaded();
                metrics.compiled(is_cache_hit(plugin));
            }
            plugin
        }
        WatchEvent::Failed { .. } => {
            if let Some(metrics) = &observers.metrics {
                metrics.plugin_failed(1);
            }
            return;
        }
        _ => return,
    };
    if let Some(audit) = &observers.audit {
        note_plugin(audit, plugin);
    }
}

/// Tells the observers which plugin each plugin tool comes from (file and SHA-256, read
/// now) and how loading went.
pub(crate) fn note_plugins(report: Option<&toolhost_plugin::LoadReport>) {
    let (Some(observers), Some(report)) = (get(), report) else {
        return;
    };
    if let Some(metrics) = &observers.metrics {
        metrics.plugin_loaded(report.loaded.len() as u64);
        metrics.plugin_failed(report.failed.len() as u64);
        for plugin in &report.loaded {
            metrics.compiled(is_cache_hit(plugin));
        }
    }
    if let Some(audit) = &observers.audit {
        for plugin in &report.loaded {
            note_plugin(audit, plugin);
        }
    }
}

/// Records `plugin`'s file and SHA-256 (read now) for its tools.
fn note_plugin(audit: &AuditLog, plugin: &toolhost_plugin::LoadedPlugin) {
    let sha256 = match crate::audit::file_sha256(&plugin.path) {
        Ok(sha256) => sha256,
        Err(err) => {
            tracing::warn!(path = %plugin.path.display(), %err, "cannot read the plugin to record its SHA-256 in the audit log");
            return;
        }
    };
    for tool in &plugin.tools {
        audit.set_plugin(
            tool,
            crate::audit::PluginRef {
                file: plugin.path.display().to_string(),
                sha256: sha256.clone(),
            },
        );
    }
}

/// Whether `plugin`'s component came from the compile cache.
fn is_cache_hit(plugin: &toolhost_plugin::LoadedPlugin) -> bool {
    matches!(
        plugin.compile,
        toolhost_plugin::cache::CompileSource::CacheHit(_)
    )
}

/// How long the host's exit waits for the audit writer to write what is queued.
const AUDIT_EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// At the host's exit: writes the queued audit records (waiting up to 10 seconds), and
/// gives the trace exporter up to 2 seconds to send what is queued.
pub(crate) fn flush() {
    if let Some(audit) = get().and_then(|observers| observers.audit.as_ref()) {
        if !audit.flush(AUDIT_EXIT_WAIT) {
            tracing::error!("the audit log's writer did not write the queued records within {} s of the exit: they are lost", AUDIT_EXIT_WAIT.as_secs());
        }
    }
    if let Some(tracer) = get().and_then(|observers| observers.tracer.as_ref()) {
        tracer.flush(std::time::Duration::from_secs(2));
        tracing::info!(
            exported = tracer.exported(),
            dropped = tracer.dropped(),
            failed_exports = tracer.failures(),
            "trace export at exit"
        );
    }
}

/// What counts the plugins' outgoing HTTP requests (the metrics, when on), for the
/// plugins' HTTP policy.
pub(crate) fn http_observer() -> Option<Arc<dyn toolhost_plugin::http_policy::HttpObserver>> {
    let metrics = get()?.metrics.as_ref()?;
    Some(Arc::clone(metrics) as Arc<dyn toolhost_plugin::http_policy::HttpObserver>)
}

/// Lets the metrics read the server's own figures at each scrape.
pub(crate) fn watch_server(
    figures: impl Fn() -> crate::metrics::ServerGauges + Send + Sync + 'static,
) {
    if let Some(metrics) = get().and_then(|observers| observers.metrics.as_ref()) {
        metrics.set_server(crate::metrics::ServerFigures(Box::new(figures)));
    }
}
