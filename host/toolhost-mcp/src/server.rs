//! The serving loop: read lines, answer requests, run tool calls concurrently, write every
//! response through one writer.
//!
//! # Memory
//! What the server holds for its client is bounded, so a client that stops reading its
//! answers, or floods requests, slows itself down instead of growing the host:
//! - the line being read: at most [`McpLimits::max_line_bytes`], and over stdio up to
//!   1 MiB more read from the pipe ahead of the server (the reader thread's chunks);
//! - answers waiting to be written: at most [`McpLimits::max_queued_bytes`] (or a single
//!   answer larger than that, alone). While the queue is full the server reads no request
//!   (backpressure): the client's pipe fills and its own writes block;
//! - tool calls: at most [`McpLimits::max_in_flight`] at once, built-in tools and plugins
//!   alike, holding at most [`McpLimits::max_in_flight_bytes`] of arguments between them.
//!   At either limit the server reads no further message until a call ends (at the latest
//!   at the registry's call time-out). A call keeps its place until its answer is queued,
//!   so finished calls cannot pile up behind a full queue either;
//! - `tools/list`: encoded once and shared by every answer (the registry only grows; a
//!   new tool makes the next `tools/list` encode again).
//!
//! The worst case is about `max_in_flight_bytes` of arguments (a few times that once the
//! registry has parsed them) + `max_in_flight` results under the registry's cap +
//! `max_queued_bytes` + one line: 64 MiB + 64 × 64 KiB + 4 MiB + 16 MiB with the defaults
//! (+ 1 MiB over stdio).

use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter,
};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use toolhost::registry::{Environment, Registry};

use super::jsonrpc::{parse_batch, parse_line, Incoming, RequestId, RpcError, INVALID_REQUEST};
use super::session::{CallLimiter, Catalog, Counters, Message, Notifier, Outlet, Session, Step};
use super::stdio;
use super::ServeError;

/// The longest line (one JSON-RPC message) the server reads: 16 MiB. A peer that never
/// sends a newline would otherwise grow the buffer until the process runs out of memory.
/// Tool arguments carry whole files (`write_file`, 1 MiB by default), so the cap is
/// generous; a longer line is answered with an Invalid Request error and skipped.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Default for [`McpLimits::max_in_flight`]: 64 tool calls at once. Far more than an agent
/// runs in parallel (a handful of calls per turn), while 600 concurrent `grep` calls over a
/// large tree once took the host past 4 GiB.
pub const DEFAULT_MAX_IN_FLIGHT: NonZeroUsize = non_zero(64);

/// Default for [`McpLimits::max_queued_bytes`]: 4 MiB of answers waiting for the client to
/// read them. Room for each of [`DEFAULT_MAX_IN_FLIGHT`] calls to have a full-size result
/// (the registry's 64 KiB cap) queued at once, so a client that reads normally never
/// waits on it; small next to what the host needs anyway.
pub const DEFAULT_MAX_QUEUED_BYTES: NonZeroUsize = non_zero(4 << 20);

/// Default for [`McpLimits::max_in_flight_bytes`]: 64 MiB of arguments (their JSON text)
/// held by the calls in flight. [`DEFAULT_MAX_IN_FLIGHT`] calls each writing a file of
/// the default largest size (1 MiB) all fit, so ordinary use never waits on it; without
/// it, 64 slow calls carrying a 16 MiB line each would hold a gigabyte and more.
pub const DEFAULT_MAX_IN_FLIGHT_BYTES: NonZeroUsize = non_zero(64 << 20);

const fn non_zero(n: usize) -> NonZeroUsize {
    match NonZeroUsize::new(n) {
        Some(n) => n,
        None => panic!("a limit of 0"),
    }
}

/// How much the server holds for its client at most (see [the crate docs](crate) for the
/// memory this bounds). [`Default`] gives the documented defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpLimits {
    /// The longest line (one message) read, [`MAX_LINE_BYTES`] by default; a longer one is
    /// answered with an Invalid Request error and skipped.
    pub max_line_bytes: usize,
    /// Bytes of answers waiting to be written, [`DEFAULT_MAX_QUEUED_BYTES`] by default;
    /// while it is full the server reads no request.
    pub max_queued_bytes: NonZeroUsize,
    /// Tool calls running at once, [`DEFAULT_MAX_IN_FLIGHT`] by default; at the limit the
    /// server reads no message until one call ends.
    pub max_in_flight: NonZeroUsize,
    /// Bytes of arguments (their JSON text) the calls in flight hold between them,
    /// [`DEFAULT_MAX_IN_FLIGHT_BYTES`] by default; a call whose arguments do not fit waits
    /// (and the reading with it) until calls end. Arguments larger than the whole budget
    /// wait until no other call runs, then go alone.
    pub max_in_flight_bytes: NonZeroUsize,
}

