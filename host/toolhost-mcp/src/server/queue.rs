//! The tool calls read while [`McpLimits::max_in_flight`] calls run: a bounded FIFO
//! queue between the reader and the calls, so the reader keeps reading the messages that
//! need no call slot (a cancellation above all, a ping, `tools/list`) however long the
//! calls take. Only a full queue stops the reading of requests (the reader still reads
//! answers and notifications while the request that found no room waits).
//!
//! The reader starts a call itself when no call waits and a place is free
//! ([`CallQueue::try_start`]); otherwise it [`push`](CallQueue::push)es it, and the dispatcher
//! ([`CallQueue::dispatch`]) starts them in order as places free up. A call the client
//! cancels while it waits leaves the queue at once ([`CallQueue::prune`]) and never
//! runs; like a cancelled running call it is not answered.

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::session::{CallLimiter, CallSlot, Counters, Notifier, PendingCall, Reserved};

use super::{report_join, ReplyTo};
#[cfg(doc)]
use crate::limits::McpLimits;

/// The calls waiting for a place among the calls running, at most
/// [`McpLimits::max_queued_calls`] of them. Cheap to clone (shared).
#[derive(Clone)]
pub(super) struct CallQueue(Arc<Shared>);

struct Shared {
    waiting: Mutex<VecDeque<Waiting>>,
    /// One permit per place in the queue.
    places: Arc<Semaphore>,
    limit: usize,
    /// A call was queued, or the queue closed: the dispatcher looks again.
    ready: Notify,
    limiter: CallLimiter,
    /// No call comes any more (the input ended): the dispatcher ends once the queue is
    /// empty and its calls are done.
    closed: AtomicBool,
    counters: Arc<Counters>,
}

/// One queued call with what it holds: its place in the queue and the bytes it reserved.
struct Waiting {
    call: PendingCall,
    token: CancellationToken,
    reply_to: ReplyTo,
    reserved: Reserved,
    place: QueuePlace,
}

/// A call's place in the queue, counted in the stats while held.
struct QueuePlace {
    _permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
    counters: Arc<Counters>,
}

