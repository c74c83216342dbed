//! [`TaskBackend`] over Redis (feature `redis-state`): every process given the same
//! `--state redis://HOST:PORT/DB` sees the same task records. `rediss://` is TLS
//! (rustls), the server's certificate checked against the public webpki roots or, with
//! `--state-ca-file` ([`StateCa`]), against the operator's CA only.
//!
//! Layout: a task is a hash at `toolhost:task:{id}` (fields `owner`, `status`,
//! `message`, `created`, `updated`, `ttl`, `lease`, `result`) expiring `ttl` after
//! its creation; an owner's task ids are a set at `toolhost:owner:{owner}` expiring
//! with its longest-lived task. Every change that depends on the record's state
//! (lease expiry, cancel, heartbeat, finish) is one Lua script, so it is atomic on the
//! server, and leases are kept in the server's clock (`TIME`), so the processes'
//! clocks need not agree. A quota count ([`QuotaCounter`]) is a counter at
//! `toolhost:quota:{key}:{window index}` (the key names a hashed principal and its
//! quota, never a token), counted and checked by one script (one round trip) and
//! expiring two windows after it was made.
//!
//! Bounds: each operation (connecting included) fails after [`OPERATION_TIMEOUT`]
//! ([`StateError::Timeout`]); one reply may take at most the result cap plus
//! [`REPLY_OVERHEAD`] bytes of memory: the connection's reads follow the RESP framing
//! and cut a reply (or a header announcing one) past that as it arrives
//! ([`StateError::Garbage`]), so a hostile server streaming a 1 GiB answer is stopped
//! at the bound, not at the time limit; a result read back larger than `max_result_bytes` is
//! refused by the script before it is sent ([`StateError::TooLarge`]); an owner's list
//! reads at most [`MAX_LISTED`] records. A broken connection is dropped and made
//! again by the next operation, so everything works again once the server is back.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, Client, ConnectionAddr, IntoConnectionInfo, RedisError, Script,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use super::capped::{Capped, REFUSED};

/// What a connection reads from: TCP, or TLS over it.
trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// What one reply may hold beyond a task's result (`max_task_result_bytes`): 2 MiB (a
/// record's other fields; an owner's list of up to [`MAX_LISTED`] ids takes about
/// 450 KiB).
pub const REPLY_OVERHEAD: u64 = 2 << 20;

use super::counter::{window_ms, Counted, QuotaCounter};
use super::{
    millis, BoxFuture, CancelRefusal, Heartbeat, StateError, TaskBackend, TaskRecord, TaskStatus,
    LEASE_EXPIRED, OPERATION_TIMEOUT,
};

/// The environment variable a Redis password may come from (else
/// `--state-password-file`; never the URL).
pub const PASSWORD_ENV: &str = "TOOLHOST_STATE_PASSWORD";

/// The most records one owner's list reads: 10 000 (more than any per-session task
/// cap allows).
pub const MAX_LISTED: usize = 10_000;

const TASK_PREFIX: &str = "toolhost:task:";
const QUOTA_PREFIX: &str = "toolhost:quota:";
const OWNER_PREFIX: &str = "toolhost:owner:";

/// Lua shared by the scripts: the server's clock in ms, and a running task whose lease
/// ran out stored as failed (ARGV[1] is always the lease-expired message).
const PRELUDE: &str = r"
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function expire_lease(key)
  local st = redis.call('HGET', key, 'status')
  if st == 'working' or st == 'input_required' then
    local lease = tonumber(redis.call('HGET', key, 'lease') or '0') or 0
    local now = now_ms()
    if lease <= now then
      redis.call('HSET', key, 'status', 'failed', 'message', ARGV[1], 'updated', now)
    end
  end
end
local function running(key)
  local st = redis.call('HGET', key, 'status')
  return st == 'working' or st == 'input_required'
end
";

/// KEYS: task. ARGV: lease message, owner ('' = any), result cap.
const GET: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[2] then return false end
expire_lease(KEYS[1])
local size = redis.call('HSTRLEN', KEYS[1], 'result')
if size > tonumber(ARGV[3]) then return redis.error_reply('TOOLARGE ' .. size) end
return redis.call('HGETALL', KEYS[1])
";

