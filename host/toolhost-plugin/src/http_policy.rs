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
//! use toolhost_plugin::HostPattern;
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

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

pub use ipnet::IpNet;

use super::limits::LimitValue;

/// Default of [`HttpLimits::max_requests`]: 16 requests per call, enough for a few
/// redirects and a paginated API; more is a crawler, not a tool call.
pub const DEFAULT_MAX_HTTP_REQUESTS: u32 = 16;
/// Default of [`HttpLimits::max_request_bytes`]: 1 MiB of request body.
pub const DEFAULT_MAX_HTTP_REQUEST_BYTES: u64 = 1024 * 1024;
/// Default of [`HttpLimits::max_response_bytes`]: 8 MiB of response body, an eighth of
/// the default plugin memory (the body is copied into it).
pub const DEFAULT_MAX_HTTP_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;
/// Default of [`HttpLimits::connect_timeout`]: 5 s to resolve, connect and finish the
/// TLS handshake (the call's own deadline applies too, and usually first).
pub const DEFAULT_HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest host name in a pattern or request (DNS's limit).
const MAX_HOST_BYTES: usize = 253;

/// What one plugin may do over HTTP per call. Part of
/// [`PluginLimits`](super::PluginLimits); a manifest may lower each in `[limits]`
/// (`max_http_requests`, `max_http_request_bytes`, `max_http_response_bytes`,
/// `http_connect_timeout_ms`), not raise it above the host's maximum.
///
/// ```
/// use toolhost_plugin::HttpLimits;
///
/// let limits = HttpLimits::default();
/// assert_eq!(limits.max_requests, 16);
/// assert_eq!(limits.max_response_bytes, 8 * 1024 * 1024);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpLimits {
    /// Requests per call; one more gets `connection-limit-reached`.
    pub max_requests: u32,
    /// Bytes of one request's body; more gets `HTTP-request-body-size`.
    pub max_request_bytes: u64,
    /// Bytes of one response's body; a larger `content-length` gets
    /// `HTTP-response-body-size`, and reading past the cap fails.
    pub max_response_bytes: u64,
    /// Time to resolve, connect and handshake (also bounded by the call's deadline).
    pub connect_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_requests: DEFAULT_MAX_HTTP_REQUESTS,
            max_request_bytes: DEFAULT_MAX_HTTP_REQUEST_BYTES,
            max_response_bytes: DEFAULT_MAX_HTTP_RESPONSE_BYTES,
            connect_timeout: DEFAULT_HTTP_CONNECT_TIMEOUT,
        }
    }
}

impl HttpLimits {
    /// No limit worth the name.
    ///
    /// # Sandbox
    /// Benchmarks and trusted plugins only: a plugin may then send requests without end
    /// within its call's deadline.
    pub fn unlimited() -> Self {
        Self {
            max_requests: u32::MAX,
            max_request_bytes: u64::MAX,
            max_response_bytes: u64::MAX,
            connect_timeout: Duration::from_secs(24 * 60 * 60),
        }
    }

    /// The first limit of `self` above the same limit of `max`, as
    /// `(manifest key, asked, max)`.
    pub(crate) fn first_above(
        &self,
        max: &HttpLimits,
    ) -> Option<(&'static str, LimitValue, LimitValue)> {
        if self.max_requests > max.max_requests {
            Some((
                "max_http_requests",
                LimitValue::Count(u64::from(self.max_requests)),
                LimitValue::Count(u64::from(max.max_requests)),
            ))
        } else if self.max_request_bytes > max.max_request_bytes {
            Some((
                "max_http_request_bytes",
                LimitValue::Bytes(self.max_request_bytes),
                LimitValue::Bytes(max.max_request_bytes),
            ))
        } else if self.max_response_bytes > max.max_response_bytes {
            Some((
                "max_http_response_bytes",
                LimitValue::Bytes(self.max_response_bytes),
                LimitValue::Bytes(max.max_response_bytes),
            ))
        } else if self.connect_timeout > max.connect_timeout {
            Some((
                "http_connect_timeout_ms",
                LimitValue::Duration(self.connect_timeout),
                LimitValue::Duration(max.connect_timeout),
            ))
        } else {
            None
        }
    }
}

/// Why a host pattern is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{pattern}\" is not a host pattern: {reason}; write [http://]host[:port], e.g. api.github.com, *.example.org:8443 or http://localhost:8080")]
pub struct HostPatternError {
    /// The pattern as given (escaped).
    pub pattern: String,
    /// What is wrong.
    pub reason: String,
}

