//! The walk budget: how many file walks (`list_files`, `glob`, `grep`) run at once, for
//! every registry of the process together.
//!
//! A walk reads a directory tree, and grep reads the files in it too: on a large tree it
//! takes seconds of disk and CPU and its listing takes memory. Calls arrive faster than
//! that when a client fires many at once, so each walk first takes one of the budget's
//! walkers ([`WalkBudget::walkers`], by default as many as the machine has cores, at
//! least 2). When every walker is busy the call waits, in arrival order, for at most
//! [`WalkBudget::max_wait`] (default 5 s); at most [`WalkBudget::max_waiting`] calls wait
//! (default 4 per walker). A call that finds the queue full, or waits its whole time
//! without a walker, is answered at once with [`ToolError::LimitExceeded`] and
//! [`Limit::ConcurrentWalks`] ("the host is running N file walks ...; retry in a few
//! seconds"): it holds no memory and no thread while it waits, and none once answered.
//!
//! A walker is held by the thread that walks, not by the call: it comes back when that
//! thread stops. The walk stops between two files once its call expires, is cancelled,
//! or is dropped (the registry answered it with a time-out, or its caller went away), so
//! a call answered early leaves no walk behind that would keep its walker and memory.
//!
//! [`WalkBudget::shared`] is the process-wide budget [`VfsToolOptions`](super::VfsToolOptions)
//! uses by default, so every registry of the process shares it; an embedder passes its
//! own [`WalkBudget`] to give a registry a budget of its own.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::registry::{format_duration, Limit, ToolError};

/// How long a call waits for a walker by default before it is refused: 5 s.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(5);

/// How many calls may wait per walker by default: 4.
pub const DEFAULT_WAITING_PER_WALKER: usize = 4;

/// How many file walks run at once, and how many calls may wait for one. See the
/// [module docs](self).
///
/// ```
/// use std::time::Duration;
/// use toolhost::tools::WalkBudget;
///
/// let budget = WalkBudget::new(2, 8, Duration::from_secs(5));
/// assert_eq!((budget.walkers(), budget.max_waiting()), (2, 8));
/// assert_eq!((budget.walking(), budget.waiting()), (0, 0));
/// assert!(WalkBudget::default().walkers() >= 2);
/// ```
#[derive(Debug)]
pub struct WalkBudget {
    walkers: usize,
    max_waiting: usize,
    max_wait: Duration,
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    walking: AtomicUsize,
    peak: AtomicUsize,
}

impl Default for WalkBudget {
    /// [`WalkBudget::default_walkers`] walkers, [`DEFAULT_WAITING_PER_WALKER`] waiting
    /// calls per walker, [`DEFAULT_MAX_WAIT`].
    fn default() -> Self {
        let walkers = Self::default_walkers();
        Self::new(
            walkers,
            walkers.saturating_mul(DEFAULT_WAITING_PER_WALKER),
            DEFAULT_MAX_WAIT,
        )
    }
}

impl WalkBudget {
    /// A budget of `walkers` walks at once (at least 1, at most
    /// [`Semaphore::MAX_PERMITS`]), with at most `max_waiting` calls waiting for one
    /// (0: a call that finds every walker busy is refused at once) for at most `max_wait`
    /// each.
    pub fn new(walkers: usize, max_waiting: usize, max_wait: Duration) -> Self {
        let walkers = walkers.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            walkers,
            max_waiting,
            max_wait,
            permits: Arc::new(Semaphore::new(walkers)),
            waiting: AtomicUsize::new(0),
            walking: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    /// The default number of walkers: the machine's parallelism
    /// ([`std::thread::available_parallelism`]), at least 2.
    pub fn default_walkers() -> usize {
        std::thread::available_parallelism()
            .map_or(2, std::num::NonZeroUsize::get)
            .max(2)
    }

    /// The process-wide budget, with the [default](WalkBudget::default) settings: what
    /// [`VfsToolOptions::new`](super::VfsToolOptions::new) gives every registry.
    pub fn shared() -> Arc<WalkBudget> {
        static SHARED: OnceLock<Arc<WalkBudget>> = OnceLock::new();
        Arc::clone(SHARED.get_or_init(|| Arc::new(WalkBudget::default())))
    }

    /// Walks that may run at once.
    pub fn walkers(&self) -> usize {
        self.walkers
    }

    /// Calls that may wait for a walker at once.
    pub fn max_waiting(&self) -> usize {
        self.max_waiting
    }

    /// How long one call waits for a walker before it is refused.
    pub fn max_wait(&self) -> Duration {
        self.max_wait
    }

    /// Walks running now (their threads have not stopped yet).
    pub fn walking(&self) -> usize {
        self.walking.load(Ordering::SeqCst)
    }

    /// Calls waiting for a walker now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// The most walks that have run at once since the budget was made.
    pub fn peak_walking(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// A walker for one call of `tool`: at once when one is free; otherwise after a wait
    /// in arrival order, if the queue has room.
    ///
    /// # Errors
    /// [`ToolError::LimitExceeded`] with [`Limit::ConcurrentWalks`] when the queue is
    /// full or no walker came free within [`max_wait`](WalkBudget::max_wait).
    pub(crate) async fn admit(self: &Arc<Self>, tool: &str) -> Result<WalkPermit, ToolError> {
        if let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() {
            return Ok(self.permit(permit));
        }
        let ahead = self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        if ahead >= self.max_waiting {
            return Err(self.busy(
                tool,
                format!(
                    "and {} more calls are waiting for one, so this call was not started",
                    self.max_waiting
                ),
            ));
        }
        match tokio::time::timeout(self.max_wait, Arc::clone(&self.permits).acquire_owned()).await {
            Ok(Ok(permit)) => Ok(self.permit(permit)),
            // The semaphore is never closed; a wait that ran out is the same refusal.
            Ok(Err(_)) | Err(_) => Err(self.busy(
                tool,
                format!(
                    "and this call waited {} without one coming free, so it was not started",
                    format_duration(self.max_wait)
                ),
            )),
        }
    }

    fn permit(self: &Arc<Self>, permit: OwnedSemaphorePermit) -> WalkPermit {
        let now = self.walking.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        WalkPermit {
            budget: Arc::clone(self),
            _permit: permit,
        }
    }

    fn busy(&self, tool: &str, what: String) -> ToolError {
        let walkers = self.walkers;
        ToolError::LimitExceeded {
            tool: tool.to_owned(),
            limit: Limit::ConcurrentWalks {
                walkers: walkers as u64,
            },
            message: format!(
                "the host is running {walkers} file walks (list_files, glob, grep) at once {what}; retry in a few seconds, or call fewer of these tools at a time"
            ),
        }
    }
}

/// One walker of a [`WalkBudget`], held by the thread that walks until it stops.
pub(crate) struct WalkPermit {
    budget: Arc<WalkBudget>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for WalkPermit {
    fn drop(&mut self) {
        // Before the semaphore's permit goes back (fields drop after this), so `walking`
        // never counts more than the walkers.
        self.budget.walking.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A place in the wait queue, given back when the wait ends (or its call is dropped).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests;