impl Drop for QueuePlace {
    fn drop(&mut self) {
        self.counters.calls_queued.fetch_sub(1, Ordering::SeqCst);
        self.counters
            .queued_call_bytes
            .fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

impl CallQueue {
    /// An empty queue of at most `limit` calls, which start as `limiter` gives them a
    /// place, counted in `counters`.
    pub(super) fn new(limit: NonZeroUsize, limiter: CallLimiter, counters: &Arc<Counters>) -> Self {
        let limit = limit.get().min(Semaphore::MAX_PERMITS);
        Self(Arc::new(Shared {
            waiting: Mutex::new(VecDeque::new()),
            places: Arc::new(Semaphore::new(limit)),
            limit,
            ready: Notify::new(),
            limiter,
            closed: AtomicBool::new(false),
            counters: Arc::clone(counters),
        }))
    }

    fn waiting(&self) -> MutexGuard<'_, VecDeque<Waiting>> {
        // Entries are only pushed, popped and removed whole: a poisoned lock leaves the
        // queue usable.
        self.0
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `call`, answered through `reply_to` once it has run. Waits while the queue
    /// is full, and while the calls running and queued hold the whole byte budget: that
    /// is the backpressure, and the reader reads nothing meanwhile.
    pub(super) async fn push(&self, call: PendingCall, reply_to: ReplyTo) {
        let places = &self.0.places;
        let permit = match Arc::clone(places).try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => {
                warn!(
                    limit = self.0.limit,
                    "tool call queue full: reading further messages stops until a queued call starts or is cancelled"
                );
                Arc::clone(places).acquire_owned().await.ok()
            }
        };
        let bytes = call.held_bytes();
        let reserved = self.0.limiter.reserve(bytes).await;
        let counters = &self.0.counters;
        let queued = counters.calls_queued.fetch_add(1, Ordering::SeqCst) + 1;
        counters
            .peak_calls_queued
            .fetch_max(queued, Ordering::SeqCst);
        counters
            .queued_call_bytes
            .fetch_add(bytes, Ordering::SeqCst);
        let place = QueuePlace {
            _permit: permit,
            bytes,
            counters: Arc::clone(counters),
        };
        let waiting = Waiting {
            token: call.cancellation(),
            call,
            reply_to,
            reserved,
            place,
        };
        self.waiting().push_back(waiting);
        self.0.ready.notify_one();
    }

    /// A slot for `call` now, when no call waits before it and one is free: the reader
    /// then starts it itself, without a round trip through the dispatcher task (a wake-up
    /// of another worker per call, which cost a sequential stdio call half its latency).
    /// `None` when the call must queue.
    pub(super) fn try_start(&self, call: &PendingCall) -> Option<CallSlot> {
        if !self.is_empty() {
            return None;
        }
        self.0.limiter.try_acquire(call.held_bytes()).ok()
    }

    /// Drops the queued calls the client cancelled: they never run, are not answered,
    /// and give their places and bytes back at once.
    pub(super) fn prune(&self) {
        let cancelled: VecDeque<Waiting> = {
            let mut waiting = self.waiting();
            if !waiting.iter().any(|entry| entry.token.is_cancelled()) {
                return;
            }
            let (cancelled, kept) = std::mem::take(&mut *waiting)
                .into_iter()
                .partition(|entry| entry.token.is_cancelled());
            *waiting = kept;
            cancelled
        };
        for entry in &cancelled {
            debug!(request = %entry.call.id(), "cancelled a queued tool call: it will not run");
        }
    }

    /// No call comes any more: the dispatcher runs what is queued, then ends.
    pub(super) fn close(&self) {
        self.0.closed.store(true, Ordering::SeqCst);
        self.0.ready.notify_one();
    }

    /// The oldest queued call that is not cancelled.
    fn pop(&self) -> Option<Waiting> {
        let mut waiting = self.waiting();
        while let Some(entry) = waiting.pop_front() {
            if !entry.token.is_cancelled() {
                return Some(entry);
            }
        }
        None
    }

    fn is_empty(&self) -> bool {
        self.waiting().is_empty()
    }

    /// Starts the queued calls in order, each once it has a place among the calls
    /// running, until the queue is closed and empty; then waits for the calls it started.
    /// Each call keeps its slot until its answer is handed on. Messages about a call go
    /// through `notifier`.
    pub(super) async fn dispatch(self, notifier: Notifier) {
        let limiter = self.0.limiter.clone();
        let mut calls = JoinSet::new();
        loop {
            while self.is_empty() {
                if self.0.closed.load(Ordering::SeqCst) && self.is_empty() {
                    while let Some(joined) = calls.join_next().await {
                        report_join(joined);
                    }
                    return;
                }
                tokio::select! {
                    () = self.0.ready.notified() => {}
                    Some(joined) = calls.join_next() => report_join(joined),
                }
            }
            let place = loop {
                tokio::select! {
                    place = limiter.place() => break place,
                    Some(joined) = calls.join_next() => report_join(joined),
                }
            };
            // Cancelled meanwhile: the place goes back, and the loop waits again.
            let Some(waiting) = self.pop() else { continue };
            let Waiting {
                call,
                reply_to,
                reserved,
                place: queued,
                ..
            } = waiting;
            // It leaves the queue: its place there is free for the reader.
            drop(queued);
            let slot = limiter.occupy(place, reserved);
            spawn_call(&mut calls, call, slot, notifier.clone(), reply_to);
        }
    }
}

/// Starts [`run_call`] as a task of `tasks`, its future boxed. The call's whole dispatch
/// (the registry, the plugin runtime, wasmtime's instantiation and call) is nested in
/// that future by value, several kilobytes, and a spawned future is moved by value into
/// its task's cell and its stage is rewritten when it ends: boxed, the task holds a
/// pointer, and the future is written once, into its box (callgrind: about 5,000
/// instructions a call fewer, most of them `memcpy`).
pub(super) fn spawn_call(
    tasks: &mut JoinSet<()>,
    call: PendingCall,
    slot: CallSlot,
    notifier: Notifier,
    reply_to: ReplyTo,
) {
    tasks.spawn(Box::pin(run_call(call, slot, notifier, reply_to)));
}

/// Runs `call` in `slot` and answers through `reply_to`. The slot is given back when the
/// call ends, after its answer is queued.
async fn run_call(call: PendingCall, slot: CallSlot, notifier: Notifier, reply_to: ReplyTo) {
    let reply = call.run(&slot, notifier).await;
    reply_to.reply(reply).await;
    drop(slot);
}
