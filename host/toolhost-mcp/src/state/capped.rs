//! A bound on how much one Redis reply may take: [`Capped`] wraps the connection's
//! stream and follows the RESP framing of what it reads (a small state machine, no
//! copy), failing the read as soon as one reply (everything under one top-level value)
//! passes its byte bound, or announces more elements or bytes than that bound could
//! hold. The client's parser buffers a reply until it is whole; a hostile server
//! announcing a 1 GiB bulk string and streaming it would otherwise grow that buffer
//! until the operation's time ran out. Cut here, the buffer stays within the bound.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest header line (`$123\r\n`, `*4\r\n`): a number fits in far fewer bytes.
const MAX_HEADER: usize = 32;

/// Where the scanner is in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// At the first byte of a value.
    Start,
    /// In a simple line (`+`, `-`, `:`, `,`, `#`, `_`, `(`, or what is not RESP) until
    /// its `\r\n`.
    Line,
    /// In a header line (`$`, `!`, `=`, `*`, `%`, `~`, `>`, `|`) whose number is read.
    Header(u8),
    /// In a bulk payload: this many bytes left, its `\r\n` included.
    Bulk(u64),
}

/// The RESP framing of a stream read so far, and the size of the reply in progress.
#[derive(Debug)]
pub(crate) struct Framing {
    max_reply: u64,
    scan: Scan,
    /// The header line read so far (its number).
    header: Vec<u8>,
    /// For each open aggregate, how many values it still holds.
    open: Vec<u64>,
    /// Bytes of the reply in progress.
    reply: u64,
    /// Whether the previous byte of a line was `\r`.
    cr: bool,
}

/// What every refusal's message starts with (how the backend tells it from a broken
/// connection).
pub(crate) const REFUSED: &str = "reply refused: ";

/// Why a stream was cut.
fn refused(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{REFUSED}{what}"))
}

impl Framing {
    /// A scanner allowing replies of at most `max_reply` bytes.
    pub(crate) fn new(max_reply: u64) -> Self {
        Framing {
            max_reply,
            scan: Scan::Start,
            header: Vec::with_capacity(MAX_HEADER),
            open: Vec::new(),
            reply: 0,
            cr: false,
        }
    }

    /// One value ended: the aggregates it closes end too; at the top, the reply ends.
    fn value_done(&mut self) {
        self.scan = Scan::Start;
        while let Some(left) = self.open.last_mut() {
            *left = left.saturating_sub(1);
            if *left > 0 {
                return;
            }
            self.open.pop();
        }
        self.reply = 0;
    }

    /// A header line's number read: what follows it.
    fn header_done(&mut self, kind: u8) -> io::Result<()> {
        let text = std::str::from_utf8(&self.header).unwrap_or("");
        let number: i64 = text
            .parse()
            .map_err(|_| refused(format!("a reply's length {text:?} is not a number")))?;
        self.header.clear();
        let Ok(count) = u64::try_from(number) else {
            // -1: a null bulk string or array, a whole value.
            self.value_done();
            return Ok(());
        };
        match kind {
            b'$' | b'!' | b'=' => {
                if count > self.max_reply {
                    return Err(refused(format!(
                        "a reply announces {count} bytes, more than the {} allowed",
                        self.max_reply
                    )));
                }
                self.scan = Scan::Bulk(count + 2);
            }
            _ => {
                // Maps and attributes hold key and value; an attribute the value after it.
                let values = match kind {
                    b'%' => count.saturating_mul(2),
                    b'|' => count.saturating_mul(2).saturating_add(1),
                    _ => count,
                };
                // Each value takes at least 3 bytes (`_\r\n`).
                if values > self.max_reply / 3 {
                    return Err(refused(format!(
                        "a reply announces {values} values, more than {} bytes can hold",
                        self.max_reply
                    )));
                }
                if values == 0 {
                    self.value_done();
                } else {
                    self.open.push(values);
                    self.scan = Scan::Start;
                }
            }
        }
        Ok(())
    }

    /// Follows `bytes`, just read.
    ///
    /// # Errors
    /// `InvalidData` when a reply passes the bound or is not RESP.
    pub(crate) fn scan(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut at = 0;
        while at < bytes.len() {
            match self.scan {
                Scan::Bulk(left) => {
                    let take = usize::try_from(left)
                        .unwrap_or(usize::MAX)
                        .min(bytes.len() - at);
                    self.count(take)?;
                    at += take;
                    let left = left - take as u64;
                    if left == 0 {
                        self.value_done();
                    } else {
                        self.scan = Scan::Bulk(left);
                    }
                    continue;
                }
                Scan::Start => {
                    let kind = bytes[at];
                    self.scan = match kind {
                        b'$' | b'!' | b'=' | b'*' | b'%' | b'~' | b'>' | b'|' => {
                            self.header.clear();
                            Scan::Header(kind)
                        }
                        // Anything else is not RESP: followed as a line (still bounded),
                        // for the client's parser to refuse with what it found.
                        _ => Scan::Line,
                    };
                    self.cr = false;
                }
                Scan::Line | Scan::Header(_) => {
                    let byte = bytes[at];
                    if self.cr && byte == b'\n' {
                        self.count(1)?;
                        at += 1;
                        match self.scan {
                            Scan::Header(kind) => {
                                self.header.pop(); // its '\r'
                                self.header_done(kind)?;
                            }
                            _ => self.value_done(),
                        }
                        continue;
                    }
                    self.cr = byte == b'\r';
                    if let Scan::Header(_) = self.scan {
                        if self.header.len() >= MAX_HEADER {
                            return Err(refused("a reply's header line is too long".into()));
                        }
                        self.header.push(byte);
                    }
                }
            }
            self.count(1)?;
            at += 1;
        }
        Ok(())
    }

