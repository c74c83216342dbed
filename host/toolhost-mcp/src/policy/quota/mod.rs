//! Each principal's quotas: calls per minute and outgoing plugin HTTP requests per
//! minute (token buckets refilled continuously), calls at once, and bytes written per
//! day (UTC). A principal's state is its own (`Arc<PrincipalQuota>`, found in a sharded
//! map): one principal at its limit never waits on another's.
//!
//! The map is keyed by the principal's binding ([`super::Principal::key`]: a static
//! token's name, or an OAuth token's issuer and `sub`) and bounded: a shard is swept
//! when it has doubled since its last sweep, dropping the *idle* states (nothing holds
//! them: no session, no call running; every per-minute bucket full again; nothing
//! written today), whose loss changes nothing. A state within one of its windows is
//! never dropped, so churning other principals cannot reset anyone's quotas. When
//! [`MAX_PRINCIPALS`] states are all within their windows, a new principal is refused
//! ([`QuotasFull`], HTTP 503 with `Retry-After: 60`) until some become idle.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

// The parts: principal.rs (one principal's state and the checks a call, a write and an
// outgoing request pass), bucket.rs (the per-minute token buckets), shared.rs (the same
// quotas counted across processes, `--state`) and map.rs (every principal's state,
// sharded and bounded).
mod bucket;
mod map;
mod principal;
mod shared;

pub use self::map::Quotas;
pub use self::principal::{CallPermit, PrincipalQuota};
pub use self::shared::{SharedQuotas, SharedRefusal};

/// The highest per-minute quota: 1 000 000.
pub const MAX_PER_MINUTE: u64 = 1_000_000;
/// The highest concurrent-calls quota: 65 536.
pub const MAX_CONCURRENT: u64 = 65_536;
/// The highest bytes-written-per-day quota: 1 TiB.
pub const MAX_BYTES_PER_DAY: u64 = 1 << 40;
/// The most principals whose quota state one process keeps: 100 000 (a few hundred
/// bytes each). Idle states are dropped to make room; past this many states within
/// their windows, new principals are refused ([`QuotasFull`]).
pub const MAX_PRINCIPALS: usize = 100_000;

/// A new principal refused because [`MAX_PRINCIPALS`] (or the configured most)
/// quota states are all within their windows: dropping one would reset its quotas.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Service Unavailable: the server keeps the quotas of at most {max} principals and all of them are within their quota windows; retry in {RETRY_FULL_SECS} s, when idle ones can be dropped")]
pub struct QuotasFull {
    /// The most principals kept.
    pub max: usize,
}

/// The `Retry-After` (seconds) of a [`QuotasFull`] refusal: a per-minute window.
pub const RETRY_FULL_SECS: u64 = 60;

/// A profile's quotas; `None`: no limit of that kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QuotaLimits {
    /// Tool calls per minute (a token bucket of that size, refilled evenly), 1 to
    /// [`MAX_PER_MINUTE`].
    pub calls_per_minute: Option<u64>,
    /// Tool calls running at once, 1 to [`MAX_CONCURRENT`].
    pub concurrent_calls: Option<u64>,
    /// Bytes the file tools may write per day (UTC), 1 to [`MAX_BYTES_PER_DAY`].
    pub bytes_written_per_day: Option<u64>,
    /// Outgoing plugin HTTP requests per minute (token bucket), 1 to
    /// [`MAX_PER_MINUTE`].
    pub http_requests_per_minute: Option<u64>,
}

/// Which quota refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quota {
    /// `calls_per_minute`.
    CallsPerMinute,
    /// `concurrent_calls`.
    ConcurrentCalls,
    /// `bytes_written_per_day`.
    BytesWrittenPerDay,
    /// `http_requests_per_minute`.
    HttpRequestsPerMinute,
}

impl Quota {
    /// Its name in the policy file.
    pub fn name(self) -> &'static str {
        match self {
            Self::CallsPerMinute => "calls_per_minute",
            Self::ConcurrentCalls => "concurrent_calls",
            Self::BytesWrittenPerDay => "bytes_written_per_day",
            Self::HttpRequestsPerMinute => "http_requests_per_minute",
        }
    }
}

/// A refusal by a quota: which, its limit, and when to try again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quota exceeded: {} (limit {limit}) is used up for this principal; it resets in {} s", quota.name(), self.retry_after_secs())]
pub struct QuotaExceeded {
    /// The quota.
    pub quota: Quota,
    /// Its limit.
    pub limit: u64,
    /// How long until a retry can pass.
    pub retry_after: Duration,
}

impl QuotaExceeded {
    /// [`QuotaExceeded::retry_after`] in whole seconds, rounded up, at least 1 (the
    /// `Retry-After` header's value).
    pub fn retry_after_secs(&self) -> u64 {
        let secs = self.retry_after.as_secs();
        let rounded = if self.retry_after.subsec_nanos() > 0 {
            secs.saturating_add(1)
        } else {
            secs
        };
        rounded.max(1)
    }
}

/// Unset limits are kept as this.
const UNLIMITED: u64 = u64::MAX;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
