//! `wasi:http/outgoing-handler`: wasmtime-wasi-http implements the interface; this file
//! is its [`WasiHttpHooks::send_request`], which checks and sends each request under the
//! plugin's [`HttpGrant`] (see [`crate::http_policy`] for the rules).
//!
//! Per request: count it against [`HttpLimits::max_requests`]; match its scheme, host
//! and port against the grant's patterns (before any lookup); resolve the name through
//! the policy's resolver; keep the addresses [`HttpPolicy::address_allowed`] accepts;
//! connect to one of those (never to a fresh lookup); TLS for `https` (rustls, Mozilla
//! roots); send the body through a byte cap; refuse a response whose `content-length` is
//! over the cap and stop reading one that grows past it. Connect and handshake are
//! bounded by [`HttpLimits::connect_timeout`], everything by the call's deadline.
//!
//! A refusal is the `wasi:http` error code a client expects (`HTTP-request-denied`,
//! `destination-IP-prohibited`, `connection-limit-reached`, `HTTP-request-body-size`,
//! `HTTP-response-body-size`, `connection-timeout`, `DNS-error`), and one `warn` line in
//! the host log (target `plugin`, within the plugin's log rate) saying which rule
//! refused which `scheme://host:port`. Paths and queries are never logged: they may
//! carry secrets.
//!
//! This file holds the grant, the hooks and the checks made before anything is resolved
//! or sent; resolving, connecting, TLS and the capped bodies are in `transport.rs`.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::super::http_policy::{HostPattern, HttpLimits, HttpOutcome, HttpPolicy};
use super::super::plugin_config::Redactor;
use super::log::clean;
use super::quota::PluginMeter;
use transport::send;

#[cfg(test)]
mod tests;
mod transport;

/// What a plugin may reach over HTTP: its manifest's patterns (each covered by the
/// operator's), the operator's policy (allowed private networks, resolver), its limits.
#[derive(Debug, Clone, Default)]
pub(crate) struct HttpGrant {
    /// The manifest's `[grants] http` patterns; empty denies every request.
    pub allow: Vec<HostPattern>,
    /// The operator's policy.
    pub policy: HttpPolicy,
    /// The per-call limits.
    pub limits: HttpLimits,
}

/// The `wasi:http` hooks of one store: the grant, and what the current call has sent.
pub(crate) struct HttpHooks {
    plugin: Arc<str>,
    tool: String,
    grant: Arc<HttpGrant>,
    meter: Arc<PluginMeter>,
    redactor: Arc<Redactor>,
    requests: u32,
    deadline: Option<Instant>,
    /// The `traceparent` the current call's requests carry, if any.
    traceparent: Option<toolhost::registry::TraceParent>,
    /// What the current call's requests are counted against beyond its grant (a
    /// server's per-principal quota), if anything.
    gate: Option<toolhost::registry::OutgoingGate>,
    /// Where the current call's requests are recorded, when someone watches.
    record: Option<Arc<toolhost::registry::CallRecord>>,
}

/// A request being recorded ([`toolhost::registry::CallRecord::http`]): made only when
/// the call has a record.
struct Recording {
    record: Arc<toolhost::registry::CallRecord>,
    start: std::time::Duration,
    /// The method, secrets redacted (an extension method is any token the plugin chose).
    method: String,
    /// The URL's path, secrets redacted (never its query).
    path: String,
    /// The plugin's secrets, for the host name (a wildcard grant lets a plugin put one
    /// in a subdomain).
    redactor: Arc<Redactor>,
    /// The id of the request's CLIENT span, when its `traceparent` named it.
    span_id: Option<[u8; 8]>,
}

impl Recording {
    /// Records the request to `target` with `status` (none: it got no answer); the
    /// step's index, for the response body's byte count.
    fn done(&self, target: &Target, status: Option<u16>) -> Option<usize> {
        let scheme = if target.https { "https" } else { "http" };
        let default_port = if target.https { 443 } else { 80 };
        let host = self.redactor.redact(&target.host);
        let url = if target.port == default_port {
            format!("{scheme}://{host}{}", self.path)
        } else {
            format!("{scheme}://{host}:{}{}", target.port, self.path)
        };
        let index = self
            .record
            .http(&self.method, &host, target.port, &url, status, self.start);
        if let (Some(index), Some(span_id)) = (index, self.span_id) {
            self.record.http_span(index, span_id);
        }
        index
    }

