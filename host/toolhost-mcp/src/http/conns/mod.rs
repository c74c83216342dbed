//! The connection table: who holds the server's connection slots, and when a connection
//! is closed before it is done. This is what keeps slow or half-open connections
//! (slowloris) from locking other clients out.
//!
//! # Slots
//! At most [`HttpConfig::max_connections`](super::HttpConfig::max_connections) connections
//! are served at once. A connection is *pending* until a request on it passes the Host,
//! Origin and token checks; then it is *admitted*, or *authenticated* when the check was a
//! valid bearer token. When every slot is taken, a new connection takes the slot of a
//! victim, chosen in this order:
//! 1. a pending connection: of the peer holding the most pending connections, its
//!    oldest. A flood never pushes out a lone client's fresh connection while the flood
//!    holds more than one from an address;
//! 2. an admitted (not authenticated) connection with no request being answered (idle
//!    between requests, or still receiving a request body): the one idle the longest.
//!
//! An authenticated connection, and one whose request is being answered (a tool call, an
//! event stream), is never a victim: a flood without a token cannot push out a client
//! that has one. When there is no victim, the server takes no new connection until a
//! slot frees (they wait in the kernel's queue, as before this table existed).
//!
//! # Per peer
//! A peer (an IPv4 address, or an IPv6 /64, the block one host usually owns) holds at
//! most [`HttpConfig::max_pending_per_peer`](super::HttpConfig::max_pending_per_peer)
//! *pending* connections; a further one is answered `503` and closed at once. Admitted
//! connections do not count: a client behind NAT, or a proxy in front (HAProxy, nginx:
//! every connection of theirs comes from one address, and each carries a whole request
//! the moment it opens) never meets the cap in normal use.
//!
//! # Clocks
//! A connection waiting for a request's headers gets
//! [`HttpConfig::header_timeout`](super::HttpConfig::header_timeout) (2 s by default) for
//! them, counted from its opening (first request) or from its request's first byte (later
//! requests; before that byte it may sit idle between requests for [`IDLE_TIMEOUT`]).
//! Each byte received extends the deadline by `1 /`
//! [`HttpConfig::min_receive_rate`](super::HttpConfig::min_receive_rate) seconds (so a
//! client sending at least that rate is never cut off for being slow) up to
//! [`HEADER_TIME_LIMIT`] in all. A request body is read on the same clock from the end of
//! its headers (HTTP/1.1; for HTTP/2 the whole-body limit of 30 s alone applies, since
//! the connection's bytes are shared by its streams). A connection past its clock is
//! closed. The clock counts bytes received by the connection, not time between bytes, so
//! a byte every second does not keep a connection open.
//!
//! A connection's clock is a task that sleeps until the deadline it last saw (or, with
//! none while an HTTP/1.1 request is answered, for one header timeout), then looks
//! again. A request's start, its body's end and its answer only wake it when they bring
//! the deadline nearer than that: on a busy keep-alive connection the clock wakes about
//! twice per header timeout, not 2.65 times per request as when every change woke it
//! (each wake a poll of the connection's task and a timer set and cancelled; with 1,000
//! connections calling, their state is cold by then).

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a connection that has been answered may sit idle before its next request's
/// first byte (HTTP/1.1 keep-alive): the 10 s the server always gave.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a request's headers may take however steadily they arrive: past it a
/// client is sending more headers than any real request has.
pub(super) const HEADER_TIME_LIMIT: Duration = Duration::from_secs(10);

/// A peer as the per-peer cap counts it: an IPv4 address (an IPv4-mapped IPv6 address is
/// its IPv4 address), or an IPv6 /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Peer(IpAddr);

impl Peer {
    pub(super) fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => Self(ip),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                    Self(IpAddr::V6(prefix.into()))
                }
            },
        }
    }
}

/// The table's settings.
#[derive(Debug, Clone, Copy)]
pub(super) struct Settings {
    pub(super) max_connections: usize,
    pub(super) max_pending_per_peer: usize,
    pub(super) header_timeout: Duration,
    pub(super) min_receive_rate: u64,
}

/// How far a connection's requests got past the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Standing {
    Pending,
    Admitted,
    Authenticated,
}

/// Bytes a connection received, counted as they are read.
#[derive(Debug)]
struct Received {
    /// Bytes read since the connection opened.
    bytes: AtomicU64,
    /// When the first byte since the last answer was read: nanoseconds after `opened`,
    /// plus one; 0 for none yet.
    first_byte: AtomicU64,
    opened: Instant,
}