/// KEYS: task, owner set. ARGV: lease message, id, owner, status, created, updated,
/// ttl, lease ms, has message, message, has result, result.
const CREATE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local ttl = tonumber(ARGV[7])
redis.call('HSET', KEYS[1], 'owner', ARGV[3], 'status', ARGV[4], 'created', ARGV[5],
  'updated', ARGV[6], 'ttl', ARGV[7], 'lease', now_ms() + tonumber(ARGV[8]))
if ARGV[9] == '1' then redis.call('HSET', KEYS[1], 'message', ARGV[10]) end
if ARGV[11] == '1' then redis.call('HSET', KEYS[1], 'result', ARGV[12]) end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('SADD', KEYS[2], ARGV[2])
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
";

/// KEYS: task. ARGV: lease message, owner, reason.
const CANCEL: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 'none' end
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[2] then return 'none' end
expire_lease(KEYS[1])
if not running(KEYS[1]) then return 'ended ' .. redis.call('HGET', KEYS[1], 'status') end
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'message', ARGV[3], 'updated', now_ms())
return 'ok'
";

/// KEYS: task. ARGV: lease message, lease ms.
const HEARTBEAT: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 'gone' end
expire_lease(KEYS[1])
if not running(KEYS[1]) then return redis.call('HGET', KEYS[1], 'status') end
redis.call('HSET', KEYS[1], 'lease', now_ms() + tonumber(ARGV[2]))
return 'running'
";

/// KEYS: task. ARGV: lease message, status, has message, message, has result, result.
const FINISH: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
expire_lease(KEYS[1])
if not running(KEYS[1]) then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'updated', now_ms())
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'message', ARGV[4])
else redis.call('HDEL', KEYS[1], 'message') end
if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'result', ARGV[6]) end
return 1
";

/// KEYS: the counter's key without its window. ARGV: amount, limit, window ms. The
/// window's key (`KEY:INDEX`, the window's index in the server's clock) expires two
/// windows after it was made; an amount past the limit is taken back at once. Answers
/// -1 when counted, else the ms until the window ends.
const COUNT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local amount = tonumber(ARGV[1])
local window = tonumber(ARGV[3])
local index = math.floor(now / window)
local key = KEYS[1] .. ':' .. string.format('%d', index)
local used = redis.call('INCRBY', key, amount)
if redis.call('PTTL', key) < 0 then redis.call('PEXPIRE', key, window * 2) end
if used > tonumber(ARGV[2]) then
  redis.call('DECRBY', key, amount)
  return (index + 1) * window - now
end
return -1
";

/// A checked `--state` address: `redis://HOST[:PORT][/DB]` or `rediss://…` (TLS),
/// never carrying a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateUrl(String);

/// Why a `--state` address was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateUrlError {
    /// Not a redis:// or rediss:// URL.
    #[error("--state {0:?} is not a redis://HOST:PORT/DB or rediss://HOST:PORT/DB address")]
    NotRedis(String),
    /// The URL carries a password (it would show in `ps` and shell history).
    #[error("--state must not carry a password (it would show in the process list and shell history); give it with --state-password-file FILE or the environment variable TOOLHOST_STATE_PASSWORD")]
    PasswordInUrl,
}

impl StateUrl {
    /// Checks `url`: a redis:// or rediss:// address without a password (a user
    /// name is allowed: a Redis ACL user).
    ///
    /// # Errors
    /// [`StateUrlError`] saying what was wrong.
    pub fn parse(url: &str) -> Result<Self, StateUrlError> {
        let parsed = redis::parse_redis_url(url)
            .filter(|parsed| matches!(parsed.scheme(), "redis" | "rediss"))
            .filter(|parsed| parsed.host_str().is_some_and(|host| !host.is_empty()))
            .ok_or_else(|| StateUrlError::NotRedis(url.to_owned()))?;
        if parsed.password().is_some() {
            return Err(StateUrlError::PasswordInUrl);
        }
        Ok(StateUrl(url.to_owned()))
    }

