//! The process's stdin and stdout as the server's input and output.
//!
//! tokio's `stdin()` and `stdout()` hand every read, write and flush to the blocking pool:
//! a thread hand-off each, four or more per answered call. When stdin and stdout are pipes
//! or sockets, which is how every MCP client starts a server, the server instead reads
//! and writes them non-blocking through the runtime's event loop, on the thread that runs
//! it. Anything else (a terminal, a file, a stdout that is also stderr) keeps tokio's
//! blocking versions, which work everywhere.
//!
//! Non-blocking is a flag of the open file description, which other processes may share
//! (the shell of `host run < fifo`): both flags are read before either changes (stdin and
//! stdout may be one socket), and each stream puts its description's flags back when it
//! is dropped. A stdin or stdout that is also stderr (`2>&1`) stays blocking: the log's
//! writes to stderr would otherwise fail with `EAGAIN` whenever the client is slow to read.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The server's input: stdin, event-driven where it can be.
pub(super) enum Input {
    #[cfg(unix)]
    Pipe {
        pipe: tokio::net::unix::pipe::Receiver,
        _restore: unix::Restore,
    },
    #[cfg(unix)]
    Socket {
        socket: tokio::net::UnixStream,
        _restore: unix::Restore,
    },
    Blocking(tokio::io::Stdin),
}

/// The server's output: stdout, event-driven where it can be.
pub(super) enum Output {
    #[cfg(unix)]
    Pipe {
        pipe: tokio::net::unix::pipe::Sender,
        _restore: unix::Restore,
    },
    #[cfg(unix)]
    Socket {
        socket: tokio::net::UnixStream,
        _restore: unix::Restore,
    },
    Blocking(tokio::io::Stdout),
}

/// Stdin and stdout, each as a pipe or socket on the event loop where it is one, or
/// through tokio's blocking stdio.
///
/// # Panics
/// Outside a tokio runtime, or (for a pipe or socket) in one without IO enabled, as
/// tokio's own sockets do.
pub(super) fn open() -> (Input, Output) {
    #[cfg(unix)]
    let (input, output) = unix::open();
    #[cfg(not(unix))]
    let (input, output) = (None, None);
    (
        input.unwrap_or_else(|| Input::Blocking(tokio::io::stdin())),
        output.unwrap_or_else(|| Output::Blocking(tokio::io::stdout())),
    )
}

impl Input {
    /// Whether reads go through the event loop (for the log).
    pub(super) fn is_event_driven(&self) -> bool {
        !matches!(self, Input::Blocking(_))
    }
}

impl Output {
    /// Whether writes go through the event loop (for the log).
    pub(super) fn is_event_driven(&self) -> bool {
        !matches!(self, Output::Blocking(_))
    }
}

impl Input {
    fn stream(&mut self) -> &mut (dyn AsyncRead + Unpin + Send) {
        match self {
            #[cfg(unix)]
            Input::Pipe { pipe, .. } => pipe,
            #[cfg(unix)]
            Input::Socket { socket, .. } => socket,
            Input::Blocking(stdin) => stdin,
        }
    }
}

impl AsyncRead for Input {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(self.get_mut().stream()).poll_read(cx, buf)
    }
}

impl Output {
    fn stream(&mut self) -> &mut (dyn AsyncWrite + Unpin + Send) {
        match self {
            #[cfg(unix)]
            Output::Pipe { pipe, .. } => pipe,
            #[cfg(unix)]
            Output::Socket { socket, .. } => socket,
            Output::Blocking(stdout) => stdout,
        }
    }
}

impl AsyncWrite for Output {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(self.get_mut().stream()).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.get_mut().stream()).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.get_mut().stream()).poll_shutdown(cx)
    }
}

#[cfg(unix)]
mod unix {
    use std::fs::File;
    use std::io;
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::os::unix::fs::{FileTypeExt, MetadataExt};

    use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
    use tokio::net::unix::pipe;
    use tracing::debug;

    use super::{Input, Output};

    /// Puts an open file description's flags back as they were (its `O_NONBLOCK`), through
    /// a descriptor of its own, so it works after the stream closed its descriptor.
    pub(in crate::server) struct Restore {
        fd: OwnedFd,
        flags: OFlags,
    }