impl Received {
    fn add(&self, n: usize) {
        self.bytes
            .fetch_add(u64::try_from(n).unwrap_or(u64::MAX), Ordering::Relaxed);
        if self.first_byte.load(Ordering::Relaxed) == 0 {
            let since = Instant::now().saturating_duration_since(self.opened);
            let nanos = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX - 1);
            self.first_byte.store(nanos + 1, Ordering::Relaxed);
        }
    }

    fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    fn first_byte(&self) -> Option<Instant> {
        match self.first_byte.load(Ordering::Relaxed) {
            0 => None,
            nanos => Some(self.opened + Duration::from_nanos(nanos - 1)),
        }
    }
}

struct Entry {
    peer: Peer,
    opened: Instant,
    standing: Standing,
    /// Requests started (headers read) on this connection.
    requests: u64,
    /// Requests being answered (their response not yet sent in full).
    active: u32,
    /// Of those, the ones whose body is still arriving.
    bodies: u32,
    http2: bool,
    /// When the connection began waiting for its next request (its opening, or its last
    /// answer), and the bytes it had received then.
    waiting_since: Instant,
    waiting_bytes: u64,
    /// When the newest request body began, and the bytes received then.
    body_since: Instant,
    body_bytes: u64,
    received: Arc<Received>,
    wake: Arc<Notify>,
    /// The deadline the connection's clock sleeps until (`None`: it waits to be woken).
    armed: Option<Instant>,
    evicted: CancellationToken,
}

impl Entry {
    /// Whether a new connection may take this one's slot, and how readily: lower first.
    fn victim_class(&self) -> Option<u8> {
        match self.standing {
            Standing::Pending => Some(0),
            Standing::Admitted if self.active == self.bodies => Some(1),
            Standing::Admitted | Standing::Authenticated => None,
        }
    }

    /// What the connection's clock does when it looks: the deadline now, and in
    /// [`Entry::armed`] when it looks again (`Table::update` wakes it sooner only for a
    /// nearer deadline). With no deadline on HTTP/1.1 (a request being answered) it looks
    /// again after the header timeout, the first time (`none_before` false): any deadline
    /// a later request, body or answer brings is at least that far off, so a busy
    /// keep-alive connection's requests do not wake it; a second look that finds none
    /// either (a long answer, an event stream) waits to be woken.
    fn look(
        &mut self,
        settings: &Settings,
        none_before: bool,
        now: Instant,
    ) -> Option<(Instant, Slow)> {
        let deadline = self.deadline(settings);
        self.armed = match deadline {
            Some((at, _)) => Some(at),
            None if !none_before && !self.http2 => Some(now + settings.header_timeout),
            None => None,
        };
        deadline
    }

    /// When the connection is to be closed for slowness, if it is on a clock.
    fn deadline(&self, settings: &Settings) -> Option<(Instant, Slow)> {
        let rate = settings.min_receive_rate.max(1);
        let earned = |bytes: u64| Duration::from_millis(bytes.saturating_mul(1000) / rate);
        let received = self.received.bytes();
        if self.active > 0 {
            if self.http2 || self.bodies == 0 {
                return None;
            }
            let got = received.saturating_sub(self.body_bytes);
            let at = self.body_since + settings.header_timeout + earned(got);
            return Some((at, Slow::Body));
        }
        if self.http2 {
            // Idle between HTTP/2 requests: hyper's keep-alive pings find dead peers.
            return None;
        }
        let got = received.saturating_sub(self.waiting_bytes);
        if got == 0 {
            return Some(if self.requests == 0 {
                (self.waiting_since + settings.header_timeout, Slow::Headers)
            } else {
                (self.waiting_since + IDLE_TIMEOUT, Slow::Idle)
            });
        }
        let start = if self.requests == 0 {
            self.waiting_since
        } else {
            self.received
                .first_byte()
                .map_or(self.waiting_since, |first| first.max(self.waiting_since))
        };
        let at = (start + settings.header_timeout + earned(got)).min(start + HEADER_TIME_LIMIT);
        Some((at, Slow::Headers))
    }
}

/// Why a connection was closed early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Closed {
    /// Its slot went to a new connection.
    Evicted,
    /// It was too slow.
    Slow(Slow),
}

/// What a connection was too slow at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slow {
    Headers,
    Body,
    Idle,
}

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Evicted => "its slot went to a new connection (every slot was taken)",
            Self::Slow(Slow::Headers) => "the request headers arrived too slowly",
            Self::Slow(Slow::Body) => "the request body arrived too slowly",
            Self::Slow(Slow::Idle) => "idle too long between requests",
        })
    }
}

/// Why a new connection was not given a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// Its peer holds as many pending connections as it may.
    PeerPending,
    /// Every slot is held by a connection that may not be pushed out.
    Full,
}

