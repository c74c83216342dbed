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
//!
//! The backend's parts: [`address`] (the checked `--state` URL), [`tls`] (rediss://
//! and the operator's CA), [`connection`] (the one connection, made again when it
//! breaks, each operation under the time limit), [`scripts`] (the Lua run on the
//! server), [`errors`] (a client error as a [`StateError`]), and the two traits it
//! serves: [`tasks`] ([`TaskBackend`]) and [`quotas`] ([`QuotaCounter`]).
//!
//! [`TaskBackend`]: super::TaskBackend
//! [`QuotaCounter`]: super::QuotaCounter

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{Client, IntoConnectionInfo};
use tokio::sync::Mutex;

use self::errors::clip;
use self::scripts::Scripts;
use self::tls::public_roots;
use super::{StateError, OPERATION_TIMEOUT};

mod address;
mod connection;
mod errors;
mod quotas;
mod scripts;
mod tasks;
mod tls;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tls_tests;

pub use self::address::{StateUrl, StateUrlError};
pub use self::tls::{StateCa, StateCaError, MAX_CA_FILE_BYTES};

/// What one reply may hold beyond a task's result (`max_task_result_bytes`): 2 MiB (a
/// record's other fields; an owner's list of up to [`MAX_LISTED`] ids takes about
/// 450 KiB).
pub const REPLY_OVERHEAD: u64 = 2 << 20;

/// The environment variable a Redis password may come from (else
/// `--state-password-file`; never the URL).
pub const PASSWORD_ENV: &str = "TOOLHOST_STATE_PASSWORD";

/// The most records one owner's list reads: 10 000 (more than any per-session task
/// cap allows).
pub const MAX_LISTED: usize = 10_000;

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
            scripts: Scripts::new(),
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
}
