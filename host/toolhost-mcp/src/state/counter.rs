//! Quota counters several server processes share: [`QuotaCounter`] counts what a
//! principal used in a **fixed window** (a minute, a UTC day) so its limit holds across
//! every process given the same counter (`--state`: Redis), not once per process.
//!
//! A window starts at a multiple of its length since the Unix epoch (for Redis, in the
//! server's clock, so the processes' clocks need not agree). Counting is all or
//! nothing: an amount that would take the window past its limit is refused and not
//! counted. Within one window at most `limit` is ever taken, whatever the number of
//! processes; across a window boundary a principal can use up to twice its limit in
//! any span of one window's length (the end of one window and the start of the next):
//! the tolerance a fixed window trades for one round trip per count and one key per
//! principal and quota.
//!
//! ```
//! use std::time::Duration;
//! use toolhost_mcp::state::{Counted, MemoryBackend, QuotaCounter};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let counter = MemoryBackend::new(1 << 20);
//! let minute = Duration::from_secs(60);
//! // Two calls a minute for this principal: the third in the same minute is refused.
//! assert_eq!(counter.count("p1:calls", 1, 2, minute).await?, Counted::Taken);
//! assert_eq!(counter.count("p1:calls", 1, 2, minute).await?, Counted::Taken);
//! let Counted::Refused { retry_after } = counter.count("p1:calls", 1, 2, minute).await?
//! else {
//!     panic!("a third call within the minute")
//! };
//! assert!(retry_after <= minute);
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use super::{millis, now_ms, BoxFuture, MemoryBackend, StateError};

/// The longest window a counter keeps: one day (the bytes-written quota's).
pub const MAX_WINDOW: Duration = Duration::from_secs(86_400);

/// How a count went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Counted: within the limit.
    Taken,
    /// Not counted: it would take the window past its limit; the window ends in
    /// `retry_after` (at least 1 ms).
    Refused {
        /// Until the window ends.
        retry_after: Duration,
    },
}

/// Quota counts shared by processes (fixed windows; see the module doc). Every
/// method is bounded in time as [`super::TaskBackend`]'s are and fails with a
/// [`StateError`] rather than wait: a caller limited by a shared quota is then refused
/// (fail closed), never let through uncounted.
pub trait QuotaCounter: Send + Sync + std::fmt::Debug {
    /// Counts `amount` against `key` in the current window of length `window` (1 ms to
    /// [`MAX_WINDOW`], clamped), all or nothing, when the window's total stays at most
    /// `limit`. Each window's count is forgotten after the window ends (a key never
    /// outlives two windows).
    fn count<'a>(
        &'a self,
        key: &'a str,
        amount: u64,
        limit: u64,
        window: Duration,
    ) -> BoxFuture<'a, Result<Counted, StateError>>;
}

/// A window's length in ms, within 1 ms and [`MAX_WINDOW`].
pub(crate) fn window_ms(window: Duration) -> u64 {
    millis(window.clamp(Duration::from_millis(1), MAX_WINDOW))
}

/// The in-process windows: key -> (window index, count).
pub(crate) type Windows = std::collections::HashMap<String, (u64, u64)>;

/// A map of windows is swept of ended ones when it holds this many more than after its
/// last sweep.
const SWEEP_EVERY: usize = 1024;

impl QuotaCounter for MemoryBackend {
    fn count<'a>(
        &'a self,
        key: &'a str,
        amount: u64,
        limit: u64,
        window: Duration,
    ) -> BoxFuture<'a, Result<Counted, StateError>> {
        Box::pin(async move { Ok(self.count_at(key, amount, limit, window, now_ms())) })
    }
}

impl MemoryBackend {
    /// [`QuotaCounter::count`] at `now` (ms since the epoch).
    pub(crate) fn count_at(
        &self,
        key: &str,
        amount: u64,
        limit: u64,
        window: Duration,
        now: u64,
    ) -> Counted {
        let window = window_ms(window);
        let index = now / window;
        let mut counts = self.lock_counts();
        let (windows, swept_at) = &mut *counts;
        if windows.len() >= swept_at.saturating_add(SWEEP_EVERY) {
            // Keyed by the window they count in; an ended one changes nothing.
            windows.retain(|_, (at, _)| *at >= index);
            *swept_at = windows.len();
        }
        let (at, used) = windows.entry(key.to_owned()).or_insert((index, 0));
        if *at != index {
            *at = index;
            *used = 0;
        }
        let total = used.saturating_add(amount);
        if total > limit {
            return Counted::Refused {
                retry_after: Duration::from_millis(((index + 1) * window).saturating_sub(now)),
            };
        }
        *used = total;
        Counted::Taken
    }
}