    /// Counts `n` bytes of the reply in progress.
    fn count(&mut self, n: usize) -> io::Result<()> {
        self.reply = self.reply.saturating_add(n as u64);
        if self.reply > self.max_reply {
            return Err(refused(format!(
                "a reply is larger than the {} bytes allowed",
                self.max_reply
            )));
        }
        Ok(())
    }
}

/// A stream whose reads are cut when one Redis reply passes a bound (see the module
/// doc); writes pass through.
pub(crate) struct Capped<S> {
    inner: S,
    framing: Framing,
    /// Set once a read was refused: every later read fails too.
    broken: bool,
}

impl<S> Capped<S> {
    /// `inner`, its replies at most `max_reply` bytes each.
    pub(crate) fn new(inner: S, max_reply: u64) -> Self {
        Capped {
            inner,
            framing: Framing::new(max_reply),
            broken: false,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Capped<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.broken {
            return Poll::Ready(Err(refused(
                "the connection was cut: a reply was too large".into(),
            )));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if let Err(err) = this.framing.scan(&buf.filled()[before..]) {
                    this.broken = true;
                    return Poll::Ready(Err(err));
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Capped<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn scan_all(max: u64, chunks: &[&[u8]]) -> io::Result<Framing> {
        let mut framing = Framing::new(max);
        for chunk in chunks {
            framing.scan(chunk)?;
        }
        Ok(framing)
    }

    #[test]
    fn replies_within_the_bound_pass_in_any_chunks() {
        let replies: &[u8] =
            b"+OK\r\n$5\r\nhello\r\n*2\r\n$1\r\na\r\n:12\r\n$-1\r\n*0\r\n%1\r\n+k\r\n$2\r\nvv\r\n";
        // Every split of the stream into two reads.
        for at in 0..replies.len() {
            let framing = scan_all(16, &[&replies[..at], &replies[at..]]).unwrap();
            assert_eq!(framing.scan, Scan::Start, "split at {at}");
            assert!(framing.open.is_empty(), "split at {at}");
            assert_eq!(framing.reply, 0, "split at {at}");
        }
        // Bytes inside a bulk payload are not read as framing.
        scan_all(32, &[b"$6\r\n*9\r\n$9\r\n"]).unwrap();
    }

    #[test]
    fn a_huge_announced_bulk_string_is_refused_at_its_header() {
        let err = scan_all(1 << 20, &[b"$1073741824\r\n"]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert_eq!(
            err.to_string(),
            "reply refused: a reply announces 1073741824 bytes, more than the 1048576 allowed"
        );
    }

    #[test]
    fn a_reply_growing_past_the_bound_is_cut_when_it_passes_it() {
        // An array of small bulk strings, each within the bound, together past it.
        let mut framing = Framing::new(64);
        framing.scan(b"*100\r\n").unwrap_err();
        let mut framing = Framing::new(300);
        framing.scan(b"*90\r\n").unwrap();
        let mut sent = 5;
        let err = loop {
            match framing.scan(b"$8\r\n12345678\r\n") {
                Ok(()) => sent += 14,
                Err(err) => break err,
            }
        };
        assert!(sent <= 300, "{sent}");
        assert_eq!(
            err.to_string(),
            "reply refused: a reply is larger than the 300 bytes allowed"
        );
        // A simple line as long.
        let mut line = b"+".to_vec();
        line.extend(std::iter::repeat_n(b'A', 400));
        assert!(scan_all(300, &[&line]).is_err());
        // But one reply's bytes never count against the next.
        let mut ok = Framing::new(20);
        for _ in 0..100 {
            ok.scan(b"$10\r\n0123456789\r\n").unwrap();
        }
    }

    #[test]
    fn what_is_not_resp_is_refused() {
        // Not RESP: left for the client's parser to refuse, but still bounded.
        scan_all(1 << 20, &[b"HTTP/1.1 400 Bad Request\r\n"]).unwrap();
        assert!(scan_all(16, &[b"HTTP/1.1 400 Bad Request\r\n"]).is_err());
        let err = scan_all(1 << 20, &[b"$12x\r\n"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "reply refused: a reply's length \"12x\" is not a number"
        );
        assert!(scan_all(1 << 20, &[b"*111111111111111111111111111111111111\r\n"]).is_err());
    }
}