impl Default for McpLimits {
    fn default() -> Self {
        Self {
            max_line_bytes: MAX_LINE_BYTES,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_in_flight_bytes: DEFAULT_MAX_IN_FLIGHT_BYTES,
        }
    }
}

/// What a server holds now and held at most, for monitoring and tests. Shared by the
/// clones of one server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpStats {
    /// Bytes of answers waiting to be written.
    pub queued_bytes: usize,
    /// Answers waiting to be written.
    pub queued_answers: usize,
    /// The most bytes of answers that waited at once.
    pub peak_queued_bytes: usize,
    /// Tool calls holding a slot (running, or done and waiting to queue their answer).
    pub calls_running: usize,
    /// The most tool calls that held a slot at once.
    pub peak_calls_running: usize,
    /// Bytes of arguments the calls holding a slot carry.
    pub call_argument_bytes: usize,
    /// How many times `tools/list` was encoded (once, unless tools were added since).
    pub tools_list_encodings: usize,
}

impl McpStats {
    pub(crate) fn from_counters(c: &Counters) -> Self {
        let get = |n: &AtomicUsize| n.load(Ordering::SeqCst);
        Self {
            queued_bytes: get(&c.queued_bytes),
            queued_answers: get(&c.queued_answers),
            peak_queued_bytes: get(&c.peak_queued_bytes),
            calls_running: get(&c.calls_running),
            peak_calls_running: get(&c.peak_calls_running),
            call_argument_bytes: get(&c.call_argument_bytes),
            tools_list_encodings: get(&c.tools_list_encodings),
        }
    }
}

/// An MCP server over one registry. One server is one session: its session id is fixed,
/// and every `tools/call` gets a fresh turn id.
///
/// The messages themselves are handled by a `Session`, the core every transport
/// shares; this is its stdio transport.
#[derive(Debug, Clone)]
pub struct McpServer {
    catalog: Arc<Catalog>,
    session: Environment,
    limits: McpLimits,
    counters: Arc<Counters>,
}

impl McpServer {
    /// A server for `registry` with a fresh session id and the default limits.
    pub fn new(registry: Arc<Registry>) -> Self {
        let counters: Arc<Counters> = Arc::default();
        Self {
            catalog: Arc::new(Catalog::new(registry, Arc::clone(&counters))),
            session: Environment::generate(),
            limits: McpLimits::default(),
            counters,
        }
    }

    /// This server telling clients when the registry's tools change
    /// (`notifications/tools/list_changed`, capability `listChanged: true`): for a
    /// registry whose plugins are reloaded while it serves. Off by default.
    pub fn with_list_changed(mut self, list_changed: bool) -> Self {
        self.catalog = Arc::new(
            Catalog::new(
                Arc::clone(&self.catalog.registry),
                Arc::clone(&self.counters),
            )
            .with_list_changed(list_changed)
            .with_page_size(self.catalog.page_size),
        );
        self
    }

    /// This server listing at most `tools` tools per `tools/list` page (at least 1;
    /// default [`DEFAULT_PAGE_SIZE`](crate::DEFAULT_PAGE_SIZE)); the rest
    /// follow through `nextCursor`.
    pub fn with_page_size(mut self, tools: usize) -> Self {
        self.catalog = Arc::new(
            Catalog::new(
                Arc::clone(&self.catalog.registry),
                Arc::clone(&self.counters),
            )
            .with_list_changed(self.catalog.list_changed)
            .with_page_size(tools),
        );
        self
    }

    /// This server with `session` as its session (its turn id is replaced per call).
    pub fn with_session(mut self, session: Environment) -> Self {
        self.session = session;
        self
    }

    /// This server with `limits`.
    pub fn with_limits(mut self, limits: McpLimits) -> Self {
        self.limits = limits;
        self
    }

    /// This server with `bytes` as the longest line it reads (default [`MAX_LINE_BYTES`]).
    pub fn with_max_line_bytes(mut self, bytes: usize) -> Self {
        self.limits.max_line_bytes = bytes;
        self
    }

    /// This server with `calls` as the most tool calls running at once (default
    /// [`DEFAULT_MAX_IN_FLIGHT`]).
    pub fn with_max_in_flight(mut self, calls: NonZeroUsize) -> Self {
        self.limits.max_in_flight = calls;
        self
    }

