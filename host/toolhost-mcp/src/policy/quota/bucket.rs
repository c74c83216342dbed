//! The per-minute quotas' token buckets: `limit` tokens, refilled evenly at `limit` per
//! minute; a call or a request takes one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{lock, Quota, QuotaExceeded, UNLIMITED};

/// A token bucket holding up to `limit` tokens, refilled at `limit` per minute.
#[derive(Debug)]
pub(super) struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// Whether it has refilled to `limit` by `now` (dropping it would change nothing).
    pub(super) fn full_at(&self, limit: u64, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens + elapsed * (limit as f64 / 60.0) >= limit as f64
    }

    pub(super) fn full(limit: u64) -> Self {
        Self {
            tokens: limit as f64,
            at: Instant::now(),
        }
    }

    /// Refills to now; whether a token is there, and when one will be if not.
    pub(super) fn refill(&mut self, limit: u64, now: Instant) -> Result<(), Duration> {
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

/// Takes one token from `bucket`, sized by `limit`.
pub(super) fn take(
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
