//! The flags that let an operator see and account for every call: the audit log, the
//! metrics listener and the trace export, shared by `host run` and `host serve`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use clap::Args;

use super::values::{self, parse_size};

/// The audit log and the metrics listener.
#[derive(Debug, Clone, Args)]
pub struct ObserveArgs {
    /// Append one JSON line per tool call, and per call refused before it ran, to FILE
    /// (time, session, tool, plugin file and SHA-256, arguments' SHA-256 and size,
    /// outcome, duration, bytes out). While FILE cannot be written (disk full, read
    /// only), calls are refused rather than run unaudited; they run again once it can.
    /// FILE must be outside --root and not a symbolic link. See docs/operations.md.
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Record the arguments themselves too (by default only their SHA-256 and size:
    /// arguments may hold what the user typed).
    #[arg(long, requires = "audit_log")]
    pub audit_arguments: bool,
    /// Rotate the audit log before a record would take it past SIZE: FILE becomes
    /// FILE.1, FILE.1 becomes FILE.2, and so on. Default: never rotate.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, requires = "audit_log")]
    pub audit_log_max_bytes: Option<u64>,
    /// How many rotated audit files to keep (FILE.1 to FILE.N; the oldest is removed).
    #[arg(long, value_name = "N", default_value_t = crate::audit::DEFAULT_KEEP, value_parser = parse_keep, requires = "audit_log_max_bytes")]
    pub audit_log_keep: usize,
    /// Serve Prometheus metrics (text format) at http://ADDR/metrics, on a listener of
    /// their own. ADDR is HOST:PORT, or a PORT alone for 127.0.0.1:PORT; it must be a
    /// loopback address unless --metrics-public.
    #[arg(long, value_name = "ADDR", value_parser = parse_metrics_addr)]
    pub metrics: Option<SocketAddr>,
    /// Allow --metrics on a non-loopback address (the metrics name the tools and count
    /// the calls: expose them only to a network you trust).
    #[arg(long, requires = "metrics")]
    pub metrics_public: bool,
    /// Export a trace span per tool call over OTLP/HTTP protobuf to the collector at URL
    /// (http://HOST:PORT; spans go to URL/v1/traces). Overrides
    /// OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; OTEL_SERVICE_NAME,
    /// OTEL_RESOURCE_ATTRIBUTES and OTEL_TRACES_SAMPLER apply. Off when neither is set.
    /// See docs/operations.md.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Do not add the calling client's W3C traceparent to a plugin's outgoing HTTP
    /// requests (by default a call whose client sent one passes it on, naming the
    /// request's own CLIENT span, so the servers a plugin reaches join the client's trace).
    #[arg(long)]
    pub no_trace_propagation: bool,
}

/// `--audit-log-keep`: 1 to 1000.
fn parse_keep(text: &str) -> Result<usize, String> {
    let keep = values::parse_positive_count(
        text,
        "; give how many rotated audit files to keep, e.g. 5",
        "0 would keep no rotated file; give at least 1 (default 5)",
    )?
    .get();
    if keep > crate::audit::MAX_KEEP {
        return Err(format!(
            "{keep} is more than {} rotated files; give at most {}",
            crate::audit::MAX_KEEP,
            crate::audit::MAX_KEEP
        ));
    }
    Ok(keep)
}

/// `--metrics`: `HOST:PORT` or a bare port on 127.0.0.1.
fn parse_metrics_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = text.trim().parse::<u16>() {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    text.trim().parse().map_err(|_| {
        format!("\"{text}\" is not an address; give HOST:PORT (e.g. 127.0.0.1:9464, [::1]:9464) or a port alone")
    })
}
