//! The process's stdin and stdout for [`McpServer::serve_stdio`](crate::McpServer::serve_stdio),
//! each served by a thread of its own.
//!
//! Tokio's `stdin()` and `stdout()` hand every read, write and flush to its blocking
//! pool: per answered call that is a task queued, a pool thread woken, and the runtime
//! woken again when it is done, three times over (read, write, flush). Here one thread
//! blocks in `read` and passes each chunk to the server as it comes, and one thread
//! writes the queued answers and flushes when no other waits: a call costs one wake-up
//! on each side (figure 9 of `scripts/bench`, docs/benchmarks.md).
//!
//! The threads keep the server's limits: the reader holds at most [`READ_AHEAD`] chunks
//! the server has not taken (then it stops reading and the client's pipe fills, as
//! before), and the writer frees an answer's room in the queue once it is written.
//! When the server stops on a write error, the reader may stay blocked in `read` until
//! stdin ends or the process exits, as tokio's blocking read did.

use std::io::{self, Read, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncBufRead, AsyncRead, ReadBuf};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio_util::sync::CancellationToken;

use super::server::Answer;
use super::ServeError;

/// The largest chunk one `read` of stdin takes.
const CHUNK_BYTES: usize = 64 * 1024;

/// Chunks read but not yet taken by the server: at most 16 × 64 KiB ahead of it.
const READ_AHEAD: usize = 16;

/// Stdin as the server reads it: chunks from the reader thread.
pub(crate) struct StdinChunks {
    chunks: mpsc::Receiver<io::Result<Bytes>>,
    current: Bytes,
    ended: bool,
}

/// Starts the thread that reads stdin.
///
/// # Errors
/// [`ServeError::Read`] when the thread cannot be started.
pub(crate) fn stdin() -> Result<StdinChunks, ServeError> {
    let (sender, chunks) = mpsc::channel(READ_AHEAD);
    std::thread::Builder::new()
        .name("mcp-stdin".into())
        .spawn(move || read_stdin(&sender))
        .map_err(ServeError::Read)?;
    Ok(StdinChunks {
        chunks,
        current: Bytes::new(),
        ended: false,
    })
}

fn read_stdin(sender: &mpsc::Sender<io::Result<Bytes>>) {
    let mut stdin = io::stdin().lock();
    let mut buffer = vec![0; CHUNK_BYTES];
    loop {
        let chunk = match stdin.read(&mut buffer) {
            Ok(0) => return,
            Ok(read) => Ok(Bytes::copy_from_slice(&buffer[..read])),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => Err(err),
        };
        let failed = chunk.is_err();
        // The server is gone (or has failed): nothing more to read for.
        if sender.blocking_send(chunk).is_err() || failed {
            return;
        }
    }
}

impl AsyncBufRead for StdinChunks {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let this = self.get_mut();
        while this.current.is_empty() && !this.ended {
            match std::task::ready!(this.chunks.poll_recv(cx)) {
                Some(Ok(chunk)) => this.current = chunk,
                Some(Err(err)) => {
                    this.ended = true;
                    return Poll::Ready(Err(err));
                }
                // The reader thread saw the end of stdin.
                None => this.ended = true,
            }
        }
        Poll::Ready(Ok(&this.current))
    }

    fn consume(self: Pin<&mut Self>, amount: usize) {
        let this = self.get_mut();
        let _ = this.current.split_to(amount.min(this.current.len()));
    }
}

impl AsyncRead for StdinChunks {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let available = std::task::ready!(self.as_mut().poll_fill_buf(cx))?;
        let amount = available.len().min(buf.remaining());
        buf.put_slice(&available[..amount]);
        self.consume(amount);
        Poll::Ready(Ok(()))
    }
}

/// Starts the thread that writes `answers` to stdout; what it returns resolves when the
/// queue is closed and everything is written (`Ok`), or at the first write error (then
/// `space` is closed and `failed` cancelled, as the async writer does).
///
/// # Errors
/// [`ServeError::Write`] when the thread cannot be started.
pub(crate) fn stdout(
    answers: mpsc::UnboundedReceiver<Answer>,
    space: Arc<Semaphore>,
    failed: CancellationToken,
) -> Result<oneshot::Receiver<Result<(), ServeError>>, ServeError> {
    let (done, written) = oneshot::channel();
    std::thread::Builder::new()
        .name("mcp-stdout".into())
        .spawn(move || {
            let outcome = write_stdout(answers);
            if outcome.is_err() {
                space.close();
                failed.cancel();
            }
            let _ = done.send(outcome);
        })
        .map_err(ServeError::Write)?;
    Ok(written)
}

fn write_stdout(mut answers: mpsc::UnboundedReceiver<Answer>) -> Result<(), ServeError> {
    // Stdout is locked per flush, not held: a stray `println!` elsewhere in the process
    // then waits its turn instead of waiting forever.
    let mut output = io::BufWriter::with_capacity(CHUNK_BYTES, io::stdout());
    while let Some(answer) = answers.blocking_recv() {
        for part in answer.parts() {
            output.write_all(part).map_err(ServeError::Write)?;
        }
        // Flushed when no other answer waits: each goes out at once, and a burst goes
        // out in few writes.
        if answers.is_empty() {
            output.flush().map_err(ServeError::Write)?;
        }
        // Written (or in the buffer): its room in the queue is free again.
        drop(answer);
    }
    output.flush().map_err(ServeError::Write)
}
