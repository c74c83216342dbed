//! [`Capture`]: a plugin's stdout or stderr, kept in memory up to a cap.
//!
//! wasmtime-wasi's `MemoryOutputPipe` refuses writes past its capacity, which makes a
//! Rust guest's `eprintln!` panic, so a chatty plugin would crash and its panic message
//! would be lost. A `Capture` instead accepts every write and keeps the *last* `cap`
//! bytes (a panic message is written last), counting what it dropped.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// How much a guest may write in one go before it checks again; writes are accepted
/// whatever the size, this only shapes the guest's buffering.
const WRITE_PERMIT: usize = 64 * 1024;

/// A bounded, shared capture buffer; clones share the buffer.
#[derive(Debug, Clone)]
pub(crate) struct Capture {
    inner: Arc<Mutex<Buffer>>,
}

#[derive(Debug)]
struct Buffer {
    cap: usize,
    bytes: VecDeque<u8>,
    total: u64,
}

/// What a call wrote to one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Captured {
    /// The last bytes written, as text (invalid UTF-8 replaced).
    pub text: String,
    /// Bytes written before those, which were dropped.
    pub dropped: u64,
}

impl Captured {
    /// The last `max_lines` non-empty lines, at most `max_bytes` long in total (cut at a
    /// character boundary from the front), joined with `" | "`.
    pub(crate) fn tail(&self, max_lines: usize, max_bytes: usize) -> String {
        let lines: Vec<&str> = self
            .text
            .lines()
            .map(str::trim_end)
            .filter(|line| !line.is_empty())
            .collect();
        let start = lines.len().saturating_sub(max_lines);
        let joined = lines[start..].join(" | ");
        if joined.len() <= max_bytes {
            return joined;
        }
        format!(
            "…{}",
            &joined[joined.ceil_char_boundary(joined.len() - max_bytes)..]
        )
    }
}

impl Capture {
    /// An empty capture keeping at most `cap` bytes.
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Buffer {
                cap,
                bytes: VecDeque::new(),
                total: 0,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Buffer> {
        // The buffer is consistent after every statement; a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `data`, dropping the oldest bytes beyond the cap.
    pub(crate) fn push(&self, data: &[u8]) {
        let mut buffer = self.lock();
        buffer.total += data.len() as u64;
        let cap = buffer.cap;
        let data = &data[data.len().saturating_sub(cap)..];
        buffer.bytes.extend(data);
        let excess = buffer.bytes.len().saturating_sub(cap);
        buffer.bytes.drain(..excess);
    }

    /// Takes what was written so far and empties the buffer.
    pub(crate) fn take(&self) -> Captured {
        let mut buffer = self.lock();
        let kept = buffer.bytes.len() as u64;
        let dropped = buffer.total - kept;
        let bytes: Vec<u8> = buffer.bytes.drain(..).collect();
        buffer.total = 0;
        Captured {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            dropped,
        }
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Capture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Capture {
    async fn ready(&mut self) {}
}

#[wasmtime_wasi::async_trait]
impl OutputStream for Capture {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_bytes_and_counts_the_dropped() {
        let capture = Capture::new(8);
        capture.push(b"hello ");
        capture.push(b"world!");
        let captured = capture.take();
        assert_eq!(captured.text, "o world!");
        assert_eq!(captured.dropped, 4);
        capture.push(b"0123456789abcdef");
        assert_eq!(
            capture.take(),
            Captured {
                text: "89abcdef".into(),
                dropped: 8
            }
        );
        assert_eq!(capture.take(), Captured::default());
    }

    #[test]
    fn tail_keeps_the_last_lines_within_bytes() {
        let captured = Captured {
            text: "one\n\ntwo\nthree\n".into(),
            dropped: 0,
        };
        assert_eq!(captured.tail(2, 100), "two | three");
        assert_eq!(captured.tail(5, 100), "one | two | three");
        assert_eq!(captured.tail(5, 7), "…| three");
        let wide = Captured {
            text: "ééé".into(),
            dropped: 0,
        };
        assert_eq!(wide.tail(1, 3), "…é");
    }

    #[test]
    fn writes_are_never_refused() {
        let mut capture = Capture::new(4);
        for _ in 0..10 {
            assert_eq!(capture.check_write().unwrap(), WRITE_PERMIT);
            OutputStream::write(&mut capture, Bytes::from_static(b"abc")).unwrap();
        }
        assert_eq!(capture.take().text, "cabc");
    }
}