    /// The address as given.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The certificate authorities a rediss:// server's certificate must chain to
/// (`--state-ca-file`): the operator's own, in place of the public webpki roots. A
/// self-hosted Redis almost always has a certificate from a private CA; trusting the
/// public roots as well would let anyone holding a public certificate for the server's
/// name pass as the server, so the file replaces them rather than adds to them.
///
/// ```
/// use toolhost_mcp::state::{RedisBackend, StateCa, StateCaError, StateError, StateUrl};
///
/// // What the host does with `--state rediss://... --state-ca-file FILE`.
/// async fn shared(url: &str, ca_file: &std::path::Path) -> Result<RedisBackend, String> {
///     let url = StateUrl::parse(url).map_err(|e| e.to_string())?;
///     let ca = StateCa::from_pem_file(ca_file).map_err(|e| e.to_string())?;
///     RedisBackend::connect_with_ca(&url, None, &ca, 1 << 20)
///         .await
///         .map_err(|e: StateError| e.to_string())
/// }
///
/// // A file without a certificate is refused before anything is connected.
/// let err = StateCa::from_pem(b"not a certificate\n", "ca.pem").unwrap_err();
/// assert_eq!(err, StateCaError::NoCertificate("ca.pem".into()));
/// # let _ = shared;
/// ```
#[derive(Clone)]
pub struct StateCa {
    config: Arc<rustls::ClientConfig>,
    certificates: usize,
}

impl std::fmt::Debug for StateCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateCa")
            .field("certificates", &self.certificates)
            .finish_non_exhaustive()
    }
}

/// Why a `--state-ca-file` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateCaError {
    /// The file could not be read.
    #[error("cannot read --state-ca-file {path}: {reason}")]
    Unreadable {
        /// The file.
        path: String,
        /// What the system said.
        reason: String,
    },
    /// The file holds no PEM certificate (`-----BEGIN CERTIFICATE-----`).
    #[error("--state-ca-file {0} holds no PEM certificate (-----BEGIN CERTIFICATE-----); give the CA certificate that signed the Redis server's certificate")]
    NoCertificate(String),
    /// A certificate in the file is malformed or not usable as a trust anchor.
    #[error("--state-ca-file {path}: {reason}; give the CA certificate (PEM) that signed the Redis server's certificate")]
    BadCertificate {
        /// The file.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// The file is larger than [`MAX_CA_FILE_BYTES`].
    #[error("--state-ca-file {0} is larger than {MAX_CA_FILE_BYTES} bytes; give only the CA certificates")]
    TooLarge(String),
}

/// The largest `--state-ca-file` read: 1 MiB (a bundle of a few hundred certificates).
pub const MAX_CA_FILE_BYTES: u64 = 1 << 20;

impl StateCa {
    /// The certificates (one or more, PEM) in the file at `path`.
    ///
    /// # Errors
    /// [`StateCaError`] when the file is unreadable, larger than
    /// [`MAX_CA_FILE_BYTES`], or holds no usable certificate.
    pub fn from_pem_file(path: &std::path::Path) -> Result<Self, StateCaError> {
        use std::io::Read;
        let shown = path.display().to_string();
        let unreadable = |err: std::io::Error| StateCaError::Unreadable {
            path: shown.clone(),
            reason: err.to_string(),
        };
        let file = std::fs::File::open(path).map_err(unreadable)?;
        let mut pem = Vec::new();
        file.take(MAX_CA_FILE_BYTES + 1)
            .read_to_end(&mut pem)
            .map_err(unreadable)?;
        if pem.len() as u64 > MAX_CA_FILE_BYTES {
            return Err(StateCaError::TooLarge(shown));
        }
        Self::from_pem(&pem, &shown)
    }