impl Refused {
    /// The `503` sent before the connection is closed (HTTP/1.1: what a client that
    /// opened it to send a request can read).
    pub(super) fn response(self) -> &'static [u8] {
        match self {
            Self::PeerPending => b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 112\r\n\r\nService Unavailable: too many connections from your address have not sent a request yet; use the ones you have\n",
            Self::Full => b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 68\r\n\r\nService Unavailable: every connection slot is busy; retry shortly\n",
        }
    }
}

struct Inner {
    entries: HashMap<u64, Entry>,
    pending: HashMap<Peer, usize>,
    next: u64,
}

impl Inner {
    fn unpend(&mut self, peer: Peer) {
        if let Some(count) = self.pending.get_mut(&peer) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.pending.remove(&peer);
            }
        }
    }

    /// The connection a new one would push out, if any.
    fn victim(&self) -> Option<u64> {
        self.entries
            .iter()
            .filter_map(|(id, entry)| {
                let class = entry.victim_class()?;
                let crowd = match class {
                    0 => self.pending.get(&entry.peer).copied().unwrap_or(0),
                    _ => 0,
                };
                let since = match class {
                    0 => entry.opened,
                    _ => entry.waiting_since,
                };
                Some(((class, std::cmp::Reverse(crowd), since, *id), *id))
            })
            .min_by_key(|(key, _)| *key)
            .map(|(_, id)| id)
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.entries.remove(&id)?;
        if entry.standing == Standing::Pending {
            self.unpend(entry.peer);
        }
        Some(entry)
    }
}

/// Every connection being served.
pub(super) struct Table {
    inner: Mutex<Inner>,
    settings: Settings,
    /// Notified when a connection leaves, or finishes an answer (it may then be pushed
    /// out).
    freed: Notify,
}

impl Table {
    pub(super) fn new(settings: Settings) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                pending: HashMap::new(),
                next: 0,
            }),
            settings,
            freed: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The table holds no invariant a panic halfway could break that matters more
        // than serving on.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn settings(&self) -> Settings {
        self.settings
    }

    /// How many connections hold a slot.
    pub(super) fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Returns once a new connection could have a slot: one is free, or one may be
    /// pushed out.
    pub(super) async fn room(&self) {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let inner = self.lock();
                if inner.entries.len() < self.settings.max_connections || inner.victim().is_some() {
                    return;
                }
            }
            freed.await;
        }
    }

    /// Gives a connection from `peer` a slot, pushing another out if they are all taken.
    pub(super) fn open(self: &Arc<Self>, peer: Peer) -> Result<Slot, Refused> {
        let mut inner = self.lock();
        let pending = inner.pending.get(&peer).copied().unwrap_or(0);
        if pending >= self.settings.max_pending_per_peer {
            return Err(Refused::PeerPending);
        }
        if inner.entries.len() >= self.settings.max_connections {
            let victim = inner.victim().ok_or(Refused::Full)?;
            if let Some(entry) = inner.remove(victim) {
                entry.evicted.cancel();
            }
        }
        let id = inner.next;
        inner.next += 1;
        let now = Instant::now();
        let received = Arc::new(Received {
            bytes: AtomicU64::new(0),
            first_byte: AtomicU64::new(0),
            opened: now,
        });
        let (wake, evicted) = (Arc::new(Notify::new()), CancellationToken::new());
        inner.entries.insert(
            id,
            Entry {
                peer,
                opened: now,
                standing: Standing::Pending,
                requests: 0,
                active: 0,
                bodies: 0,
                http2: false,
                waiting_since: now,
                waiting_bytes: 0,
                body_since: now,
                body_bytes: 0,
                received: Arc::clone(&received),
                wake: Arc::clone(&wake),
                armed: None,
                evicted: evicted.clone(),
            },
        );
        *inner.pending.entry(peer).or_insert(0) += 1;
        Ok(Slot {
            handle: Handle {
                table: Arc::clone(self),
                id,
                wake,
                evicted,
            },
            received,
        })
    }

    /// Pushes out one connection that may be (after a failed accept for want of file
    /// descriptors); whether there was one.
    pub(super) fn evict_one(&self) -> bool {
        let mut inner = self.lock();
        let Some(victim) = inner.victim() else {
            return false;
        };
        if let Some(entry) = inner.remove(victim) {
            entry.evicted.cancel();
        }
        true
    }

    /// Runs `change` on connection `id`'s entry, if it is still in the table, and wakes
    /// its clock when the change brings the deadline nearer than the one it sleeps until.
    fn update(&self, id: u64, change: impl FnOnce(&mut Entry, &mut HashMap<Peer, usize>)) {
        let mut inner = self.lock();
        let Inner {
            entries, pending, ..
        } = &mut *inner;
        if let Some(entry) = entries.get_mut(&id) {
            change(entry, pending);
            let due = entry.deadline(&self.settings).map(|(at, _)| at);
            if due.is_some_and(|due| entry.armed.is_none_or(|armed| due < armed)) {
                entry.wake.notify_one();
            }
        }
    }
}