    /// The limits this server keeps.
    pub fn limits(&self) -> McpLimits {
        self.limits
    }

    /// What the server holds now and held at most.
    pub fn stats(&self) -> McpStats {
        McpStats::from_counters(&self.counters)
    }

    /// The session every call of this server belongs to.
    pub fn session(&self) -> &Environment {
        &self.session
    }

    /// Serves MCP on the process's stdin and stdout until stdin ends.
    ///
    /// # Errors
    /// As [`McpServer::serve`].
    pub async fn serve_stdio(&self) -> Result<(), ServeError> {
        let input = stdio::stdin()?;
        self.serve_lines(input, |answers, space, failed| async move {
            match stdio::stdout(answers, space, failed)?.await {
                Ok(written) => written,
                // The writer thread panicked: the answers are lost with it.
                Err(_) => Err(ServeError::Write(std::io::Error::other(
                    "the stdout writer thread stopped",
                ))),
            }
        })
        .await
    }

    /// Serves MCP, one JSON-RPC message per line, reading `input` and writing `output`,
    /// until `input` ends. Tool calls in flight then finish and are answered before this
    /// returns.
    ///
    /// While `output` does not take the answers (the client stopped reading) or the tool
    /// calls in flight are at their limit, `input` is not read: see [`McpLimits`].
    ///
    /// # Errors
    /// [`ServeError::Read`] or [`ServeError::Write`] on an I/O error (the client went away).
    /// Malformed messages are answered with JSON-RPC errors and are not errors here.
    pub async fn serve<R, W>(&self, input: R, output: W) -> Result<(), ServeError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        self.serve_lines(BufReader::new(input), |answers, space, failed| {
            write_loop(output, answers, space, failed)
        })
        .await
    }

    /// Serves lines read from `input`; `writer` writes the answers it is given until their
    /// queue closes (closing `space` and cancelling `failed` if it fails).
    async fn serve_lines<R, F, W>(&self, input: R, writer: F) -> Result<(), ServeError>
    where
        R: AsyncBufRead + Unpin,
        F: FnOnce(mpsc::UnboundedReceiver<Answer>, Arc<Semaphore>, CancellationToken) -> W,
        W: Future<Output = Result<(), ServeError>>,
    {
        info!(
            session_id = %self.session.session_id,
            tools = self.catalog.registry.len(),
            max_in_flight = self.limits.max_in_flight,
            max_in_flight_bytes = self.limits.max_in_flight_bytes,
            max_queued_bytes = self.limits.max_queued_bytes,
            "MCP server ready: reading JSON-RPC from stdin, one message per line"
        );
        let (outbox, answers) = Outbox::new(self.limits.max_queued_bytes, &self.counters);
        let space = Arc::clone(&outbox.space);
        let writer_failed = CancellationToken::new();
        let (read, write) = tokio::join!(
            self.read_loop(input, outbox, writer_failed.clone()),
            writer(answers, space, writer_failed),
        );
        write?;
        read?;
        info!(session_id = %self.session.session_id, "stdin closed, MCP server stopped");
        Ok(())
    }

    async fn read_loop<R: AsyncBufRead + Unpin>(
        &self,
        mut input: R,
        outbox: Outbox,
        writer_failed: CancellationToken,
    ) -> Result<(), ServeError> {
        let mut tasks = JoinSet::new();
        let session = Session::with_catalog(Arc::clone(&self.catalog), self.session.clone());
        let notifier = Notifier::new(Arc::new(outbox.clone()));
        session.set_notifier(notifier.clone());
        let limiter = CallLimiter::with_counters(&self.limits, Arc::clone(&self.counters));
        // Tells an initialized legacy client when the tools change (with --watch).
        let announcer = tokio::spawn({
            let session = session.clone();
            let changes = session.tool_changes();
            async move { session.announce_changes(changes).await }
        });
        let mut line = Vec::new();
        let mut discarding = false;
        let max_line = self.limits.max_line_bytes;
        loop {
            let read = tokio::select! {
                read = read_line(&mut input, &mut line, &mut discarding, max_line) => read,
                () = writer_failed.cancelled() => break,
            };
            let message = match read.map_err(ServeError::Read)? {
                Line::Eof => break,
                Line::TooLong => {
                    warn!(
                        limit = max_line,
                        "skipped a message longer than the line limit"
                    );
                    Err(RpcError::new(
                        RequestId::null(),
                        INVALID_REQUEST,
                        format!("Invalid Request: the message is longer than {max_line} bytes, the limit for one line; send less per call"),
                    ))
                }
                Line::Complete => {
                    let text = trim_line(&line);
                    if text.is_empty() {
                        line.clear();
                        continue;
                    }
                    if session.accepts_batches() {
                        if let Some(batch) = parse_batch(text) {
                            line.clear();
                            let handled = self
                                .batch(&session, batch, &outbox, &notifier, &limiter, &mut tasks);
                            tokio::select! {
                                () = handled => {}
                                () = writer_failed.cancelled() => break,
                            }
                            continue;
                        }
                    }
                    let message = parse_line(text);
                    line.clear();
                    message
                }
            };
            // Handling may wait (room in the response queue, a free call slot): that is
            // the backpressure, and no further line is read meanwhile.
            let handled = async {
                let step = session.receive(message);
                let reply_to = ReplyTo::Out(notifier.clone());
                step_task(step, &notifier, reply_to, &limiter, &mut tasks).await;
            };
            tokio::select! {
                () = handled => {}
                () = writer_failed.cancelled() => break,
            }
            while let Some(joined) = tasks.try_join_next() {
                report_join(joined);
            }
        }
        announcer.abort();
        let _ = announcer.await;
        // Open subscriptions end now, answered as the spec asks of a server closing them.
        session.end_subscriptions();
        if writer_failed.is_cancelled() {
            session.close();
            tasks.abort_all();
            return Ok(());
        }
        if !tasks.is_empty() {
            debug!(
                calls = tasks.len(),
                "stdin closed; finishing the tool calls in flight"
            );
        }
        loop {
            tokio::select! {
                joined = tasks.join_next() => match joined {
                    Some(joined) => report_join(joined),
                    None => break,
                },
                () = writer_failed.cancelled() => {
                    session.close();
                    tasks.abort_all();
                    break;
                }
            }
        }
        Ok(())
    }

    /// Serves one batch (2025-03-26): each member as if it came alone, and one array line
    /// of their answers once all are in (none when the batch held only notifications).
    async fn batch(
        &self,
        session: &Session,
        batch: Result<Vec<Result<Incoming, RpcError>>, RpcError>,
        outbox: &Outbox,
        notifier: &Notifier,
        limiter: &CallLimiter,
        tasks: &mut JoinSet<()>,
    ) {
        let members = match batch {
            Ok(members) => members,
            Err(err) => {
                if let Step::Reply(reply) = session.receive(Err(err)) {
                    outbox.send_message(reply).await;
                }
                return;
            }
        };
        // Each member's answer comes through its own channel; the calls run as tasks
        // like any other, and one task gathers the answers in order.
        let mut answers = Vec::with_capacity(members.len());
        for member in members {
            let (sender, receiver) = tokio::sync::oneshot::channel();
            let step = session.receive(member);
            step_task(step, notifier, ReplyTo::Batch(sender), limiter, tasks).await;
            answers.push(receiver);
        }
        let outbox = outbox.clone();
        tasks.spawn(async move {
            let mut gathered = Vec::with_capacity(answers.len());
            for answer in answers {
                if let Ok(Some(reply)) = answer.await {
                    gathered.push(reply);
                }
            }
            if let Some(reply) = Message::batch(gathered) {
                outbox.send_message(reply).await;
            }
        });
    }
}

