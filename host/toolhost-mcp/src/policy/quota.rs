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

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::Principal;

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

/// A token bucket holding up to `limit` tokens, refilled at `limit` per minute.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// Whether it has refilled to `limit` by `now` (dropping it would change nothing).
    fn full_at(&self, limit: u64, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens + elapsed * (limit as f64 / 60.0) >= limit as f64
    }

    fn full(limit: u64) -> Self {
        Self {
            tokens: limit as f64,
            at: Instant::now(),
        }
    }

    /// Refills to now; whether a token is there, and when one will be if not.
    fn refill(&mut self, limit: u64, now: Instant) -> Result<(), Duration> {
        let per_sec = limit as f64 / 60.0;
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * per_sec).min(limit as f64);
        self.at = now;
        if self.tokens >= 1.0 {
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / per_sec))
        }
    }
}

/// Unset limits are kept as this.
const UNLIMITED: u64 = u64::MAX;

fn stored(limit: Option<u64>) -> u64 {
    limit.unwrap_or(UNLIMITED)
}

/// One principal's quota state.
#[derive(Debug)]
pub struct PrincipalQuota {
    calls_per_minute: AtomicU64,
    concurrent_calls: AtomicU64,
    bytes_written_per_day: AtomicU64,
    http_requests_per_minute: AtomicU64,
    calls: Mutex<Option<Bucket>>,
    http: Mutex<Option<Bucket>>,
    running: AtomicU64,
    /// (day since the epoch, bytes written that day).
    written: Mutex<(u64, u64)>,
    /// The scopes its token granted when it was first seen (to find its profile again
    /// on a reload).
    scopes: Vec<String>,
    /// Its client name and issuer (to find its profile again on a reload).
    client: Option<String>,
    issuer: Option<String>,
    /// The policy generation its limits and `allowed` follow (see `LivePolicy`).
    generation: AtomicU64,
    /// Whether that policy gives it a profile.
    allowed: std::sync::atomic::AtomicBool,
    /// Its key in a shared counter ([`SharedQuotas`]): its binding hashed (never a
    /// token or a name in the clear).
    shared_key: String,
    /// The counter its rate quotas are also counted in, across processes, if any.
    shared: Option<SharedQuotas>,
}

/// A call's place under [`QuotaLimits::concurrent_calls`], given back when dropped.
#[derive(Debug)]
pub struct CallPermit(Arc<PrincipalQuota>);

impl Drop for CallPermit {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PrincipalQuota {
    fn new(limits: &QuotaLimits, principal: &Principal<'_>, shared: Option<SharedQuotas>) -> Self {
        let quota = Self {
            calls_per_minute: AtomicU64::new(UNLIMITED),
            concurrent_calls: AtomicU64::new(UNLIMITED),
            bytes_written_per_day: AtomicU64::new(UNLIMITED),
            http_requests_per_minute: AtomicU64::new(UNLIMITED),
            calls: Mutex::new(None),
            http: Mutex::new(None),
            running: AtomicU64::new(0),
            written: Mutex::new((0, 0)),
            scopes: principal.scopes.to_vec(),
            client: principal.client().map(str::to_owned),
            issuer: principal.issuer().map(str::to_owned),
            generation: AtomicU64::new(0),
            allowed: std::sync::atomic::AtomicBool::new(true),
            // Hashed only where it is used: with a shared counter.
            shared_key: if shared.is_some() {
                shared_key(&principal.key())
            } else {
                String::new()
            },
            shared,
        };
        quota.set_limits(limits);
        quota
    }

    /// Puts `limits` in force (a policy reload); usage so far counts against them.
    pub fn set_limits(&self, limits: &QuotaLimits) {
        self.calls_per_minute
            .store(stored(limits.calls_per_minute), Ordering::Release);
        self.concurrent_calls
            .store(stored(limits.concurrent_calls), Ordering::Release);
        self.bytes_written_per_day
            .store(stored(limits.bytes_written_per_day), Ordering::Release);
        self.http_requests_per_minute
            .store(stored(limits.http_requests_per_minute), Ordering::Release);
    }