    /// The record, for the response body to count its bytes on.
    fn record(&self) -> &Arc<toolhost::registry::CallRecord> {
        &self.record
    }
}

/// Where a checked request goes.
struct Target {
    https: bool,
    host: String,
    port: u16,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}:{}", clean(&self.host, 300), self.port)
    }
}

/// Type of the response future [`WasiHttpHooks::send_request`] returns.
type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), Error>> + Send>,
                ),
                Error,
            >,
        > + Send,
>;

impl HttpHooks {
    /// Hooks for `plugin` under `grant`, logging within `meter`'s rate with the
    /// plugin's secrets replaced by `redactor` (a plugin could put one in a host name).
    pub(crate) fn new(
        plugin: Arc<str>,
        grant: Arc<HttpGrant>,
        meter: Arc<PluginMeter>,
        redactor: Arc<Redactor>,
    ) -> Self {
        Self {
            plugin,
            tool: String::new(),
            grant,
            meter,
            redactor,
            requests: 0,
            deadline: None,
            traceparent: None,
            gate: None,
            record: None,
        }
    }

    /// Resets the per-call count for a call of `tool` ending at `deadline`, whose
    /// requests carry `traceparent` (when trace propagation is on) and are recorded in
    /// `record` (when the call has one).
    pub(crate) fn begin_call(
        &mut self,
        tool: &str,
        deadline: Instant,
        traceparent: Option<toolhost::registry::TraceParent>,
        record: Option<Arc<toolhost::registry::CallRecord>>,
    ) {
        tool.clone_into(&mut self.tool);
        self.requests = 0;
        self.deadline = Some(deadline);
        self.traceparent = traceparent.filter(|_| crate::http_policy::trace_propagation());
        self.record = record;
    }

    /// Lets go of the ended call's record (an idle instance keeps nothing of a call).
    pub(crate) fn end_call(&mut self) {
        self.record = None;
    }

    /// Counts the current call's requests against `gate` too (set per call: `None`
    /// for a call without one).
    pub(crate) fn set_gate(&mut self, gate: Option<toolhost::registry::OutgoingGate>) {
        self.gate = gate;
    }

    /// What a refusal of the current call is logged with.
    fn log(&self) -> LogCtx {
        (
            Arc::clone(&self.plugin),
            self.tool.clone(),
            Arc::clone(&self.meter),
            Arc::clone(&self.redactor),
        )
    }

    /// Logs a refusal (within the plugin's log rate) and returns its error.
    fn refuse(&self, target: &str, why: &str, error: Error) -> Error {
        refused(&self.log(), target, why);
        error
    }

    /// The checks made before anything is resolved or sent: the count, the URI's
    /// form, the allow-list, the declared body size.
    fn check(&mut self, request: &http::Request<WasiBody>) -> Result<Target, Error> {
        self.requests = self.requests.saturating_add(1);
        let uri = request.uri();
        let shown = || {
            format!(
                "{}://{}",
                uri.scheme_str().unwrap_or("?"),
                clean(uri.authority().map_or("", |a| a.as_str()), 300)
            )
        };
        let max = self.grant.limits.max_requests;
        if self.requests > max {
            // Logged once per call, not once per refused request.
            if self.requests == max.saturating_add(1) {
                let why = format!("the plugin's limit of {max} HTTP requests per call (max_http_requests) is reached; later requests of this call are refused too");
                refused(&self.log(), &shown(), &why);
            }
            return Err(Error::ConnectionLimitReached);
        }
        if let Some(gate) = &self.gate {
            if let Err(why) = gate.admit() {
                return Err(self.refuse(&shown(), &why, Error::InternalError(Some(why.clone()))));
            }
        }
        let Some(authority) = uri.authority() else {
            return Err(self.refuse(
                &shown(),
                "the URL has no host",
                Error::HttpRequestUriInvalid,
            ));
        };
        if authority.as_str().contains('@') {
            return Err(self.refuse(
                &shown(),
                "the URL carries a user name or password (give credentials in a header)",
                Error::HttpRequestUriInvalid,
            ));
        }
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(self.refuse(
                    &shown(),
                    "only http and https are supported",
                    Error::HttpProtocolError,
                ))
            }
        };
        let host = authority.host().to_owned();
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let target = Target { https, host, port };
        let scheme = if https { "https" } else { "http" };
        if !self
            .grant
            .allow
            .iter()
            .any(|pattern| pattern.matches(scheme, &target.host, port))
        {
            let why = if self.grant.allow.is_empty() {
                "the plugin has no HTTP grant ([grants] http in its manifest)".to_owned()
            } else {
                let allowed: Vec<String> =
                    self.grant.allow.iter().map(ToString::to_string).collect();
                format!("not in the plugin's HTTP grant [{}]", allowed.join(", "))
            };
            return Err(self.refuse(&target.to_string(), &why, Error::HttpRequestDenied));
        }
        let limit = self.grant.limits.max_request_bytes;
        if let Some(length) = content_length(request.headers()) {
            if length > limit {
                let why = format!("its body is {length} bytes, over the plugin's limit of {limit} (max_http_request_bytes)");
                return Err(self.refuse(
                    &target.to_string(),
                    &why,
                    Error::HttpRequestBodySize(Some(limit)),
                ));
            }
        }
        Ok(target)
    }
}

