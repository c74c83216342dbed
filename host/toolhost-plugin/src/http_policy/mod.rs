//! Outbound HTTP of plugins: who may be reached ([`HostPattern`], [`HttpPolicy`]), which
//! addresses never are ([`forbidden_address`]), and how much ([`HttpLimits`]).
//!
//! A plugin sends HTTP through the standard `wasi:http/outgoing-handler`. Its manifest
//! asks for hosts, the operator allows hosts, and a request goes out only when both say
//! so:
//!
//! ```toml
//! # weather.toml
//! [grants]
//! http = ["api.weather.example", "*.example.org:8443", "http://localhost:8080"]
//! ```
//!
//! A pattern is `[scheme://]host[:port]`: the scheme is `https` unless `http://` is
//! written, the port that scheme's default unless given; `*.example.org` is any
//! sub-domain of `example.org` (not `example.org` itself), and `*` alone any host. The
//! operator allows patterns the same way ([`HttpPolicy::allow`], the CLI's
//! `--plugin-http`); a manifest pattern no operator pattern covers stops the plugin
//! from loading ([`PluginErrorKind::HttpDenied`](super::PluginErrorKind::HttpDenied)), naming
//! the host. Nothing is allowed by default.
//!
//! ```
//! use toolhost_plugin::http_policy::HostPattern;
//!
//! let operator: HostPattern = "*.example.org".parse()?;
//! let asked: HostPattern = "api.example.org".parse()?;
//! assert!(operator.covers(&asked));
//! assert!(!operator.covers(&"http://api.example.org".parse()?)); // another scheme
//! assert!(asked.matches("https", "API.example.org", 443));
//! assert!(!asked.matches("https", "api.example.org.evil.test", 443));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Sandbox
//! Every request, including each one a client sends to follow a redirect, is checked
//! against the plugin's patterns before anything is resolved or sent. The host then
//! resolves the name itself ([`HttpPolicy::resolver`]), refuses every address that is
//! loopback, private, link-local (the cloud metadata service at 169.254.169.254),
//! shared, multicast, broadcast, reserved or unspecified ([`forbidden_address`]; IPv4
//! inside IPv6 is unwrapped first) unless the operator allowed its network
//! ([`HttpPolicy::allow_nets`], `--plugin-http-allow-net`), and connects to one of the
//! addresses it checked: no second lookup, so a name cannot be rebound between the
//! check and the connection. TLS is rustls with the Mozilla roots (`webpki-roots`);
//! the certificate must match the host name. Each call may send
//! [`HttpLimits::max_requests`] requests, with bodies up to
//! [`HttpLimits::max_request_bytes`] and responses up to
//! [`HttpLimits::max_response_bytes`], and everything ends at the call's deadline.
//!
//! This file holds the operator's [`HttpPolicy`] and the resolver; host patterns are in
//! `pattern.rs`, forbidden addresses and allowed networks in `address.rs`, the per-call
//! limits in `limits.rs`, all re-exported here.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

pub use ipnet::IpNet;

mod address;
mod limits;
mod pattern;
#[cfg(test)]
mod tests;

pub use address::{forbidden_address, parse_allowed_net, unmap};
pub use limits::HttpLimits;
pub use pattern::{HostPattern, HostPatternError};

/// Whether a plugin's outgoing HTTP requests carry the calling client's trace context.
static TRACE_PROPAGATION: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Turns trace propagation on (the default) or off for every plugin of the process.
///
/// On, an outgoing request of a call whose client sent a W3C `traceparent` carries a
/// `traceparent` header naming the same trace and the call's own span
/// ([`CallContext::outgoing_trace_parent`](toolhost::registry::CallContext::outgoing_trace_parent)),
/// replacing any the plugin set; a call without trace context sends none of its own.
/// Off (`host run --no-trace-propagation`), requests go as the plugin made them: the
/// servers a plugin reaches do not learn the client's trace id.
pub fn set_trace_propagation(on: bool) {
    TRACE_PROPAGATION.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether [`set_trace_propagation`] left propagation on.
pub fn trace_propagation() -> bool {
    TRACE_PROPAGATION.load(std::sync::atomic::Ordering::Relaxed)
}

/// Looks up the addresses of a host name. The host's own lookups go through this, so a
/// test (or an embedder with its own DNS) can replace it.
pub trait Resolve: Send + Sync + 'static {
    /// The addresses of `host` (a DNS name, never an IP literal).
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;
}

/// The system's resolver (`getaddrinfo` on tokio's blocking pool).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
        let host = host.to_owned();
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addrs.map(|addr| addr.ip()).collect())
        })
    }
}

/// How a plugin's outgoing HTTP request ended, as told to an [`HttpObserver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpOutcome {
    /// The server answered with this status.
    Status(u16),
    /// Refused before any lookup or connection: outside the plugin's grant, or past its
    /// per-call request count or declared body size.
    Refused,
    /// No answer: the name did not resolve, every address was forbidden, the connection
    /// failed or timed out.
    Failed,
}

impl HttpOutcome {
    /// The class the host's metrics count it under: `1xx` to `5xx` (`other` for a status
    /// outside 100..=599), `refused`, `error`.
    ///
    /// ```
    /// use toolhost_plugin::http_policy::HttpOutcome;
    ///
    /// assert_eq!(HttpOutcome::Status(404).class(), "4xx");
    /// assert_eq!(HttpOutcome::Refused.class(), "refused");
    /// ```
    pub fn class(self) -> &'static str {
        match self {
            Self::Status(100..=199) => "1xx",
            Self::Status(200..=299) => "2xx",
            Self::Status(300..=399) => "3xx",
            Self::Status(400..=499) => "4xx",
            Self::Status(500..=599) => "5xx",
            Self::Status(_) => "other",
            Self::Refused => "refused",
            Self::Failed => "error",
        }
    }
}