/// Where the answer to one message goes: the output, or a batch's gathering task.
enum ReplyTo {
    Out(Notifier),
    Batch(tokio::sync::oneshot::Sender<Option<Message>>),
}

impl ReplyTo {
    async fn reply(self, reply: Option<Message>) {
        match self {
            ReplyTo::Out(out) => {
                if let Some(reply) = reply {
                    out.send(reply).await;
                }
            }
            ReplyTo::Batch(sender) => {
                let _ = sender.send(reply);
            }
        }
    }
}

/// Does what `step` asks for: sends a reply through `reply_to`, or starts a call or a
/// subscription as a task in `tasks` that answers through `reply_to` when it ends. A
/// call first waits for its slot (the backpressure).
async fn step_task(
    step: Step,
    notifier: &Notifier,
    reply_to: ReplyTo,
    limiter: &CallLimiter,
    tasks: &mut JoinSet<()>,
) {
    match step {
        Step::Nothing => reply_to.reply(None).await,
        Step::Reply(reply) => reply_to.reply(Some(reply)).await,
        Step::Call(call) => {
            let slot = limiter.acquire(call.argument_bytes()).await;
            let notifier = notifier.clone();
            // The slot is given back when the call ends, after its answer is queued.
            tasks.spawn(async move { reply_to.reply(call.run(slot, notifier).await).await });
        }
        Step::Listen(listen) => {
            let notifier = notifier.clone();
            tasks.spawn(async move { reply_to.reply(listen.run(notifier).await).await });
        }
    }
}