    /// The certificates (one or more, PEM) in `pem`, read from `source` (named in
    /// errors).
    ///
    /// # Errors
    /// [`StateCaError`] when `pem` holds no usable certificate.
    pub fn from_pem(pem: &[u8], source: &str) -> Result<Self, StateCaError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::CertificateDer;
        let bad = |reason: String| StateCaError::BadCertificate {
            path: source.to_owned(),
            reason,
        };
        let mut roots = rustls::RootCertStore::empty();
        let mut certificates = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|err| bad(format!("not valid PEM ({err})")))?;
            roots
                .add(cert)
                .map_err(|err| bad(format!("a certificate is not usable as a CA ({err})")))?;
            certificates += 1;
        }
        if certificates == 0 {
            return Err(StateCaError::NoCertificate(source.to_owned()));
        }
        Ok(StateCa {
            config: tls_config(roots),
            certificates,
        })
    }

    /// How many certificates the file held.
    #[must_use]
    pub fn certificates(&self) -> usize {
        self.certificates
    }
}

/// A TLS client configuration trusting `roots`, no client certificate.
fn tls_config(roots: rustls::RootCertStore) -> Arc<rustls::ClientConfig> {
    Arc::new(
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// The TLS configuration of rediss:// without `--state-ca-file`: the webpki roots.
fn public_roots() -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    tls_config(roots)
}

/// What a TLS error from a server that may not speak TLS adds.
const NOT_TLS: &str = "does the server speak TLS on this port? rediss:// wants its TLS port";

/// A failed TLS handshake as a [`StateError`]: [`StateError::Tls`] when TLS said why
/// (a certificate refused, a server that does not speak TLS), else unreachable.
fn handshake_error(err: std::io::Error) -> StateError {
    let tls = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match tls {
        // A certificate refused, or the server refusing the handshake (an alert, no
        // common version or cipher suite): what TLS said.
        Some(
            rustls::Error::InvalidCertificate(_)
            | rustls::Error::AlertReceived(_)
            | rustls::Error::PeerIncompatible(_)
            | rustls::Error::PeerMisbehaved(_),
        ) => StateError::Tls(clip(&err.to_string())),
        // Bytes that are not TLS: most likely a plain port.
        Some(
            rustls::Error::InvalidMessage(_)
            | rustls::Error::InappropriateMessage { .. }
            | rustls::Error::InappropriateHandshakeMessage { .. },
        ) => StateError::Tls(format!("{}: {NOT_TLS}", clip(&err.to_string()))),
        _ => StateError::Unreachable(clip(&err.to_string())),
    }
}

/// Task records in Redis, shared by every process given the same address.
pub struct RedisBackend {
    client: Client,
    /// For rediss://: the CA of `--state-ca-file`, else the webpki roots.
    tls: Arc<rustls::ClientConfig>,
    connection: Mutex<Option<MultiplexedConnection>>,
    max_result_bytes: usize,
    timeout: Duration,
    scripts: Scripts,
}

struct Scripts {
    get: Script,
    create: Script,
    cancel: Script,
    heartbeat: Script,
    finish: Script,
    count: Script,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        f.debug_struct("RedisBackend")
            .field(
                "addr",
                &self.client.get_connection_info().addr().to_string(),
            )
            .field("max_result_bytes", &self.max_result_bytes)
            .finish_non_exhaustive()
    }
}

/// The most characters of a server's text an error repeats.
const MAX_ECHOED_CHARS: usize = 160;