/// Logs one refused request (within the plugin's log rate).
/// What a refusal is logged with: plugin, tool, the plugin's log rate, its secrets.
type LogCtx = (Arc<str>, String, Arc<PluginMeter>, Arc<Redactor>);

/// Logs that a request to `target` was refused because of `why`, within the plugin's
/// log rate, with its secrets redacted (the host name comes from the plugin).
fn refused((plugin, tool, meter, redactor): &LogCtx, target: &str, why: &str) {
    if meter.admit_log(tool) {
        let target = redactor.redact(target);
        let why = redactor.redact(why);
        tracing::warn!(target: "plugin", plugin = &**plugin, tool = tool.as_str(), "HTTP request to {target} refused: {why}");
    }
}

fn content_length(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

impl WasiHttpHooks for HttpHooks {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> SendFuture {
        // The request's own CLIENT span (W3C: the server behind it takes that span as
        // its parent), a child of the call's span numbered by the call's requests.
        let client_span = self
            .traceparent
            .map(|parent| parent.child(u64::from(self.requests)));
        if let Some(span) = client_span {
            // Ours replaces any the plugin set: the trace is the client's, not the plugin's.
            if let Ok(value) = http::HeaderValue::from_str(&span.to_string()) {
                request.headers_mut().insert("traceparent", value);
            }
            request.headers_mut().remove("tracestate");
        }
        let checked = self.check(&request);
        // Counted across processes (a quota shared through Redis) once the local checks
        // passed: awaited below, before anything is resolved or sent.
        let shared = match (&self.gate, &checked) {
            (Some(gate), Ok(_)) => gate.admit_shared(),
            _ => None,
        };
        // Recorded only once the checks passed (a refused request reached no host).
        let recording = match (&self.record, &checked) {
            (Some(record), Ok(_)) => Some((
                Arc::clone(record),
                self.redactor.redact(request.method().as_str()).into_owned(),
                self.redactor.redact(request.uri().path()).into_owned(),
            )),
            _ => None,
        };
        let redactor = Arc::clone(&self.redactor);
        let grant = Arc::clone(&self.grant);
        let deadline = self.deadline;
        let log = self.log();
        let plugin = Arc::clone(&self.plugin);
        Box::new(async move {
            let observer = grant.policy.observer.as_ref();
            let refused_err = |err| {
                if let Some(observer) = observer {
                    observer.request(&plugin, HttpOutcome::Refused);
                }
                Err(err)
            };
            let target = match checked {
                Ok(target) => target,
                Err(err) => return refused_err(err),
            };
            if let Some(shared) = shared {
                if let Err(why) = shared.await {
                    refused(&log, &target.to_string(), &why);
                    return refused_err(Error::InternalError(Some(why)));
                }
            }
            let recording = recording.map(|(record, method, path)| Recording {
                start: record.now(),
                record,
                method,
                path,
                redactor,
                span_id: client_span.map(|span| span.span_id),
            });
            let sent = send(
                &grant,
                &target,
                request,
                options,
                deadline,
                log,
                recording.as_ref(),
            )
            .await;
            if let (Some(recording), Err(_)) = (&recording, &sent) {
                recording.done(&target, None);
            }
            if let Some(observer) = observer {
                let outcome = match &sent {
                    Ok((response, _)) => HttpOutcome::Status(response.status().as_u16()),
                    Err(_) => HttpOutcome::Failed,
                };
                observer.request(&plugin, outcome);
            }
            sent
        })
    }
}