fn report_join(joined: Result<(), tokio::task::JoinError>) {
    if let Err(err) = joined {
        if err.is_panic() {
            error!("a tool call task panicked outside the registry; its request was not answered");
        }
    }
}

/// The response queue: answers on their way to the writer, at most
/// [`McpLimits::max_queued_bytes`] of them. Every sender (the reader, each tool call)
/// waits for room before queueing.
#[derive(Clone)]
struct Outbox {
    sender: mpsc::UnboundedSender<Answer>,
    /// Free bytes; closed when the writer failed, so no sender waits for it forever.
    space: Arc<Semaphore>,
    capacity: usize,
    counters: Arc<Counters>,
}

/// One answer line in parts (a cached `tools/list` result is shared, not copied), holding
/// its room in the queue until it is written.
pub(crate) struct Answer {
    parts: Vec<Bytes>,
    _room: Room,
}

impl Answer {
    /// The line's bytes, in order, ending with its newline.
    pub(crate) fn parts(&self) -> &[Bytes] {
        &self.parts
    }
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
    fn new(
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
    async fn send_message(&self, message: Message) {
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

async fn write_loop<W: AsyncWrite + Unpin>(
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

/// What one bounded line read produced.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A whole line is in the buffer (the last one may lack its newline).
    Complete,
    /// The line passed the limit and was dropped.
    TooLong,
    /// The input ended.
    Eof,
}

/// Reads one line into `line`, never letting it grow past `max` bytes. A line over the
/// limit is reported once and its rest is skipped on the following calls (`discarding`).
async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
    discarding: &mut bool,
    max: usize,
) -> std::io::Result<Line> {
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(if line.is_empty() || *discarding {
                Line::Eof
            } else {
                Line::Complete
            });
        }
        let newline = available.iter().position(|&b| b == b'\n');
        let take = newline.map_or(available.len(), |at| at + 1);
        let outcome = if *discarding {
            if newline.is_some() {
                *discarding = false;
            }
            None
        } else if line.len() + take > max + 1 {
            line.clear();
            *discarding = newline.is_none();
            Some(Line::TooLong)
        } else {
            line.extend_from_slice(&available[..take]);
            newline.map(|_| Line::Complete)
        };
        input.consume(take);
        if let Some(outcome) = outcome {
            return Ok(outcome);
        }
    }
}