/// A connection's slot: [`Slot::io`] counts what it receives, its [`Handle`] marks its
/// requests and watches its clock; dropping the slot (at the end of the connection's
/// task) frees it.
pub(super) struct Slot {
    pub(super) handle: Handle,
    received: Arc<Received>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.handle.close();
    }
}

impl Slot {
    /// Wraps the connection's stream to count what it receives.
    pub(super) fn io<S>(&self, stream: S) -> Counted<S> {
        Counted {
            inner: stream,
            received: Arc::clone(&self.received),
        }
    }
}

/// A connection's entry in the table, as its requests and its task see it.
#[derive(Clone)]
pub(super) struct Handle {
    table: Arc<Table>,
    id: u64,
    wake: Arc<Notify>,
    evicted: CancellationToken,
}

impl Handle {
    /// A request on this connection passed the checks (with a token: `authenticated`).
    pub(super) fn admitted(&self, authenticated: bool) {
        let standing = if authenticated {
            Standing::Authenticated
        } else {
            Standing::Admitted
        };
        let mut inner = self.table.lock();
        let Some(entry) = inner.entries.get_mut(&self.id) else {
            return;
        };
        let was = entry.standing;
        entry.standing = was.max(standing);
        let peer = entry.peer;
        if was == Standing::Pending {
            inner.unpend(peer);
        }
    }

    /// A request's headers were read: the connection is off the header clock (and on the
    /// body clock while `body` arrives) until the answer is sent.
    pub(super) fn request(&self, http2: bool, body: bool) -> (Answering, Option<Receiving>) {
        let now = Instant::now();
        self.table.update(self.id, |entry, _| {
            entry.requests += 1;
            entry.active += 1;
            entry.http2 |= http2;
            if body {
                entry.bodies += 1;
                entry.body_since = now;
                entry.body_bytes = entry.received.bytes();
            }
        });
        let receiving = body.then(|| Receiving(self.clone()));
        (Answering(self.clone()), receiving)
    }

    /// Waits until the connection is to be closed: pushed out, or too slow.
    pub(super) async fn closed(&self) -> Closed {
        // Whether the last look found no deadline either.
        let mut none_before = false;
        loop {
            let woken = self.wake.notified();
            let (deadline, armed) = {
                let mut inner = self.table.lock();
                let Some(entry) = inner.entries.get_mut(&self.id) else {
                    return Closed::Evicted;
                };
                let deadline = entry.look(&self.table.settings, none_before, Instant::now());
                (deadline, entry.armed)
            };
            none_before = deadline.is_none();
            match (deadline, armed) {
                (Some((at, slow)), _) if at <= Instant::now() => return Closed::Slow(slow),
                (_, Some(at)) => tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = woken => {}
                    () = self.evicted.cancelled() => return Closed::Evicted,
                },
                (_, None) => tokio::select! {
                    () = woken => {}
                    () = self.evicted.cancelled() => return Closed::Evicted,
                },
            }
        }
    }

    /// Frees the slot (the connection ended).
    fn close(&self) {
        let removed = self.table.lock().remove(self.id);
        if removed.is_some() {
            self.table.freed.notify_waiters();
        }
    }
}

/// Held while a request is being answered; dropped once its answer is sent (or dropped).
pub(super) struct Answering(Handle);

impl Drop for Answering {
    fn drop(&mut self) {
        let now = Instant::now();
        self.0.table.update(self.0.id, |entry, _| {
            entry.active = entry.active.saturating_sub(1);
            if entry.active == 0 {
                entry.waiting_since = now;
                entry.waiting_bytes = entry.received.bytes();
                entry.received.first_byte.store(0, Ordering::Relaxed);
            }
        });
        // It may now be pushed out: a full table may have room again.
        self.0.table.freed.notify_waiters();
    }
}

/// Held while a request's body arrives.
pub(super) struct Receiving(Handle);

impl Drop for Receiving {
    fn drop(&mut self) {
        self.0.table.update(self.0.id, |entry, _| {
            entry.bodies = entry.bodies.saturating_sub(1);
        });
    }
}

/// A body that drops `guard` when it ends (or is dropped): a request body with its
/// [`Receiving`], a response body with its [`Answering`].
pub(super) struct Tracked<B, G> {
    pub(super) body: B,
    pub(super) guard: Option<G>,
}

impl<B, G> HttpBody for Tracked<B, G>
where
    B: HttpBody<Data = Bytes> + Unpin,
    G: Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) || self.body.is_end_stream() {
            self.guard = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A stream that counts the bytes read from it into its connection's entry.
pub(super) struct Counted<S> {
    inner: S,
    received: Arc<Received>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled().len().saturating_sub(before);
        if read > 0 {
            self.received.add(read);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
