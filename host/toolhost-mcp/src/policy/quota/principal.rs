//! One principal's quota state ([`PrincipalQuota`]): its limits (changed in place on a
//! reload), its buckets, calls running and bytes written today, and the checks a call,
//! a nested call, a file write and an outgoing plugin request pass, in this process and,
//! with a shared counter, across processes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::bucket::{take, Bucket};
use super::shared::{shared_key, SharedQuotas, SharedRefusal};
use super::{lock, Quota, QuotaExceeded, QuotaLimits, UNLIMITED};
use crate::policy::Principal;

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

impl PrincipalQuota {
    pub(super) fn new(
        limits: &QuotaLimits,
        principal: &Principal<'_>,
        shared: Option<SharedQuotas>,
    ) -> Self {
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
    ///
    /// [`Quotas::share`]: super::Quotas::share
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
    pub(super) fn idle(&self, now: Instant, today: u64) -> bool {
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
    pub(super) fn principal(&self) -> Principal<'_> {
        Principal::new(self.client.as_deref(), &self.scopes).with_issuer(self.issuer.as_deref())
    }
}