    impl Drop for Restore {
        fn drop(&mut self) {
            if let Err(err) = fcntl_setfl(&self.fd, self.flags) {
                debug!(%err, "could not put back the blocking mode of stdin or stdout");
            }
        }
    }

    /// What kind of stream a descriptor is, as far as the event loop cares.
    enum Kind {
        Pipe,
        Socket,
        Other,
    }

    /// The descriptor's kind and its (device, inode).
    fn inspect(fd: BorrowedFd<'_>) -> io::Result<(Kind, (u64, u64))> {
        let metadata = File::from(fd.try_clone_to_owned()?).metadata()?;
        let file_type = metadata.file_type();
        let kind = if file_type.is_fifo() {
            Kind::Pipe
        } else if file_type.is_socket() {
            Kind::Socket
        } else {
            Kind::Other
        };
        Ok((kind, (metadata.dev(), metadata.ino())))
    }

    /// A non-blocking duplicate of `fd`, and what puts its description back to `flags`.
    fn non_blocking(fd: BorrowedFd<'_>, flags: OFlags) -> io::Result<(OwnedFd, Restore)> {
        let restore = Restore {
            fd: fd.try_clone_to_owned()?,
            flags,
        };
        fcntl_setfl(fd, flags | OFlags::NONBLOCK)?;
        Ok((fd.try_clone_to_owned()?, restore))
    }

    /// The descriptor's kind, unless it is stderr's too (whose writes, the log, must
    /// keep blocking) or cannot be inspected.
    fn kind_apart_from_stderr(fd: BorrowedFd<'_>) -> Option<Kind> {
        let (kind, id) = inspect(fd).ok()?;
        if inspect(io::stderr().as_fd()).is_ok_and(|(_, stderr)| stderr == id) {
            debug!("stdin or stdout is also stderr: it stays on tokio's blocking stdio");
            return None;
        }
        Some(kind)
    }

    pub(super) fn open() -> (Option<Input>, Option<Output>) {
        let (stdin, stdout) = (io::stdin(), io::stdout());
        let (stdin, stdout) = (stdin.as_fd(), stdout.as_fd());
        // Both flags are read before either changes: stdin and stdout may be one
        // description (a socket), which must get back the flags it came with.
        let (Ok(stdin_flags), Ok(stdout_flags)) = (fcntl_getfl(stdin), fcntl_getfl(stdout)) else {
            return (None, None);
        };
        let input = match kind_apart_from_stderr(stdin) {
            Some(Kind::Pipe) => non_blocking(stdin, stdin_flags).and_then(|(fd, restore)| {
                Ok(Some(Input::Pipe {
                    pipe: pipe::Receiver::from_owned_fd_unchecked(fd)?,
                    _restore: restore,
                }))
            }),
            Some(Kind::Socket) => non_blocking(stdin, stdin_flags).and_then(|(fd, restore)| {
                Ok(Some(Input::Socket {
                    socket: tokio::net::UnixStream::from_std(fd.into())?,
                    _restore: restore,
                }))
            }),
            Some(Kind::Other) | None => Ok(None),
        };
        let output = match kind_apart_from_stderr(stdout) {
            Some(Kind::Pipe) => non_blocking(stdout, stdout_flags).and_then(|(fd, restore)| {
                Ok(Some(Output::Pipe {
                    pipe: pipe::Sender::from_owned_fd_unchecked(fd)?,
                    _restore: restore,
                }))
            }),
            Some(Kind::Socket) => non_blocking(stdout, stdout_flags).and_then(|(fd, restore)| {
                Ok(Some(Output::Socket {
                    socket: tokio::net::UnixStream::from_std(fd.into())?,
                    _restore: restore,
                }))
            }),
            Some(Kind::Other) | None => Ok(None),
        };
        (opened("stdin", input), opened("stdout", output))
    }

    fn opened<T>(name: &str, stream: io::Result<Option<T>>) -> Option<T> {
        stream
            .map_err(|err| debug!(%err, "{name} stays on tokio's blocking stdio"))
            .ok()
            .flatten()
    }
}