/// Which hosts a pattern matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum HostMatch {
    /// Any host (`*`).
    Any,
    /// Exactly this host (lower-case, no trailing dot; an IP literal in its canonical
    /// form, IPv6 without brackets).
    Exact(String),
    /// Any sub-domain of this domain (`*.example.org` stores `example.org`).
    SubdomainOf(String),
}

/// A `[scheme://]host[:port]` pattern of an HTTP grant: https unless `http://` is
/// written, the scheme's port unless given, `*.example.org` for any sub-domain of
/// `example.org` (not `example.org` itself), `*` alone for any host. Parsed with
/// [`str::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPattern {
    https: bool,
    host: HostMatch,
    port: u16,
}

impl HostPattern {
    /// Whether every request this pattern matches is matched by `self` too (an operator
    /// pattern covering a manifest's).
    pub fn covers(&self, other: &HostPattern) -> bool {
        if self.https != other.https || self.port != other.port {
            return false;
        }
        match (&self.host, &other.host) {
            (HostMatch::Any, _) => true,
            (_, HostMatch::Any) | (HostMatch::Exact(_), HostMatch::SubdomainOf(_)) => false,
            (HostMatch::Exact(a), HostMatch::Exact(b)) => a == b,
            (HostMatch::SubdomainOf(domain), HostMatch::Exact(host))
            | (HostMatch::SubdomainOf(domain), HostMatch::SubdomainOf(host)) => {
                is_subdomain(host, domain)
                    || (matches!(other.host, HostMatch::SubdomainOf(_)) && host == domain)
            }
        }
    }

    /// Whether a request to `scheme://host:port` matches (`host` as in the URL: any
    /// case, IPv6 with or without brackets, a trailing dot ignored).
    pub fn matches(&self, scheme: &str, host: &str, port: u16) -> bool {
        let https = match scheme.to_ascii_lowercase().as_str() {
            "https" => true,
            "http" => false,
            _ => return false,
        };
        if https != self.https || port != self.port {
            return false;
        }
        let Ok(host) = normalize_host(host) else {
            return false;
        };
        match &self.host {
            HostMatch::Any => true,
            HostMatch::Exact(exact) => *exact == host,
            HostMatch::SubdomainOf(domain) => is_subdomain(&host, domain),
        }
    }

    /// Whether the pattern is for plain `http`.
    pub fn is_plain_http(&self) -> bool {
        !self.https
    }
}

/// `host` is a strict sub-domain of `domain` (`a.b.example.org` of `example.org`); an IP
/// address is nobody's sub-domain.
fn is_subdomain(host: &str, domain: &str) -> bool {
    host.parse::<IpAddr>().is_err()
        && host.len() > domain.len() + 1
        && host.ends_with(domain)
        && host.as_bytes()[host.len() - domain.len() - 1] == b'.'
}

/// A host as written in a URL or pattern → its canonical form: lower-case, trailing dot
/// dropped, IP literals canonical (IPv6 without brackets). Refuses anything that is not
/// an ASCII DNS name or an IP literal.
fn normalize_host(host: &str) -> Result<String, String> {
    let inner = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = inner.parse::<IpAddr>() {
        return Ok(ip.to_string());
    }
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    if host.is_empty() || host.len() > MAX_HOST_BYTES {
        return Err("the host name is empty or longer than 253 characters".into());
    }
    if !host.is_ascii() {
        return Err("the host name is not ASCII; write an internationalised name in its xn-- (punycode) form".into());
    }
    for label in host.split('.') {
        if label.is_empty()
            || label.len() > 63
            || label.starts_with('-')
            || label.ends_with('-')
            || !label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!(
                "\"{}\" is not a valid host name label",
                label.escape_debug()
            ));
        }
    }
    Ok(host)
}

