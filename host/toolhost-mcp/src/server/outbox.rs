//! The response queue between the tool calls and the writer, bounded in bytes
//! ([`McpLimits::max_queued_bytes`](super::McpLimits::max_queued_bytes)), and the writer
//! that drains it into any `AsyncWrite`.

use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::session::{Counters, Message, Outlet};
use crate::ServeError;

/// The response queue: answers on their way to the writer, at most
/// [`McpLimits::max_queued_bytes`] of them. Every sender (the reader, each tool call)
/// waits for room before queueing.
#[derive(Clone)]
pub(super) struct Outbox {
    sender: mpsc::UnboundedSender<Answer>,
    /// Free bytes; closed when the writer failed, so no sender waits for it forever.
    pub(super) space: Arc<Semaphore>,
    capacity: usize,
    counters: Arc<Counters>,
}

/// One answer line in parts (a cached `tools/list` result is shared, not copied), holding
/// its room in the queue until it is written.
pub(super) struct Answer {
    parts: Vec<Bytes>,
    _room: Room,
}

struct Room {
    _permit: OwnedSemaphorePermit,
    bytes: usize,
    counters: Arc<Counters>,
}

impl Drop for Room {
    fn drop(&mut self) {
        self.counters
            .queued_bytes
            .fetch_sub(self.bytes, Ordering::SeqCst);
        self.counters.queued_answers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Outbox {
    pub(super) fn new(
        capacity: NonZeroUsize,
        counters: &Arc<Counters>,
    ) -> (Self, mpsc::UnboundedReceiver<Answer>) {
        let capacity = capacity.get().min(Semaphore::MAX_PERMITS);
        let (sender, receiver) = mpsc::unbounded_channel();
        let outbox = Self {
            sender,
            space: Arc::new(Semaphore::new(capacity)),
            capacity,
            counters: Arc::clone(counters),
        };
        (outbox, receiver)
    }

    /// Queues one message as a line.
    pub(super) async fn send_message(&self, message: Message) {
        let mut parts = message.parts().to_vec();
        parts.push(Bytes::from_static(b"\n"));
        self.queue(parts).await;
    }

    /// Queues one line if there is room now; drops it otherwise (progress and log lines
    /// must never hold up a call or the reading). Logs nothing: it runs inside the log
    /// layer.
    fn try_queue(&self, parts: Vec<Bytes>) -> bool {
        let bytes: usize = parts.iter().map(Bytes::len).sum();
        let permits = u32::try_from(bytes.clamp(1, self.capacity)).unwrap_or(u32::MAX);
        let Ok(permit) = Arc::clone(&self.space).try_acquire_many_owned(permits) else {
            return false;
        };
        self.queued(parts, permit, bytes)
    }

    /// Queues one line, waiting for room. An answer larger than the whole queue takes all
    /// of it: it waits for the queue to empty and then goes alone. Nothing is queued once
    /// the writer has failed (the session is over).
    async fn queue(&self, parts: Vec<Bytes>) {
        let bytes: usize = parts.iter().map(Bytes::len).sum();
        let permits = u32::try_from(bytes.clamp(1, self.capacity)).unwrap_or(u32::MAX);
        let permit = match Arc::clone(&self.space).try_acquire_many_owned(permits) {
            Ok(permit) => permit,
            Err(TryAcquireError::Closed) => return,
            Err(TryAcquireError::NoPermits) => {
                debug!(
                    queued_bytes = self.counters.queued_bytes.load(Ordering::SeqCst),
                    "response queue full: waiting for the client to read its answers"
                );
                match Arc::clone(&self.space).acquire_many_owned(permits).await {
                    Ok(permit) => permit,
                    Err(_closed) => return,
                }
            }
        };
        self.queued(parts, permit, bytes);
    }

    /// Puts a line that got its room into the queue; `false` once the writer is gone.
    fn queued(&self, parts: Vec<Bytes>, permit: OwnedSemaphorePermit, bytes: usize) -> bool {
        let queued = self
            .counters
            .queued_bytes
            .fetch_add(bytes, Ordering::SeqCst)
            + bytes;
        self.counters
            .peak_queued_bytes
            .fetch_max(queued, Ordering::SeqCst);
        self.counters.queued_answers.fetch_add(1, Ordering::SeqCst);
        let room = Room {
            _permit: permit,
            bytes,
            counters: Arc::clone(&self.counters),
        };
        // The receiver is gone only when the writer failed, which ends the session anyway.
        self.sender.send(Answer { parts, _room: room }).is_ok()
    }
}

impl Outlet for Outbox {
    fn send(&self, message: Message) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.send_message(message))
    }

    fn try_send(&self, message: Message) -> bool {
        let mut parts = message.parts().to_vec();
        parts.push(Bytes::from_static(b"\n"));
        self.try_queue(parts)
    }
}

pub(super) async fn write_loop<W: AsyncWrite + Unpin>(
    output: W,
    mut receiver: mpsc::UnboundedReceiver<Answer>,
    space: Arc<Semaphore>,
    failed: CancellationToken,
) -> Result<(), ServeError> {
    let mut output = BufWriter::new(output);
    while let Some(answer) = receiver.recv().await {
        // serde_json escapes control characters in strings, so an answer is one line.
        let written = async {
            for part in &answer.parts {
                output.write_all(part).await?;
            }
            // Flushed when no other answer waits: each goes out at once, and a burst
            // goes out in few writes.
            if receiver.is_empty() {
                output.flush().await?;
            }
            Ok(())
        };
        if let Err(err) = written.await {
            space.close();
            failed.cancel();
            return Err(ServeError::Write(err));
        }
        // Written (or in the writer's buffer): its room in the queue is free again.
        drop(answer);
    }
    output.flush().await.map_err(ServeError::Write)
}
