//! The quotas counted across processes (`--state`): [`SharedQuotas`] over a
//! [`QuotaCounter`](crate::state::QuotaCounter) every process shares, the principal's
//! key in it hashed, and [`SharedRefusal`] when it refuses or cannot count.

use std::sync::Arc;
use std::time::Duration;

use super::{Quota, QuotaExceeded};

/// A principal's binding as a shared counter's key: the first 128 bits of its SHA-256,
/// in hex (a binding can name a token's client; the shared store never sees it).
pub(super) fn shared_key(binding: &str) -> String {
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
/// [`Quotas::share`]: super::Quotas::share
#[derive(Debug, Clone)]
pub struct SharedQuotas(Arc<dyn crate::state::QuotaCounter>);

impl SharedQuotas {
    /// Quotas counted in `counter`.
    #[must_use]
    pub fn new(counter: Arc<dyn crate::state::QuotaCounter>) -> Self {
        Self(counter)
    }

    /// Counts `amount` of `quota` for the principal keyed `key` against `limit`.
    pub(super) async fn count(
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