impl FromStr for HostPattern {
    type Err = HostPatternError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = |reason: &str| HostPatternError {
            pattern: text.escape_debug().to_string(),
            reason: reason.to_owned(),
        };
        let trimmed = text.trim();
        let (https, rest) = if let Some(rest) = trimmed.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = trimmed.strip_prefix("http://") {
            (false, rest)
        } else if trimmed.contains("://") {
            return Err(error("only the http and https schemes exist"));
        } else {
            (true, trimmed)
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#']) {
            return Err(error("give a host, not a URL with a path or query"));
        }
        if rest.contains('@') {
            return Err(error(
                "user names and passwords do not belong in a host pattern",
            ));
        }
        // host[:port], where an IPv6 host is in brackets.
        let (host, port) = if rest.starts_with('[') {
            match rest.find(']') {
                Some(end) => {
                    let (host, after) = rest.split_at(end + 1);
                    match after.strip_prefix(':') {
                        Some(port) => (host, Some(port)),
                        None if after.is_empty() => (host, None),
                        None => return Err(error("text after the IPv6 address")),
                    }
                }
                None => return Err(error("an IPv6 address needs its closing ]")),
            }
        } else if rest.matches(':').count() > 1 {
            return Err(error(
                "write an IPv6 address in brackets, e.g. [2001:db8::1]:443",
            ));
        } else {
            match rest.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            }
        };
        let port = match port {
            None => {
                if https {
                    443
                } else {
                    80
                }
            }
            Some(port) => match port.parse::<u16>() {
                Ok(port) if port > 0 => port,
                _ => return Err(error("the port is not a number from 1 to 65535")),
            },
        };
        let host = if host == "*" {
            HostMatch::Any
        } else if let Some(domain) = host.strip_prefix("*.") {
            let domain = normalize_host(domain).map_err(|reason| error(&reason))?;
            if domain.parse::<IpAddr>().is_ok() || !domain.contains('.') {
                return Err(error(
                    "a wildcard covers the sub-domains of a domain with at least two labels (*.example.org)",
                ));
            }
            HostMatch::SubdomainOf(domain)
        } else if host.contains('*') {
            return Err(error(
                "a wildcard may only be a whole leading label (*.example.org) or the whole host (*)",
            ));
        } else {
            HostMatch::Exact(normalize_host(host).map_err(|reason| error(&reason))?)
        };
        Ok(HostPattern { https, host, port })
    }
}

impl fmt::Display for HostPattern {
    /// The canonical spelling: `http://` only for plain HTTP, the port only when it is
    /// not the scheme's default.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.https {
            f.write_str("http://")?;
        }
        match &self.host {
            HostMatch::Any => f.write_str("*")?,
            HostMatch::Exact(host) if host.contains(':') => write!(f, "[{host}]")?,
            HostMatch::Exact(host) => f.write_str(host)?,
            HostMatch::SubdomainOf(domain) => write!(f, "*.{domain}")?,
        }
        let default = if self.https { 443 } else { 80 };
        if self.port != default {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

impl serde::Serialize for HostPattern {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Parses a network the operator allows plugins to reach although it is private:
/// `10.0.0.0/8`, `127.0.0.1` (one address), `fd00::/8`.
///
/// # Errors
/// A message saying what to give instead.
pub fn parse_allowed_net(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(IpNet::from(ip));
    }
    text.parse::<IpNet>().map(|net| net.trunc()).map_err(|_| {
        format!(
            "\"{}\" is not an IP address or network; give e.g. 127.0.0.1, 10.0.0.0/8 or fd00::/8",
            text.escape_debug()
        )
    })
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

/// The operator's HTTP policy for plugins: the hosts any plugin may be granted, the
/// private networks plugins may reach, and the resolver. The default allows nothing.
///
/// ```
/// use toolhost_plugin::HttpPolicy;
///
/// let policy = HttpPolicy::default();
/// assert!(policy.allow.is_empty() && policy.allow_nets.is_empty());
/// ```
#[derive(Clone)]
pub struct HttpPolicy {
    /// Hosts a manifest may ask for (the CLI's `--plugin-http`). A manifest asking for a
    /// pattern none of these covers is refused at load.
    ///
    /// # Sandbox
    /// Each entry lets plugin code send requests, with whatever it read or was given,
    /// to those hosts.
    pub allow: Vec<HostPattern>,
    /// Networks plugins may reach although [`forbidden_address`] refuses them (the CLI's
    /// `--plugin-http-allow-net`), e.g. `127.0.0.1/32` for a local service.
    ///
    /// # Sandbox
    /// Each entry opens that network to every plugin whose host patterns resolve there:
    /// a cloud metadata service, an admin interface, a database.
    pub allow_nets: Vec<IpNet>,
    /// How host names are resolved ([`SystemResolver`] by default).
    pub resolver: Arc<dyn Resolve>,
}

impl Default for HttpPolicy {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            allow_nets: Vec::new(),
            resolver: Arc::new(SystemResolver),
        }
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

/// IPv4 carried in IPv6 (`::ffff:a.b.c.d`, `::a.b.c.d`) as that IPv4 address; anything
/// else unchanged.
pub fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                // Deprecated IPv4-compatible ::a.b.c.d (not :: or ::1).
                if s[..6] == [0; 6] && (s[6] != 0 || s[7] > 1) {
                    IpAddr::V4(Ipv4Addr::new(
                        (s[6] >> 8) as u8,
                        s[6] as u8,
                        (s[7] >> 8) as u8,
                        s[7] as u8,
                    ))
                } else {
                    ip
                }
            }
        },
        v4 => v4,
    }
}

