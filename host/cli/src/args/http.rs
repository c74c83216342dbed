//! The flags of the Streamable HTTP transport (`host serve --http ADDR`, `host run --http
//! ADDR`); the server they describe is `crate::http`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use toolhost_mcp::http::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_PENDING_PER_PEER, DEFAULT_MAX_SESSIONS,
};

use super::values::{parse_duration, parse_size};

/// The flags of the HTTP transport (all but `--http` need `--http`).
#[derive(Debug, Clone, Args)]
pub struct HttpArgs {
    /// Serve MCP over Streamable HTTP on this address (e.g. 127.0.0.1:8080, or a port
    /// alone for loopback; port 0 picks a free one) at the path /mcp, instead of stdio.
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    pub http: Option<SocketAddr>,
    /// Require `Authorization: Bearer TOKEN` with a token from this file: one per line,
    /// optionally followed by a space and the client's name (for {client} in
    /// --session-root-template and the logs). At least 16 characters each.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub auth_token_file: Option<PathBuf>,
    /// Also take OAuth 2.1 access tokens (JWTs) issued by this authorization server
    /// (its issuer identifier, e.g. `https://auth.example.com`; repeatable): its metadata
    /// and signing keys are fetched over HTTPS (plain HTTP for a loopback issuer only);
    /// RS256, ES256 and EdDSA tokens for --oauth-audience are taken beside the static
    /// tokens, the `sub` naming the client. See docs/deploy.md, "OAuth".
    #[arg(long, value_name = "URL", requires_all = ["http", "oauth_audience"])]
    pub oauth_issuer: Vec<String>,
    /// This server's resource URI, which OAuth tokens must name in `aud` (e.g.
    /// `https://mcp.example.com/mcp`); also the `resource` of its protected resource
    /// metadata, served at /.well-known/oauth-protected-resource[/mcp].
    #[arg(long, value_name = "URI", requires = "oauth_issuer")]
    pub oauth_audience: Option<String>,
    /// A scope every OAuth token must grant (repeatable; none by default); a token
    /// without it is answered 403 insufficient_scope.
    #[arg(long, value_name = "SCOPE", requires = "oauth_issuer")]
    pub oauth_scope: Vec<String>,
    /// Fetch the metadata and keys of an --oauth-issuer that is not loopback over plain
    /// HTTP (only on a network where nobody can change them on the way).
    #[arg(long, requires = "oauth_issuer")]
    pub oauth_insecure_issuer: bool,
    /// Serve on an address that is not loopback without --auth-token-file (only behind
    /// a proxy that authenticates).
    #[arg(long, requires = "http")]
    pub insecure_public: bool,
    /// Also answer requests whose Host is NAME (the name clients use, e.g. behind a
    /// proxy); loopback names and the bound address always pass; `*` allows any.
    #[arg(long, value_name = "NAME", value_delimiter = ',', requires = "http")]
    pub allow_host: Vec<String>,
    /// Also accept browser requests from ORIGIN (e.g. `https://app.example.com`); `*`
    /// allows any. Requests without Origin are not browsers' and pass.
    #[arg(long, value_name = "ORIGIN", value_delimiter = ',', requires = "http")]
    pub allow_origin: Vec<String>,
    /// Largest request body (one JSON-RPC message).
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = parse_size, requires = "http")]
    pub max_body_bytes: u64,
    /// Most connections served at once. When all are taken, a new connection pushes out
    /// one that has not yet had a request pass the checks (or, without tokens, one idle
    /// between requests); authenticated connections and those being answered stay.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS, value_parser = parse_count, requires = "http")]
    pub max_connections: usize,
    /// Most connections one address (IPv4; IPv6: one /64) may hold before a request on
    /// each passes the Host, Origin and token checks; more are answered 503 and closed.
    /// Answered connections do not count (a proxy in front never meets it).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_PENDING_PER_PEER, value_parser = parse_count, requires = "http")]
    pub max_pending_per_peer: usize,
    /// How long a request's headers may take (from the connection's opening, or from
    /// their first byte on a kept-alive connection), and the grace of its body, before
    /// progress (--min-receive-rate) extends it; at most 10s.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_header_timeout, requires = "http")]
    pub header_timeout: Duration,
    /// Bytes per second that keep a slow request's headers and body coming: each byte
    /// received extends their deadline by 1/RATE s (headers: up to 10s in all).
    #[arg(long, value_name = "BYTES", default_value = "500", value_parser = parse_rate, requires = "http")]
    pub min_receive_rate: u64,
    /// Most tool calls running at once on one connection (and HTTP/2 streams per
    /// connection); past it, 503.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = parse_count, requires = "http")]
    pub max_in_flight_per_connection: usize,
    /// Give each session its own storage root: the built-in file tools of a session work
    /// in this directory, with {session} replaced by the session id and {client} by the
    /// token's client name (e.g. /srv/mcp/{client}/{session}); created 0700 on first use.
    /// Replaces --root for the file tools.
    #[arg(long, value_name = "TEMPLATE", requires = "http")]
    pub session_root_template: Option<String>,
    /// Serve each principal (a token's client name) by a policy file (TOML,
    /// at most 1 MiB): its profile decides the tools it is offered, its file access and
    /// storage root, its plugins' grant ceilings and its quotas (docs/deploy.md,
    /// "Policies and quotas"). Needs --auth-token-file naming every client (or
    /// --oauth-issuer: a principal is then its token's sub) and
    /// --session-root-template; with --watch the file is reloaded when it changes (a
    /// broken one keeps the last good policy).
    #[arg(long, value_name = "FILE", requires = "http")]
    pub policy: Option<PathBuf>,
    /// Sign session ids with the secret in this file (at least 32 bytes), so several
    /// host processes given the same file serve each other's sessions. Default: a
    /// random key per process.
    #[arg(
        long,
        value_name = "FILE",
        requires = "http",
        conflicts_with = "stateless"
    )]
    pub session_key_file: Option<PathBuf>,
    /// No sessions: no Mcp-Session-Id, every request served on its own (no GET stream,
    /// no DELETE).
    #[arg(long, requires = "http")]
    pub stateless: bool,
    /// Most sessions held in memory (idle ones are dropped first and come back from
    /// their id).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SESSIONS, value_parser = parse_count, requires = "http")]
    pub max_sessions: usize,
    /// At SIGTERM or Ctrl-C, how long running calls get to finish before they are
    /// cancelled.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration, requires = "http")]
    pub shutdown_grace: Duration,
    /// Keep the tasks of callers without a session in Redis (redis://HOST:PORT/DB or
    /// rediss://...), so every process given the same address gets, and cancels, them
    /// (docs/deploy.md, "Scale-out: tasks shared through Redis"); with --policy, each
    /// principal's calls per minute, bytes written per day and plugin HTTP requests per
    /// minute are counted there too, so they hold across the processes (fixed windows;
    /// Redis lost: quota-limited calls refused 503, limited plugin requests refused). Never with a password in it: use --state-password-file or
    /// TOOLHOST_STATE_PASSWORD. Unreachable at start: the host does not start.
    #[arg(long, value_name = "URL", requires = "http")]
    pub state: Option<String>,
    /// The Redis password for --state, read from this file (its first line).
    #[arg(long, value_name = "FILE", requires = "state")]
    pub state_password_file: Option<PathBuf>,
    /// For a rediss:// --state: the CA certificates (PEM, one or more) the server's
    /// certificate must chain to, in place of the public webpki roots (a self-hosted
    /// Redis usually has a private CA). Read at start; unreadable or holding no
    /// certificate: the host does not start. At most 1 MiB.
    #[arg(long, value_name = "FILE", requires = "state")]
    pub state_ca_file: Option<PathBuf>,
    /// How long a task shared through --state stays working without its process
    /// renewing it (every 200ms); past it, it is reported failed ("the process running
    /// it stopped"). Between 1s and 1h.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_task_lease, requires = "state")]
    pub task_lease: Duration,
}