/// `text` as an error repeats it: at most [`MAX_ECHOED_CHARS`] characters (a server's
/// answer can be as long as it likes), cut with an ellipsis.
fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_ECHOED_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The size in the GET script's refusal of a result past the cap (`TOOLARGE SIZE`, which
/// the client shows as `"TOOLARGE": SIZE`).
fn too_large(text: &str) -> Option<usize> {
    let (_, rest) = text.split_once("TOOLARGE")?;
    let digits: String = rest
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A [`RedisError`] as a [`StateError`].
fn state_error(err: &RedisError, timeout: Duration) -> StateError {
    let full = err.to_string();
    let text = clip(&full);
    if err.kind() == redis::ErrorKind::AuthenticationFailed
        || text.contains("WRONGPASS")
        || text.contains("NOAUTH")
    {
        StateError::Auth(text)
    } else if full.contains(REFUSED) {
        // Cut by the reply bound (`Capped`): not a broken connection, a hostile answer.
        StateError::Garbage(text)
    } else if err.is_timeout() {
        StateError::Timeout(timeout)
    } else if err.is_io_error() || err.is_connection_refusal() || err.is_connection_dropped() {
        StateError::Unreachable(text)
    } else if let Some(size) = too_large(&full) {
        StateError::TooLarge(size, 0)
    } else {
        StateError::Garbage(text)
    }
}

impl RedisBackend {
    /// A backend for `url`, with `password` (from `--state-password-file` or
    /// [`PASSWORD_ENV`]) if any, refusing results read back over `max_result_bytes`.
    /// Connects and checks the server answers (`PING`), so a host given an
    /// unreachable `--state` refuses to start.
    ///
    /// # Errors
    /// [`StateError`] when the address is unusable or the server does not answer
    /// within [`OPERATION_TIMEOUT`].
    pub async fn connect(
        url: &StateUrl,
        password: Option<&str>,
        max_result_bytes: usize,
    ) -> Result<Self, StateError> {
        Self::connect_with_timeout(url, password, None, max_result_bytes, OPERATION_TIMEOUT).await
    }

    /// [`RedisBackend::connect`] for a rediss:// server whose certificate chains to `ca`
    /// (`--state-ca-file`) rather than to the public webpki roots.
    ///
    /// # Errors
    /// As [`RedisBackend::connect`]; [`StateError::Tls`] when the server's certificate
    /// does not chain to `ca`, does not name the host, or the port does not speak TLS.
    pub async fn connect_with_ca(
        url: &StateUrl,
        password: Option<&str>,
        ca: &StateCa,
        max_result_bytes: usize,
    ) -> Result<Self, StateError> {
        Self::connect_with_timeout(url, password, Some(ca), max_result_bytes, OPERATION_TIMEOUT)
            .await
    }

    /// [`RedisBackend::connect`] (or [`RedisBackend::connect_with_ca`] when `ca` is
    /// given) with another per-operation time limit (tests).
    ///
    /// # Errors
    /// As [`RedisBackend::connect_with_ca`].
    pub async fn connect_with_timeout(
        url: &StateUrl,
        password: Option<&str>,
        ca: Option<&StateCa>,
        max_result_bytes: usize,
        timeout: Duration,
    ) -> Result<Self, StateError> {
        let mut info = url
            .as_str()
            .into_connection_info()
            .map_err(|err| StateError::Garbage(clip(&err.to_string())))?;
        if let Some(password) = password {
            let settings = info.redis_settings().clone().set_password(password);
            info = info.set_redis_settings(settings);
        }
        let client =
            Client::open(info).map_err(|err| StateError::Garbage(clip(&err.to_string())))?;
        let tls = match ca {
            Some(ca) => Arc::clone(&ca.config),
            None => public_roots(),
        };
        let backend = RedisBackend {
            client,
            tls,
            connection: Mutex::new(None),
            max_result_bytes,
            timeout,
            scripts: Scripts {
                get: Script::new(&format!("{PRELUDE}{GET}")),
                create: Script::new(&format!("{PRELUDE}{CREATE}")),
                cancel: Script::new(&format!("{PRELUDE}{CANCEL}")),
                heartbeat: Script::new(&format!("{PRELUDE}{HEARTBEAT}")),
                finish: Script::new(&format!("{PRELUDE}{FINISH}")),
                count: Script::new(COUNT),
            },
        };
        backend.ping().await?;
        Ok(backend)
    }

    /// Checks the server answers `PING` with `PONG`.
    ///
    /// # Errors
    /// [`StateError`] when it does not.
    pub async fn ping(&self) -> Result<(), StateError> {
        let answer: String = self
            .run(|mut conn| async move { redis::cmd("PING").query_async(&mut conn).await })
            .await?;
        if answer == "PONG" {
            Ok(())
        } else {
            Err(StateError::Garbage(format!(
                "PING answered {:?}",
                clip(&answer)
            )))
        }
    }

    /// The connection, made when there is none.
    async fn connection(&self) -> Result<MultiplexedConnection, StateError> {
        let mut slot = self.connection.lock().await;
        if let Some(conn) = slot.as_ref() {
            return Ok(conn.clone());
        }
        let conn = self.open().await?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// A new connection: TCP (TLS for rediss://, the `--state-ca-file` CA or the webpki
    /// roots) made here, so that
    /// what it reads passes through [`Capped`]: a reply larger than
    /// [`RedisBackend::max_reply`] cuts the connection before it is buffered whole.
    async fn open(&self) -> Result<MultiplexedConnection, StateError> {
        let info = self.client.get_connection_info();
        let unreachable = |err: std::io::Error| StateError::Unreachable(clip(&err.to_string()));
        let stream: Box<dyn Io> = match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let tcp = TcpStream::connect((host.as_str(), *port))
                    .await
                    .map_err(unreachable)?;
                let _ = tcp.set_nodelay(true);
                Box::new(tcp)
            }
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                ..
            } => {
                if *insecure {
                    return Err(StateError::Garbage(
                        "rediss://...#insecure (no certificate check) is not supported; give the server a certificate its name verifies".into(),
                    ));
                }
                let tcp = TcpStream::connect((host.as_str(), *port))
                    .await
                    .map_err(unreachable)?;
                let _ = tcp.set_nodelay(true);
                let name = rustls::pki_types::ServerName::try_from(host.clone())
                    .map_err(|err| StateError::Garbage(clip(&err.to_string())))?;
                // Within the operation's bound, so a server that never answers a TLS
                // hello (a plain Redis waits for a newline) is reported as such rather
                // than as a plain timeout.
                let handshake = self.timeout.saturating_sub(self.timeout / 4);
                let tls = tokio::time::timeout(
                    handshake,
                    tokio_rustls::TlsConnector::from(Arc::clone(&self.tls)).connect(name, tcp),
                )
                .await
                .map_err(|_| {
                    StateError::Tls(format!(
                        "no TLS handshake answer within {} ms: {NOT_TLS}",
                        handshake.as_millis()
                    ))
                })?
                .map_err(handshake_error)?;
                Box::new(tls)
            }
            _ => {
                return Err(StateError::Garbage(
                    "--state must be a TCP address (redis:// or rediss://)".into(),
                ))
            }
        };
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        let (conn, driver) = MultiplexedConnection::new_with_config(
            info.redis_settings(),
            Capped::new(stream, self.max_reply()),
            config,
        )
        .await
        .map_err(|err| state_error(&err, self.timeout))?;
        // Ends when the connection is dropped (or breaks).
        tokio::spawn(driver);
        Ok(conn)
    }

    /// The most bytes one reply may take: the result cap plus [`REPLY_OVERHEAD`] (a
    /// record's other fields, an owner's list of ids).
    fn max_reply(&self) -> u64 {
        u64::try_from(self.max_result_bytes)
            .unwrap_or(u64::MAX)
            .saturating_add(REPLY_OVERHEAD)
    }

    /// Runs `op` on the connection within the time limit; a failure other than a
    /// script's own answer drops the connection, so the next operation makes a new one.
    async fn run<T, F, Fut>(&self, op: F) -> Result<T, StateError>
    where
        F: FnOnce(MultiplexedConnection) -> Fut + Send,
        Fut: std::future::Future<Output = Result<T, RedisError>> + Send,
    {
        let attempt = async {
            let conn = self.connection().await?;
            op(conn)
                .await
                .map_err(|err| state_error(&err, self.timeout))
        };
        let result = match tokio::time::timeout(self.timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(StateError::Timeout(self.timeout)),
        };
        match result {
            Err(StateError::TooLarge(size, _)) => {
                Err(StateError::TooLarge(size, self.max_result_bytes))
            }
            Err(err) => {
                *self.connection.lock().await = None;
                Err(err)
            }
            ok => ok,
        }
    }

    /// The record of task `id` (any owner when `owner` is empty).
    async fn read(&self, owner: &str, id: &str) -> Result<Option<TaskRecord>, StateError> {
        let cap = self.max_result_bytes;
        let fields: Option<Vec<Vec<u8>>> = self
            .run(|mut conn| async move {
                self.scripts
                    .get
                    .key(format!("{TASK_PREFIX}{id}"))
                    .arg(LEASE_EXPIRED)
                    .arg(owner)
                    .arg(cap)
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        fields
            .map(|fields| record_from_fields(id, fields, self.max_result_bytes))
            .transpose()
    }
}

/// A record from a hash's `HGETALL` answer (field, value, field, value…), checked.
fn record_from_fields(
    id: &str,
    fields: Vec<Vec<u8>>,
    max_result_bytes: usize,
) -> Result<TaskRecord, StateError> {
    let garbage = |what: &str| StateError::Garbage(format!("task {id}: {what}"));
    if !fields.len().is_multiple_of(2) || fields.len() > 16 {
        return Err(garbage("not a task record"));
    }
    let mut record = TaskRecord {
        id: id.to_owned(),
        owner: String::new(),
        status: TaskStatus::Failed,
        status_message: None,
        created_ms: 0,
        updated_ms: 0,
        ttl_ms: 0,
        result: None,
    };
    let mut status = None;
    let mut pairs = fields.into_iter();
    while let (Some(name), Some(value)) = (pairs.next(), pairs.next()) {
        let value = String::from_utf8(value).map_err(|_| garbage("a field is not UTF-8"))?;
        let number = || value.parse::<u64>().map_err(|_| garbage("a bad number"));
        match name.as_slice() {
            b"owner" => record.owner = value,
            b"status" => status = TaskStatus::parse(&value),
            b"message" => record.status_message = Some(value),
            b"created" => record.created_ms = number()?,
            b"updated" => record.updated_ms = number()?,
            b"ttl" => record.ttl_ms = number()?,
            b"result" => {
                if value.len() > max_result_bytes {
                    return Err(StateError::TooLarge(value.len(), max_result_bytes));
                }
                record.result = Some(value);
            }
            _ => {}
        }
    }
    record.status = status.ok_or_else(|| garbage("no status"))?;
    Ok(record)
}

/// `value`'s flag and text for a script (`"1", text` or `"0", ""`).
fn optional(value: Option<&str>) -> (&'static str, &str) {
    value.map_or(("0", ""), |value| ("1", value))
}

impl TaskBackend for RedisBackend {
    fn create<'a>(
        &'a self,
        record: &'a TaskRecord,
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let size = record.result.as_ref().map_or(0, String::len);
            if size > self.max_result_bytes {
                return Err(StateError::TooLarge(size, self.max_result_bytes));
            }
            let (has_message, message) = optional(record.status_message.as_deref());
            let (has_result, result) = optional(record.result.as_deref());
            let created: i64 = self
                .run(|mut conn| async move {
                    self.scripts
                        .create
                        .key(format!("{TASK_PREFIX}{}", record.id))
                        .key(format!("{OWNER_PREFIX}{}", record.owner))
                        .arg(LEASE_EXPIRED)
                        .arg(&record.id)
                        .arg(&record.owner)
                        .arg(record.status.as_str())
                        .arg(record.created_ms)
                        .arg(record.updated_ms)
                        .arg(record.ttl_ms.max(1))
                        .arg(millis(lease))
                        .arg(has_message)
                        .arg(message)
                        .arg(has_result)
                        .arg(result)
                        .invoke_async(&mut conn)
                        .await
                })
                .await?;
            if created == 1 {
                Ok(())
            } else {
                Err(StateError::Exists)
            }
        })
    }

    fn get<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, StateError>> {
        Box::pin(async move {
            if owner.is_empty() {
                return Ok(None);
            }
            self.read(owner, id).await
        })
    }

    fn list<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<Vec<TaskRecord>, StateError>> {
        Box::pin(async move {
            if owner.is_empty() {
                return Ok(Vec::new());
            }
            let set = format!("{OWNER_PREFIX}{owner}");
            let ids: Vec<String> = self
                .run(|mut conn| {
                    let set = set.clone();
                    async move {
                        redis::cmd("SRANDMEMBER")
                            .arg(set)
                            .arg(MAX_LISTED)
                            .query_async(&mut conn)
                            .await
                    }
                })
                .await?;
            let mut records = Vec::with_capacity(ids.len());
            let mut gone = Vec::new();
            for id in ids {
                match self.read(owner, &id).await? {
                    Some(record) => records.push(record),
                    None => gone.push(id),
                }
            }
            if !gone.is_empty() {
                // Forgotten tasks' ids; failing to drop them only costs a later read.
                let _: Result<i64, StateError> = self
                    .run(|mut conn| async move {
                        redis::cmd("SREM")
                            .arg(&set)
                            .arg(&gone)
                            .query_async(&mut conn)
                            .await
                    })
                    .await;
            }
            records.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
            Ok(records)
        })
    }

    fn cancel<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        reason: &'a str,
    ) -> BoxFuture<'a, Result<TaskRecord, CancelRefusal>> {
        Box::pin(async move {
            if owner.is_empty() {
                return Err(CancelRefusal::NotFound);
            }
            let answer: String = self
                .run(|mut conn| async move {
                    self.scripts
                        .cancel
                        .key(format!("{TASK_PREFIX}{id}"))
                        .arg(LEASE_EXPIRED)
                        .arg(owner)
                        .arg(reason)
                        .invoke_async(&mut conn)
                        .await
                })
                .await?;
            match answer.as_str() {
                "none" => Err(CancelRefusal::NotFound),
                "ok" => self.read(owner, id).await?.ok_or(CancelRefusal::NotFound),
                other => match other.strip_prefix("ended ").and_then(TaskStatus::parse) {
                    Some(status) => Err(CancelRefusal::Ended(status)),
                    None => Err(
                        StateError::Garbage(format!("cancel answered {:?}", clip(other))).into(),
                    ),
                },
            }
        })
    }

    fn heartbeat<'a>(
        &'a self,
        id: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Heartbeat, StateError>> {
        Box::pin(async move {
            let answer: String = self
                .run(|mut conn| async move {
                    self.scripts
                        .heartbeat
                        .key(format!("{TASK_PREFIX}{id}"))
                        .arg(LEASE_EXPIRED)
                        .arg(millis(lease))
                        .invoke_async(&mut conn)
                        .await
                })
                .await?;
            match answer.as_str() {
                "running" => Ok(Heartbeat::Running),
                "gone" => Ok(Heartbeat::Gone),
                other => TaskStatus::parse(other)
                    .map(Heartbeat::Ended)
                    .ok_or_else(|| {
                        StateError::Garbage(format!("heartbeat answered {:?}", clip(other)))
                    }),
            }
        })
    }

    fn finish<'a>(
        &'a self,
        id: &'a str,
        status: TaskStatus,
        message: Option<&'a str>,
        result: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StateError>> {
        Box::pin(async move {
            let size = result.map_or(0, str::len);
            if size > self.max_result_bytes {
                return Err(StateError::TooLarge(size, self.max_result_bytes));
            }
            let (has_message, message) = optional(message);
            let (has_result, result) = optional(result);
            let done: i64 = self
                .run(|mut conn| async move {
                    self.scripts
                        .finish
                        .key(format!("{TASK_PREFIX}{id}"))
                        .arg(LEASE_EXPIRED)
                        .arg(status.as_str())
                        .arg(has_message)
                        .arg(message)
                        .arg(has_result)
                        .arg(result)
                        .invoke_async(&mut conn)
                        .await
                })
                .await?;
            Ok(done == 1)
        })
    }
}

impl QuotaCounter for RedisBackend {
    fn count<'a>(
        &'a self,
        key: &'a str,
        amount: u64,
        limit: u64,
        window: Duration,
    ) -> BoxFuture<'a, Result<Counted, StateError>> {
        Box::pin(async move {
            let window = window_ms(window);
            let answer: i64 = self
                .run(|mut conn| async move {
                    self.scripts
                        .count
                        .key(format!("{QUOTA_PREFIX}{key}"))
                        .arg(amount)
                        .arg(limit)
                        .arg(window)
                        .invoke_async(&mut conn)
                        .await
                })
                .await?;
            if answer == -1 {
                return Ok(Counted::Taken);
            }
            match u64::try_from(answer) {
                Ok(left) if (1..=window).contains(&left) => Ok(Counted::Refused {
                    retry_after: Duration::from_millis(left),
                }),
                _ => Err(StateError::Garbage(format!(
                    "a quota count answered {answer}"
                ))),
            }
        })
    }
}