/// The line without its newline, carriage return and surrounding blanks.
fn trim_line(line: &[u8]) -> &[u8] {
    line.trim_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use toolhost::registry::CallContext;

    async fn lines(input: &[u8], max: usize) -> Vec<Result<String, &'static str>> {
        let mut reader = BufReader::with_capacity(4, input);
        let (mut line, mut discarding, mut out) = (Vec::new(), false, Vec::new());
        loop {
            match read_line(&mut reader, &mut line, &mut discarding, max)
                .await
                .unwrap()
            {
                Line::Eof => return out,
                Line::TooLong => out.push(Err("too long")),
                Line::Complete => {
                    out.push(Ok(String::from_utf8(trim_line(&line).to_vec()).unwrap()));
                    line.clear();
                }
            }
        }
    }

    #[tokio::test]
    async fn bounded_lines() {
        assert_eq!(
            lines(b"ab\r\ncdefgh\n\nxyz", 5).await,
            [
                Ok("ab".into()),
                Err("too long"),
                Ok("".into()),
                Ok("xyz".into())
            ]
        );
        // Exactly at the limit (newline not counted) passes; the rest of a long line is skipped.
        assert_eq!(
            lines(b"12345\n123456789012\nok\n", 5).await,
            [Ok("12345".into()), Err("too long"), Ok("ok".into())]
        );
        assert_eq!(lines(b"", 5).await, []);
    }

    fn registry() -> Arc<Registry> {
        use toolhost::registry::{Arguments, ToolDefinition, ToolError, ToolResult};
        use toolhost_sdk::schema::{object, string};
        let registry = Registry::new();
        registry
            .register(
                ToolDefinition::new(
                    "greet",
                    "Greet someone.",
                    object([("name", string("Who."))], ["name"]),
                ),
                |_ctx: CallContext, args: Arguments, _env: Environment| async move {
                    Ok(ToolResult::new(format!(
                        "Hello, {}!",
                        args.required_str("name")?
                    )))
                },
            )
            .unwrap();
        registry
            .register(
                ToolDefinition::new("turn", "Echo the environment.", json!({"type": "object"})),
                |_ctx: CallContext, _args: Arguments, env: Environment| async move {
                    Ok(ToolResult::new(
                        json!({"session": env.session_id, "turn": env.turn_id}),
                    ))
                },
            )
            .unwrap();
        registry
            .register(
                ToolDefinition::new("sleep", "Wait until cancelled.", json!({"type": "object"})),
                |ctx: CallContext, _args: Arguments, _env: Environment| async move {
                    ctx.cancellation().cancelled().await;
                    Err::<ToolResult, _>(ToolError::failed("cancelled"))
                },
            )
            .unwrap();
        Arc::new(registry)
    }

    async fn exchange(input: &str) -> Vec<Value> {
        let server = McpServer::new(registry()).with_session(Environment {
            session_id: "s-1".into(),
            turn_id: String::new(),
        });
        let mut output = Vec::new();
        server.serve(input.as_bytes(), &mut output).await.unwrap();
        String::from_utf8(output)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn answers_each_request_and_keeps_serving() {
        let out = exchange(concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}"#, "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, "\n",
            "garbage\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"nope"}"#, "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#, "\n",
            r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#, "\n",
        ))
        .await;
        assert_eq!(out.len(), 4, "{out:?}");
        assert_eq!(out[0]["result"]["protocolVersion"], "2024-11-05");
        assert_eq!(out[1]["id"], Value::Null);
        assert_eq!(out[1]["error"]["code"], -32700);
        assert_eq!(
            out[2],
            json!({"jsonrpc":"2.0","id":2,"error":{"code":-32601,
                "message":"Method not found: nope; this server answers initialize, ping, tools/list, tools/call, logging/setLevel"}})
        );
        assert_eq!(out[3], json!({"jsonrpc":"2.0","id":3,"result":{}}));
    }

    #[tokio::test]
    async fn tool_calls_and_errors_as_results() {
        let mut out = exchange(concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}"#, "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{}}}"#, "\n",
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"missing"}}"#, "\n",
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"greet","arguments":[1]}}"#, "\n",
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{}}"#, "\n",
        ))
        .await;
        out.sort_by_key(|m| m["id"].as_i64());
        let text = |m: &Value| {
            (
                m["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                m["result"]["isError"].clone(),
            )
        };
        assert_eq!(text(&out[0]), ("Hello, Ada!".into(), json!(false)));
        assert_eq!(text(&out[1]).1, json!(true));
        assert!(
            text(&out[1]).0.starts_with("greet: "),
            "{}",
            text(&out[1]).0
        );
        assert_eq!(
            text(&out[2]),
            ("unknown tool \"missing\": no tool of that name is registered; call one of the tools you were offered".into(), json!(true))
        );
        assert_eq!(text(&out[3]).1, json!(true));
        assert_eq!(out[4]["error"]["code"], -32602);
    }

    #[tokio::test]
    async fn fresh_turn_per_call_same_session() {
        let out = exchange(concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"turn"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"turn"}}"#,
            "\n",
        ))
        .await;
        let envs: Vec<Value> = out
            .iter()
            .map(|m| {
                serde_json::from_str(m["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
            })
            .collect();
        assert_eq!(
            (envs[0]["session"].clone(), envs[1]["session"].clone()),
            (json!("s-1"), json!("s-1"))
        );
        assert_ne!(envs[0]["turn"], envs[1]["turn"]);
        assert_eq!(envs[0]["turn"].as_str().unwrap().len(), 36);
    }

    #[tokio::test]
    async fn cancelled_call_is_stopped_and_not_answered() {
        let out = exchange(concat!(
            r#"{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"sleep"}}"#, "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"user"}}"#, "\n",
            r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#, "\n",
        ))
        .await;
        assert_eq!(out, [json!({"jsonrpc":"2.0","id":9,"result":{}})]);
    }

    #[tokio::test]
    async fn write_failure_is_an_error() {
        struct Broken;
        impl AsyncWrite for Broken {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
                _: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
            }
            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }
            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }
        }
        let server = McpServer::new(registry());
        let err = server
            .serve(
                &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"[..],
                Broken,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, ServeError::Write(ref e) if e.kind() == std::io::ErrorKind::BrokenPipe),
            "{err:?}"
        );
    }
}