/// Why plugins may not connect to `ip` unless the operator allows its network; `None`
/// for an ordinary public address.
///
/// ```
/// use toolhost_plugin::forbidden_address;
///
/// assert_eq!(forbidden_address("169.254.169.254".parse()?), Some("link-local (cloud metadata)"));
/// assert_eq!(forbidden_address("::ffff:10.1.2.3".parse()?), Some("private"));
/// assert_eq!(forbidden_address("93.184.216.34".parse()?), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn forbidden_address(ip: IpAddr) -> Option<&'static str> {
    match unmap(ip) {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, ..) => "unspecified (\"this network\", 0.0.0.0/8)",
        (127, ..) => "loopback",
        (10, ..) | (192, 168, _) | (172, 16..=31, _) => "private",
        (169, 254, _) => "link-local (cloud metadata)",
        (100, 64..=127, _) => "shared address space (carrier-grade NAT, 100.64.0.0/10)",
        (192, 0, 0) => "IETF protocol assignments (192.0.0.0/24)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (198, 18..=19, _) => "benchmarking (198.18.0.0/15)",
        (224..=239, ..) => "multicast",
        (240..=255, ..) => "reserved or broadcast",
        _ => return None,
    })
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    Some(match s[0] {
        0xfc00..=0xfdff => "unique local (private, fc00::/7)",
        0xfe80..=0xfebf => "link-local",
        0xfec0..=0xfeff => "site-local (deprecated, fec0::/10)",
        0xff00..=0xffff => "multicast",
        // NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48) embed an IPv4 address.
        0x0064 if s[1] == 0xff9b => {
            let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
            return forbidden_v4(v4).map(|_| "NAT64 to a forbidden IPv4 address");
        }
        // 6to4 embeds an IPv4 address in 2002:AABB:CCDD::.
        0x2002 => {
            let v4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
            return forbidden_v4(v4).map(|_| "6to4 to a forbidden IPv4 address");
        }
        // Teredo (2001:0::/32) tunnels to an obfuscated IPv4 address; documentation
        // (2001:db8::/32).
        0x2001 if s[1] == 0 => "Teredo tunnel",
        0x2001 if s[1] == 0x0db8 => "documentation",
        // Discard-only 100::/64.
        0x0100 if s[1..4] == [0, 0, 0] => "discard-only",
        // Anything else under ::/8 (IPv4-compatible addresses were unwrapped above).
        0x0000 => "reserved (::/8)",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> HostPattern {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn patterns_parse_with_scheme_and_port_defaults() {
        assert_eq!(p("api.github.com").to_string(), "api.github.com");
        assert_eq!(
            p("https://API.GitHub.com.:443/").to_string(),
            "api.github.com"
        );
        assert_eq!(p("http://localhost").to_string(), "http://localhost");
        assert_eq!(p("*.example.org:8443").to_string(), "*.example.org:8443");
        assert_eq!(
            p("http://127.0.0.1:8080").to_string(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(p("[::1]:8443").to_string(), "[::1]:8443");
        assert_eq!(p("*").to_string(), "*");
        assert!(p("http://localhost").is_plain_http());
        assert!(!p("localhost").is_plain_http());
    }

    #[test]
    fn bad_patterns_say_why() {
        for (text, reason) in [
            ("ftp://x.org", "only the http and https schemes exist"),
            ("x.org/path", "give a host, not a URL with a path or query"),
            ("user:pw@x.org", "user names and passwords do not belong in a host pattern"),
            ("x.org:0", "the port is not a number from 1 to 65535"),
            ("x.org:http", "the port is not a number from 1 to 65535"),
            ("a*.x.org", "a wildcard may only be a whole leading label (*.example.org) or the whole host (*)"),
            ("*.org", "a wildcard covers the sub-domains of a domain with at least two labels (*.example.org)"),
            ("::1", "write an IPv6 address in brackets, e.g. [2001:db8::1]:443"),
            ("bücher.de", "the host name is not ASCII; write an internationalised name in its xn-- (punycode) form"),
            ("", "the host name is empty or longer than 253 characters"),
            ("a..b", "\"\" is not a valid host name label"),
        ] {
            let err = text.parse::<HostPattern>().unwrap_err();
            assert_eq!(err.reason, reason, "{text}");
        }
        let err = "x.org/a".parse::<HostPattern>().unwrap_err();
        assert_eq!(err.to_string(), "\"x.org/a\" is not a host pattern: give a host, not a URL with a path or query; write [http://]host[:port], e.g. api.github.com, *.example.org:8443 or http://localhost:8080");
    }

    #[test]
    fn requests_match_exactly_scheme_host_and_port() {
        let exact = p("api.github.com");
        assert!(exact.matches("https", "api.github.com", 443));
        assert!(exact.matches("HTTPS", "Api.GitHub.com.", 443));
        assert!(!exact.matches("http", "api.github.com", 443));
        assert!(!exact.matches("https", "api.github.com", 8443));
        assert!(!exact.matches("https", "evil.api.github.com", 443));
        assert!(!exact.matches("https", "api.github.com.evil.test", 443));
        let wild = p("*.example.org");
        assert!(wild.matches("https", "a.example.org", 443));
        assert!(wild.matches("https", "a.b.example.org", 443));
        assert!(!wild.matches("https", "example.org", 443));
        assert!(!wild.matches("https", "badexample.org", 443));
        let v6 = p("[::1]:8443");
        assert!(v6.matches("https", "[::1]", 8443));
        assert!(v6.matches("https", "0:0::1", 8443));
        assert!(p("*").matches("https", "anything.test", 443));
        assert!(!p("*").matches("http", "anything.test", 443));
    }

    #[test]
    fn operator_patterns_cover_manifest_patterns() {
        assert!(p("*.example.org").covers(&p("api.example.org")));
        assert!(p("*.example.org").covers(&p("*.api.example.org")));
        assert!(p("*.example.org").covers(&p("*.example.org")));
        assert!(!p("*.example.org").covers(&p("example.org")));
        assert!(!p("api.example.org").covers(&p("*.example.org")));
        assert!(!p("*.example.org").covers(&p("*")));
        assert!(p("*").covers(&p("*")));
        assert!(p("*").covers(&p("x.test")));
        assert!(!p("x.test").covers(&p("http://x.test")));
        assert!(!p("x.test").covers(&p("x.test:8443")));
        let policy = HttpPolicy {
            allow: vec![p("*.example.org"), p("http://127.0.0.1:8080")],
            ..HttpPolicy::default()
        };
        let asked = [
            p("a.example.org"),
            p("http://127.0.0.1:8080"),
            p("127.0.0.1:8080"),
        ];
        assert_eq!(policy.first_denied(&asked[..2]), None);
        assert_eq!(policy.first_denied(&asked), Some(&asked[2]));
    }

    #[test]
    fn private_and_special_addresses_are_forbidden() {
        for (ip, why) in [
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("10.0.0.1", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local (cloud metadata)"),
            (
                "100.100.100.200",
                "shared address space (carrier-grade NAT, 100.64.0.0/10)",
            ),
            ("0.0.0.0", "unspecified (\"this network\", 0.0.0.0/8)"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "reserved or broadcast"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fd00:ec2::254", "unique local (private, fc00::/7)"),
            ("fe80::1", "link-local"),
            ("ff02::1", "multicast"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "link-local (cloud metadata)"),
            ("::127.0.0.1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "NAT64 to a forbidden IPv4 address"),
            ("2002:7f00:1::", "6to4 to a forbidden IPv4 address"),
            ("2001:0:4136:e378::1", "Teredo tunnel"),
        ] {
            let parsed: IpAddr = ip.parse().unwrap();
            assert_eq!(forbidden_address(parsed), Some(why), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "1.1.1.1",
            "172.32.0.1",
            "2606:4700::1111",
            "64:ff9b::101:101",
        ] {
            assert_eq!(forbidden_address(ip.parse().unwrap()), None, "{ip}");
        }
    }

    #[test]
    fn allowed_nets_open_exactly_their_addresses() {
        let policy = HttpPolicy {
            allow_nets: vec![parse_allowed_net("127.0.0.1").unwrap()],
            ..HttpPolicy::default()
        };
        assert!(policy.address_allowed("127.0.0.1".parse().unwrap()));
        assert!(policy.address_allowed("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!policy.address_allowed("127.0.0.2".parse().unwrap()));
        assert!(!policy.address_allowed("10.0.0.1".parse().unwrap()));
        assert!(policy.address_allowed("1.1.1.1".parse().unwrap()));
        assert_eq!(
            parse_allowed_net("10.1.2.3/8").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(
            parse_allowed_net("localhost").unwrap_err(),
            "\"localhost\" is not an IP address or network; give e.g. 127.0.0.1, 10.0.0.0/8 or fd00::/8"
        );
    }
}