/// Told of every outgoing HTTP request of every plugin (the CLI counts them in its
/// metrics). Called on the request's task when its answer's head arrived (or it failed):
/// keep it short, it must not block.
pub trait HttpObserver: Send + Sync + 'static {
    /// `plugin` (its name) made a request that ended as `outcome`.
    fn request(&self, plugin: &str, outcome: HttpOutcome);
}

/// The operator's HTTP policy for plugins: the hosts any plugin may be granted, the
/// private networks plugins may reach, and the resolver. The default allows nothing.
///
/// ```
/// use toolhost_plugin::HttpPolicy;
///
/// let policy = HttpPolicy::default();
/// assert!(policy.allow().is_empty() && policy.allow_nets().is_empty());
///
/// let policy = policy.with_allow(vec!["api.example.org".parse()?]);
/// assert_eq!(policy.allow()[0].to_string(), "api.example.org");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct HttpPolicy {
    /// Hosts a manifest may ask for (the CLI's `--plugin-http`). A manifest asking for a
    /// pattern none of these covers is refused at load.
    ///
    /// # Sandbox
    /// Each entry lets plugin code send requests, with whatever it read or was given,
    /// to those hosts.
    pub(crate) allow: Vec<HostPattern>,
    /// Networks plugins may reach although [`forbidden_address`] refuses them (the CLI's
    /// `--plugin-http-allow-net`), e.g. `127.0.0.1/32` for a local service.
    ///
    /// # Sandbox
    /// Each entry opens that network to every plugin whose host patterns resolve there:
    /// a cloud metadata service, an admin interface, a database.
    pub(crate) allow_nets: Vec<IpNet>,
    /// How host names are resolved ([`SystemResolver`] by default).
    pub(crate) resolver: Arc<dyn Resolve>,
    /// Told of each request and how it ended (none by default).
    pub(crate) observer: Option<Arc<dyn HttpObserver>>,
}

impl Default for HttpPolicy {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            allow_nets: Vec::new(),
            resolver: Arc::new(SystemResolver),
            observer: None,
        }
    }
}

impl HttpPolicy {
    /// The hosts a manifest may ask for ([`with_allow`](Self::with_allow)).
    pub fn allow(&self) -> &[HostPattern] {
        &self.allow
    }

    /// Hosts a manifest may ask for (the CLI's `--plugin-http`). Default: none. A manifest
    /// asking for a pattern none of these covers is refused at load
    /// ([`PluginErrorKind::HttpDenied`](crate::PluginErrorKind::HttpDenied)).
    ///
    /// # Sandbox
    /// Each entry lets plugin code send requests, with whatever it read or was given, to
    /// those hosts.
    #[must_use]
    pub fn with_allow(mut self, allow: Vec<HostPattern>) -> Self {
        self.allow = allow;
        self
    }

    /// Networks plugins may reach although they are forbidden by default ([`with_allow_nets`](Self::with_allow_nets)).
    pub fn allow_nets(&self) -> &[IpNet] {
        &self.allow_nets
    }

    /// Networks plugins may reach although [`forbidden_address`] refuses them (the CLI's
    /// `--plugin-http-allow-net`), e.g. `127.0.0.1/32` for a local service. Default: none.
    ///
    /// # Sandbox
    /// Each entry opens that network to every plugin whose host patterns resolve there: a
    /// cloud metadata service, an admin interface, a database.
    #[must_use]
    pub fn with_allow_nets(mut self, allow_nets: Vec<IpNet>) -> Self {
        self.allow_nets = allow_nets;
        self
    }

    /// How host names are resolved ([`with_resolver`](Self::with_resolver)).
    pub fn resolver(&self) -> &Arc<dyn Resolve> {
        &self.resolver
    }

    /// How host names are resolved. Default: [`SystemResolver`].
    #[must_use]
    pub fn with_resolver(mut self, resolver: Arc<dyn Resolve>) -> Self {
        self.resolver = resolver;
        self
    }

    /// Tells `observer` of every plugin request and how it ended. Default: none.
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn HttpObserver>) -> Self {
        self.observer = Some(observer);
        self
    }
}

impl fmt::Debug for HttpPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let allow: Vec<String> = self.allow.iter().map(ToString::to_string).collect();
        f.debug_struct("HttpPolicy")
            .field("allow", &allow)
            .field("allow_nets", &self.allow_nets)
            .finish_non_exhaustive()
    }
}

impl HttpPolicy {
    /// The first of `asked` that no allowed pattern covers.
    pub fn first_denied<'a>(&self, asked: &'a [HostPattern]) -> Option<&'a HostPattern> {
        asked
            .iter()
            .find(|pattern| !self.allow.iter().any(|allowed| allowed.covers(pattern)))
    }

    /// Whether `ip` may be connected to: not [forbidden](forbidden_address), or in one
    /// of [`HttpPolicy::allow_nets`].
    pub fn address_allowed(&self, ip: IpAddr) -> bool {
        let ip = unmap(ip);
        forbidden_address(ip).is_none() || self.allow_nets.iter().any(|net| net.contains(&ip))
    }
}