    /// Whether a call would pass now (the calls-per-minute and concurrent-calls
    /// quotas), taking nothing: what the HTTP layer checks to answer 429 before a call
    /// is read into a session.
    ///
    /// # Errors
    /// [`QuotaExceeded`] naming the quota and when it frees up.
    pub fn check_call(&self) -> Result<(), QuotaExceeded> {
        let concurrent = self.concurrent_calls.load(Ordering::Acquire);
        if concurrent != UNLIMITED && self.running.load(Ordering::Acquire) >= concurrent {
            return Err(QuotaExceeded {
                quota: Quota::ConcurrentCalls,
                limit: concurrent,
                retry_after: Duration::from_secs(1),
            });
        }
        let limit = self.calls_per_minute.load(Ordering::Acquire);
        if limit == UNLIMITED {
            return Ok(());
        }
        let mut bucket = lock(&self.calls);
        let bucket = bucket.get_or_insert_with(|| Bucket::full(limit));
        bucket
            .refill(limit, Instant::now())
            .map_err(|retry_after| QuotaExceeded {
                quota: Quota::CallsPerMinute,
                limit,
                retry_after,
            })
    }

    /// Counts a call against the principal's calls-per-minute quota in the shared
    /// counter ([`Quotas::share`]: the count every process given the same counter
    /// sees; one round trip), when there is one and the principal has that quota;
    /// nothing to do (no round trip) otherwise. The per-process bucket is apart
    /// ([`PrincipalQuota::begin_call`]).
    ///
    /// # Errors
    /// [`SharedRefusal::Exceeded`] when the principal's calls in this minute (across
    /// all processes) are used up; [`SharedRefusal::Unavailable`] when the counter
    /// cannot count (the call must then be refused: fail closed).
    pub async fn count_shared_call(&self) -> Result<(), SharedRefusal> {
        let limit = self.calls_per_minute.load(Ordering::Acquire);
        let Some(shared) = self.shared.as_ref().filter(|_| limit != UNLIMITED) else {
            return Ok(());
        };
        shared
            .count(&self.shared_key, Quota::CallsPerMinute, 1, limit)
            .await
    }

    /// Counts `bytes` about to be written by a file tool against the principal's
    /// bytes-written-per-day quota in the shared counter (the UTC day of the counter's
    /// clock, across every process), all or nothing, when there is one and the
    /// principal has that quota. The per-process count is apart
    /// ([`PrincipalQuota::charge_written`]).
    ///
    /// # Errors
    /// As [`PrincipalQuota::count_shared_call`]; then nothing is counted and the write
    /// must not happen.
    pub async fn charge_written_shared(&self, bytes: u64) -> Result<(), SharedRefusal> {
        let limit = self.bytes_written_per_day.load(Ordering::Acquire);
        let Some(shared) = self.shared.as_ref().filter(|_| limit != UNLIMITED) else {
            return Ok(());
        };
        shared
            .count(&self.shared_key, Quota::BytesWrittenPerDay, bytes, limit)
            .await
    }

    /// Whether the principal's outgoing HTTP requests are counted in a shared counter
    /// too (one is given and the principal has an `http_requests_per_minute` quota):
    /// then each request waits on [`PrincipalQuota::count_shared_http_request`].
    pub fn shares_http_requests(&self) -> bool {
        self.shared.is_some() && self.http_requests_per_minute.load(Ordering::Acquire) != UNLIMITED
    }

    /// Counts one outgoing HTTP request of a plugin against the principal's
    /// requests-per-minute quota in the shared counter (a fixed minute of the counter's
    /// clock, across every process; one round trip, awaited before the request is
    /// sent), when there is one and the principal has that quota. The per-process
    /// bucket is apart ([`PrincipalQuota::take_http_request`]).
    ///
    /// # Errors
    /// As [`PrincipalQuota::count_shared_call`]: the request must then not be sent
    /// (fail closed).
    pub async fn count_shared_http_request(&self) -> Result<(), SharedRefusal> {
        let limit = self.http_requests_per_minute.load(Ordering::Acquire);
        let Some(shared) = self.shared.as_ref().filter(|_| limit != UNLIMITED) else {
            return Ok(());
        };
        shared
            .count(&self.shared_key, Quota::HttpRequestsPerMinute, 1, limit)
            .await
    }

    /// The limits in force.
    pub fn limits(&self) -> QuotaLimits {
        let limit = |value: &AtomicU64| {
            let value = value.load(Ordering::Acquire);
            (value != UNLIMITED).then_some(value)
        };
        QuotaLimits {
            calls_per_minute: limit(&self.calls_per_minute),
            concurrent_calls: limit(&self.concurrent_calls),
            bytes_written_per_day: limit(&self.bytes_written_per_day),
            http_requests_per_minute: limit(&self.http_requests_per_minute),
        }
    }

