//! [`HostPattern`]: `[scheme://]host[:port]` with `*.domain` wildcards, as a manifest asks
//! for hosts and the operator allows them: parsing (with a [`HostPatternError`] saying what
//! to write), matching a request and one pattern covering another.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// Longest host name in a pattern or request (DNS's limit).
const MAX_HOST_BYTES: usize = 253;

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
