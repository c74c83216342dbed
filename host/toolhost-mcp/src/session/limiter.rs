//! What the calls in flight may hold ([`CallLimiter`], [`CallSlot`]), counted in the
//! server's [`Counters`](crate::counters::Counters).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tracing::{debug, info};

use crate::counters::Counters;
use crate::limits::McpLimits;

use super::LOG_TARGET;

/// What the calls in flight may hold: [`McpLimits::max_in_flight`] places and
/// [`McpLimits::max_in_flight_bytes`] of arguments (and ids and tool names). Share one
/// among the sessions whose calls it bounds together. Never closed: acquiring only waits.
#[derive(Debug, Clone)]
pub(crate) struct CallLimiter {
    calls: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    bytes_capacity: usize,
    limits: McpLimits,
    counters: Arc<Counters>,
}

/// Why [`CallLimiter::try_acquire`] gave no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum Busy {
    /// As many calls as allowed are running.
    #[error("{limit} tool calls are running, the most allowed at once; retry when one ends")]
    Calls {
        /// The limit, [`McpLimits::max_in_flight`].
        limit: usize,
    },
    /// The calls running hold too many bytes of arguments for these to fit.
    #[error("the tool calls running hold too much argument data ({limit} bytes at most) for {wanted} more bytes; retry when one ends")]
    Bytes {
        /// The limit, [`McpLimits::max_in_flight_bytes`].
        limit: usize,
        /// The arguments' size.
        wanted: usize,
    },
}

impl CallLimiter {
    #[cfg(test)]
    /// A limiter for `limits`' in-flight counts, with its own counters.
    pub(crate) fn new(limits: &McpLimits) -> Self {
        Self::with_counters(limits, Arc::default())
    }

    pub(crate) fn with_counters(limits: &McpLimits, counters: Arc<Counters>) -> Self {
        let bytes_capacity = limits.max_in_flight_bytes.get().min(Semaphore::MAX_PERMITS);
        Self {
            calls: Arc::new(Semaphore::new(
                limits.max_in_flight.get().min(Semaphore::MAX_PERMITS),
            )),
            bytes: Arc::new(Semaphore::new(bytes_capacity)),
            bytes_capacity,
            limits: *limits,
            counters,
        }
    }

    fn wanted(&self, bytes: usize) -> u32 {
        u32::try_from(bytes.clamp(1, self.bytes_capacity)).unwrap_or(u32::MAX)
    }

    /// Room for the `bytes` a call holds (see [`PendingCall::held_bytes`](super::PendingCall::held_bytes))
    /// in what [`McpLimits::max_in_flight_bytes`] leaves, waiting until calls end when
    /// they do not fit. More than the whole budget waits until no other call holds any,
    /// then goes alone. A transport that queues calls reserves their bytes as it reads
    /// them, so the calls waiting in its queue count as well as the ones running.
    pub(crate) async fn reserve(&self, bytes: usize) -> Reserved {
        let wanted = self.wanted(bytes);
        let permit = match Arc::clone(&self.bytes).try_acquire_many_owned(wanted) {
            Ok(permit) => Some(permit),
            Err(TryAcquireError::NoPermits | TryAcquireError::Closed) => {
                info!(
                    target: LOG_TARGET,
                    limit = self.limits.max_in_flight_bytes,
                    bytes,
                    "tool calls running and queued hold the in-flight byte limit: reading further messages waits until calls end"
                );
                Arc::clone(&self.bytes)
                    .acquire_many_owned(wanted)
                    .await
                    .ok()
            }
        };
        Reserved { permit, bytes }
    }

    /// A place among the [`McpLimits::max_in_flight`] calls running, waiting until one
    /// ends when they are all taken.
    pub(crate) async fn place(&self) -> Place {
        match Arc::clone(&self.calls).try_acquire_owned() {
            Ok(permit) => Place(Some(permit)),
            Err(TryAcquireError::NoPermits | TryAcquireError::Closed) => {
                debug!(
                    target: LOG_TARGET,
                    limit = self.limits.max_in_flight,
                    "tool calls at the in-flight limit: the next queued call waits until one ends"
                );
                Place(Arc::clone(&self.calls).acquire_owned().await.ok())
            }
        }
    }

    /// The slot of a call that has its `place` and its `reserved` bytes.
    pub(crate) fn occupy(&self, place: Place, reserved: Reserved) -> CallSlot {
        self.slot(place.0, reserved.permit, reserved.bytes)
    }

    /// A place for one more call, now or never: for transports that refuse work over the
    /// limit instead of waiting.
    ///
    /// # Errors
    /// [`Busy`] naming the limit that is reached.
    pub(crate) fn try_acquire(&self, bytes: usize) -> Result<CallSlot, Busy> {
        let permit = Arc::clone(&self.calls)
            .try_acquire_owned()
            .map_err(|_| Busy::Calls {
                limit: self.limits.max_in_flight.get(),
            })?;
        let bytes_permit = Arc::clone(&self.bytes)
            .try_acquire_many_owned(self.wanted(bytes))
            .map_err(|_| Busy::Bytes {
                limit: self.limits.max_in_flight_bytes.get(),
                wanted: bytes,
            })?;
        Ok(self.slot(Some(permit), Some(bytes_permit), bytes))
    }

    fn slot(
        &self,
        permit: Option<OwnedSemaphorePermit>,
        bytes_permit: Option<OwnedSemaphorePermit>,
        bytes: usize,
    ) -> CallSlot {
        let c = &self.counters;
        let now = c.calls_running.fetch_add(1, Ordering::SeqCst) + 1;
        c.peak_calls_running.fetch_max(now, Ordering::SeqCst);
        c.call_argument_bytes.fetch_add(bytes, Ordering::SeqCst);
        CallSlot {
            _permits: (permit, bytes_permit),
            bytes,
            counters: Arc::clone(&self.counters),
        }
    }
}

/// Room in the byte budget for one call ([`CallLimiter::reserve`]), given back when dropped
/// (or handed on to the call's [`CallSlot`]).
#[derive(Debug)]
pub(crate) struct Reserved {
    /// `None` only if the semaphore was closed, which it never is.
    permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
}

/// A place among the calls running ([`CallLimiter::place`]), given back when dropped
/// (or handed on to the call's [`CallSlot`]).
#[derive(Debug)]
pub(crate) struct Place(Option<OwnedSemaphorePermit>);

/// One tool call's place among the calls in flight, given back when dropped.
pub(crate) struct CallSlot {
    /// A place and its arguments' bytes (`None` only if the semaphores were closed,
    /// which they never are).
    _permits: (Option<OwnedSemaphorePermit>, Option<OwnedSemaphorePermit>),
    bytes: usize,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for CallSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallSlot")
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl Drop for CallSlot {
    fn drop(&mut self) {
        self.counters.calls_running.fetch_sub(1, Ordering::SeqCst);
        self.counters
            .call_argument_bytes
            .fetch_sub(self.bytes, Ordering::SeqCst);
    }
}