    /// Starts a call: takes a calls-per-minute token and a concurrent-calls place
    /// (given back when the permit drops).
    ///
    /// # Errors
    /// [`QuotaExceeded`] naming the quota and when it frees up; nothing is taken.
    pub fn begin_call(self: &Arc<Self>) -> Result<CallPermit, QuotaExceeded> {
        let concurrent = self.concurrent_calls.load(Ordering::Acquire);
        let running = self.running.fetch_add(1, Ordering::AcqRel);
        let permit = CallPermit(Arc::clone(self));
        if concurrent != UNLIMITED && running >= concurrent {
            return Err(QuotaExceeded {
                quota: Quota::ConcurrentCalls,
                limit: concurrent,
                retry_after: Duration::from_secs(1),
            });
        }
        take(&self.calls, &self.calls_per_minute, Quota::CallsPerMinute)?;
        Ok(permit)
    }

    /// Starts a nested call (a code tool's call of another tool): a calls-per-minute
    /// token only, as it runs in its caller's concurrent-calls place (a principal
    /// allowed one call at a time can still run a code tool).
    ///
    /// # Errors
    /// [`QuotaExceeded`] ([`Quota::CallsPerMinute`]) when no token is left.
    pub fn begin_nested_call(&self) -> Result<(), QuotaExceeded> {
        take(&self.calls, &self.calls_per_minute, Quota::CallsPerMinute)
    }

    /// Counts one outgoing plugin HTTP request.
    ///
    /// # Errors
    /// [`QuotaExceeded`] ([`Quota::HttpRequestsPerMinute`]) when none is left.
    pub fn take_http_request(&self) -> Result<(), QuotaExceeded> {
        take(
            &self.http,
            &self.http_requests_per_minute,
            Quota::HttpRequestsPerMinute,
        )
    }

    /// Counts `bytes` about to be written by a file tool, all or nothing.
    ///
    /// # Errors
    /// [`QuotaExceeded`] ([`Quota::BytesWrittenPerDay`]) when they would go over the
    /// day's quota; then nothing is counted (and the write must not happen).
    pub fn charge_written(&self, bytes: u64) -> Result<(), QuotaExceeded> {
        let limit = self.bytes_written_per_day.load(Ordering::Acquire);
        if limit == UNLIMITED {
            return Ok(());
        }
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let today = since_epoch / 86_400;
        let mut written = lock(&self.written);
        if written.0 != today {
            *written = (today, 0);
        }
        let total = written.1.saturating_add(bytes);
        if total > limit {
            return Err(QuotaExceeded {
                quota: Quota::BytesWrittenPerDay,
                limit,
                retry_after: Duration::from_secs((today + 1) * 86_400 - since_epoch),
            });
        }
        written.1 = total;
        Ok(())
    }

    /// Records that policy `generation` gives it a profile (`allowed`) or none.
    pub(crate) fn stamp(&self, generation: u64, allowed: bool) {
        self.allowed.store(allowed, Ordering::Release);
        self.generation.store(generation, Ordering::Release);
    }

    /// Whether policy `generation` is the one stamped, and then whether it gives this
    /// principal a profile; `None` when stamped by another generation.
    pub(crate) fn allowed_at(&self, generation: u64) -> Option<bool> {
        (self.generation.load(Ordering::Acquire) == generation)
            .then(|| self.allowed.load(Ordering::Acquire))
    }

    /// Calls of this principal running now.
    pub fn running(&self) -> u64 {
        self.running.load(Ordering::Acquire)
    }

    /// Whether dropping it at `now` changes nothing: no call running, every
    /// per-minute bucket full again, nothing counted written on `today` (days since
    /// the epoch). Whoever holds it (a session, a call) is checked by the caller.
    fn idle(&self, now: Instant, today: u64) -> bool {
        let bucket_idle = |bucket: &Mutex<Option<Bucket>>, limit: &AtomicU64| {
            let limit = limit.load(Ordering::Acquire);
            limit == UNLIMITED || lock(bucket).as_ref().is_none_or(|b| b.full_at(limit, now))
        };
        let written = *lock(&self.written);
        self.running.load(Ordering::Acquire) == 0
            && bucket_idle(&self.calls, &self.calls_per_minute)
            && bucket_idle(&self.http, &self.http_requests_per_minute)
            && (written.1 == 0 || written.0 != today)
    }

    /// The principal it was made for (its scopes as first seen).
    fn principal(&self) -> Principal<'_> {
        Principal::new(self.client.as_deref(), &self.scopes).with_issuer(self.issuer.as_deref())
    }
}