/// `--task-lease`: a duration between 1s and 1h.
fn parse_task_lease(text: &str) -> Result<Duration, String> {
    let lease = parse_duration(text)?;
    if lease < toolhost_mcp::state::MIN_TASK_LEASE || lease > toolhost_mcp::state::MAX_TASK_LEASE {
        return Err(format!("{text:?} is outside 1s..1h"));
    }
    Ok(lease)
}

/// `--http`: `IP:PORT`, `[IPv6]:PORT`, `localhost:PORT`, or `PORT` / `:PORT` alone (both
/// 127.0.0.1: a port without an address binds loopback, never every interface).
fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let port = text
        .strip_prefix("localhost:")
        .or_else(|| text.strip_prefix(':'))
        .unwrap_or(text);
    if let Ok(port) = port.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    Err(format!(
        "\"{text}\" is not an address to listen on; give IP:PORT, e.g. 127.0.0.1:8080 or just 8080 (loopback), [::1]:8080, or 0.0.0.0:8080 (every interface, needs --auth-token-file)"
    ))
}

/// A whole number of at least 1.
fn parse_count(text: &str) -> Result<usize, String> {
    super::values::parse_positive_count(text, "", "0 would serve nothing; give at least 1")
        .map(NonZeroUsize::get)
}

/// `--header-timeout`: a duration of more than 0 and at most 10 s.
fn parse_header_timeout(text: &str) -> Result<Duration, String> {
    let duration = parse_duration(text)?;
    if duration.is_zero() || duration > Duration::from_secs(10) {
        return Err(format!(
            "\"{text}\" is not a header timeout; give more than 0 and at most 10s (e.g. 2s)"
        ));
    }
    Ok(duration)
}

/// `--min-receive-rate`: bytes per second, at least 1 (`500`, `1KiB`).
fn parse_rate(text: &str) -> Result<u64, String> {
    let rate = parse_size(text)?;
    if rate == 0 {
        return Err(
            "0 bytes per second would let a request stall forever; give at least 1 (e.g. 500)"
                .to_owned(),
        );
    }
    Ok(rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            parse_addr("127.0.0.1:8080"),
            Ok("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(
            parse_addr("localhost:9"),
            Ok("127.0.0.1:9".parse().unwrap())
        );
        assert_eq!(parse_addr("[::1]:0"), Ok("[::1]:0".parse().unwrap()));
        // A port alone binds loopback: the safe default.
        assert_eq!(parse_addr("8080"), Ok("127.0.0.1:8080".parse().unwrap()));
        assert_eq!(parse_addr(":0"), Ok("127.0.0.1:0".parse().unwrap()));
        let err = parse_addr("80800").unwrap_err();
        assert!(
            err.starts_with("\"80800\" is not an address to listen on; give IP:PORT"),
            "{err}"
        );
        assert!(parse_addr(":").is_err());
        assert!(parse_addr("example.com:80").is_err());
    }
}