/// A principal's binding as a shared counter's key: the first 128 bits of its SHA-256,
/// in hex (a binding can name a token's client; the shared store never sees it).
fn shared_key(binding: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(binding.as_bytes());
    digest[..16]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Why a quota counted in a shared counter refused a call.
#[derive(Debug, thiserror::Error)]
pub enum SharedRefusal {
    /// The principal's quota is used up across the processes.
    #[error(transparent)]
    Exceeded(QuotaExceeded),
    /// The counter could not count (the shared state server is unreachable, slow or
    /// broken): a call under that quota is refused rather than let through uncounted.
    #[error("the quota state server cannot count this principal's quota now ({0}); calls under a quota are refused until it is back, calls of principals without one still work")]
    Unavailable(#[source] crate::state::StateError),
}

/// The quotas counted across processes (`--state`, [`Quotas::share`]): a
/// [`QuotaCounter`] shared by every process, counting each principal's calls and
/// outgoing HTTP requests per minute in fixed one-minute windows of the counter's
/// clock, and its bytes written in UTC days (see [`crate::state::QuotaCounter`] for the
/// tolerance: at most the limit within a window, up to twice it across a window
/// boundary). The per-process quotas still apply too.
///
/// [`QuotaCounter`]: crate::state::QuotaCounter
#[derive(Debug, Clone)]
pub struct SharedQuotas(Arc<dyn crate::state::QuotaCounter>);

impl SharedQuotas {
    /// Quotas counted in `counter`.
    #[must_use]
    pub fn new(counter: Arc<dyn crate::state::QuotaCounter>) -> Self {
        Self(counter)
    }

    /// Counts `amount` of `quota` for the principal keyed `key` against `limit`.
    async fn count(
        &self,
        key: &str,
        quota: Quota,
        amount: u64,
        limit: u64,
    ) -> Result<(), SharedRefusal> {
        let window = match quota {
            Quota::BytesWrittenPerDay => crate::state::MAX_WINDOW,
            _ => Duration::from_secs(60),
        };
        // One key per principal and quota; `key` is already hashed.
        let name = format!("{key}:{}", quota.name());
        match self.0.count(&name, amount, limit, window).await {
            Ok(crate::state::Counted::Taken) => Ok(()),
            Ok(crate::state::Counted::Refused { retry_after }) => {
                Err(SharedRefusal::Exceeded(QuotaExceeded {
                    quota,
                    limit,
                    retry_after,
                }))
            }
            Err(err) => Err(SharedRefusal::Unavailable(err)),
        }
    }
}

/// Takes one token from `bucket`, sized by `limit`.
fn take(
    bucket: &Mutex<Option<Bucket>>,
    limit: &AtomicU64,
    quota: Quota,
) -> Result<(), QuotaExceeded> {
    let limit = limit.load(Ordering::Acquire);
    if limit == UNLIMITED {
        return Ok(());
    }
    let mut bucket = lock(bucket);
    let bucket = bucket.get_or_insert_with(|| Bucket::full(limit));
    bucket
        .refill(limit, Instant::now())
        .map_err(|retry_after| QuotaExceeded {
            quota,
            limit,
            retry_after,
        })?;
    bucket.tokens -= 1.0;
    Ok(())
}

/// How many shards the principals' map has.
const SHARDS: usize = 16;
/// A shard is not swept below this many states.
const MIN_SWEEP: usize = 64;
/// A full shard is swept again at most this often (a new principal refused meanwhile).
const FULL_SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Days since the epoch, UTC.
fn today() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        / 86_400
}

#[derive(Debug)]
struct Shard {
    map: HashMap<String, Arc<PrincipalQuota>>,
    /// Swept when it holds this many.
    next_sweep: usize,
    /// When it was last swept while full.
    full_sweep: Option<Instant>,
}

/// Every principal's quota state, in a sharded map: finding one takes a read lock on
/// one shard of 16, never a lock shared by all principals. Bounded (see the module
/// doc): at most [`MAX_PRINCIPALS`] states by default.
#[derive(Debug)]
pub struct Quotas {
    shards: Vec<RwLock<Shard>>,
    hasher: std::collections::hash_map::RandomState,
    max: usize,
    per_shard: usize,
    /// The counter the rate quotas are also counted in ([`Quotas::share`]).
    shared: std::sync::OnceLock<SharedQuotas>,
}

impl Default for Quotas {
    fn default() -> Self {
        Self::with_max(MAX_PRINCIPALS)
    }
}

impl Quotas {
    /// A map keeping at most `max` principals' states (rounded down to a multiple of
    /// its 16 shards, at least one per shard).
    pub fn with_max(max: usize) -> Self {
        let per_shard = (max / SHARDS).max(1);
        Self {
            shards: (0..SHARDS)
                .map(|_| {
                    RwLock::new(Shard {
                        map: HashMap::new(),
                        next_sweep: MIN_SWEEP.min(per_shard),
                        full_sweep: None,
                    })
                })
                .collect(),
            hasher: std::collections::hash_map::RandomState::new(),
            max: per_shard * SHARDS,
            per_shard,
            shared: std::sync::OnceLock::new(),
        }
    }

    /// Counts the principals' calls per minute, bytes written per day and outgoing
    /// HTTP requests per minute in `shared` too, so their limits hold across every process given the same counter
    /// (`--state`); set it before serving: only the states made after it count there.
    /// `false` (and nothing changes) when a counter was set already.
    pub fn share(&self, shared: SharedQuotas) -> bool {
        self.shared.set(shared).is_ok()
    }

    /// The shared counter, if any ([`Quotas::share`]).
    pub fn shared(&self) -> Option<&SharedQuotas> {
        self.shared.get()
    }

    fn shard(&self, key: &str) -> &RwLock<Shard> {
        let index = usize::try_from(self.hasher.hash_one(key) % SHARDS as u64).unwrap_or(0);
        &self.shards[index]
    }

    /// The state of `principal` (kept under [`Principal::key`]), made with `limits`
    /// if it has none yet.
    ///
    /// # Errors
    /// [`QuotasFull`] when it is new and the map is full of states within their
    /// windows.
    pub fn principal(
        &self,
        principal: &Principal<'_>,
        limits: &QuotaLimits,
    ) -> Result<Arc<PrincipalQuota>, QuotasFull> {
        self.principal_at(principal, limits, Instant::now())
    }

    /// [`Quotas::principal`], idleness judged at `now`.
    pub(crate) fn principal_at(
        &self,
        principal: &Principal<'_>,
        limits: &QuotaLimits,
        now: Instant,
    ) -> Result<Arc<PrincipalQuota>, QuotasFull> {
        let key = principal.key();
        let shard = self.shard(&key);
        if let Some(found) = shard
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .map
            .get(key.as_ref())
        {
            return Ok(Arc::clone(found));
        }
        let mut shard = shard.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = shard.map.get(key.as_ref()) {
            return Ok(Arc::clone(found));
        }
        if shard.map.len() >= shard.next_sweep {
            let full = shard.map.len() >= self.per_shard;
            let swept_lately = full
                && shard
                    .full_sweep
                    .is_some_and(|at| now.saturating_duration_since(at) < FULL_SWEEP_EVERY);
            if !swept_lately {
                let today = today();
                // Only the map holds it (no session, no call): dropping it is safe
                // when it is idle. Others cannot clone it meanwhile: the shard is
                // write-locked.
                shard
                    .map
                    .retain(|_, quota| Arc::strong_count(quota) > 1 || !quota.idle(now, today));
                shard.next_sweep = (shard.map.len() * 2).max(MIN_SWEEP).min(self.per_shard);
                shard.full_sweep = (shard.map.len() >= self.per_shard).then_some(now);
            }
            if shard.map.len() >= self.per_shard {
                return Err(QuotasFull { max: self.max });
            }
        }
        let quota = Arc::new(PrincipalQuota::new(
            limits,
            principal,
            self.shared.get().cloned(),
        ));
        shard.map.insert(key.into_owned(), Arc::clone(&quota));
        Ok(quota)
    }

    /// The state of `principal`, if it has one.
    pub fn get(&self, principal: &Principal<'_>) -> Option<Arc<PrincipalQuota>> {
        let key = principal.key();
        self.shard(&key)
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .map
            .get(key.as_ref())
            .map(Arc::clone)
    }

    /// How many principals' states it keeps now.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                shard
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .map
                    .len()
            })
            .sum()
    }

    /// Whether it keeps none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets every known principal's limits to what `limits_of` gives for it
    /// (`None`: no profile), stamped with policy `generation` (a reload).
    pub fn update(
        &self,
        generation: u64,
        limits_of: impl Fn(&Principal<'_>) -> Option<QuotaLimits>,
    ) {
        for shard in &self.shards {
            for quota in shard
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .map
                .values()
            {
                let limits = limits_of(&quota.principal());
                quota.set_limits(&limits.unwrap_or_default());
                quota.stamp(generation, limits.is_some());
            }
        }
    }
}
