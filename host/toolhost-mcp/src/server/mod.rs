//! The serving loop: read lines, answer requests, run tool calls concurrently, write every
//! response through one writer.
//!
//! # Memory
//! What the server holds for its client is bounded, so a client that stops reading its
//! answers, or floods requests, slows itself down instead of growing the host:
//! - the line being read: at most [`McpLimits::max_line_bytes`];
//! - answers waiting to be written: at most [`McpLimits::max_queued_bytes`] (or a single
//!   answer larger than that, alone). While the queue is full the server reads no request
//!   (backpressure): the client's pipe fills and its own writes block;
//! - tool calls: at most [`McpLimits::max_in_flight`] running at once, built-in tools and
//!   plugins alike, and at most [`McpLimits::max_queued_calls`] more waiting in order
//!   for a place; running and waiting calls hold at most
//!   [`McpLimits::max_in_flight_bytes`] of arguments (with their ids and tool names)
//!   between them. Calls running at the limit never stop the reading: a cancellation, a
//!   ping or `tools/list` is read and answered at once, and a cancelled call that waits
//!   leaves the queue without running. Only a full queue, or a full byte budget, stops
//!   the reading until a call starts or ends (at the latest at the registry's call
//!   time-out), and the log says so. A call keeps its place until its answer is queued,
//!   so finished calls cannot pile up behind a full answer queue either;
//! - `tools/list`: encoded once and shared by every answer (the registry only grows; a
//!   new tool makes the next `tools/list` encode again).
//!
//! The worst case is about `max_in_flight_bytes` of arguments (a few times that once the
//! registry has parsed them) + `max_in_flight` results under the registry's cap +
//! `max_queued_bytes` + one line + a few hundred bytes of bookkeeping per queued call:
//! 64 MiB + 64 × 64 KiB + 4 MiB + 16 MiB + 256 × ~0.5 KiB with the defaults.

use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, BufReader};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use toolhost::registry::{Environment, Registry};

use super::jsonrpc::{parse_batch, parse_line, Incoming, RequestId, RpcError, INVALID_REQUEST};
use super::session::{CallLimiter, Catalog, Counters, Message, Notifier, Session, Step};
use super::ServeError;
use crate::approval::ApprovalPolicy;
use crate::elicit::Asking;
use crate::limits::{McpLimits, McpStats};
use crate::resources::FileResources;

mod lines;
mod outbox;
mod queue;
mod stdio;

use lines::{read_line, trim_line, Line};
use outbox::{write_loop, Answer, Outbox};
use queue::CallQueue;

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
            .with_page_size(self.catalog.page_size)
            .with_resources(self.catalog.resources.clone())
            .with_asking(self.catalog.asking.clone()),
        );
        self
    }

    /// This server listing at most `tools` tools per `tools/list` page (at least 1;
    /// default [`DEFAULT_PAGE_SIZE`](crate::limits::DEFAULT_PAGE_SIZE)); the rest
    /// follow through `nextCursor`.
    pub fn with_page_size(mut self, tools: usize) -> Self {
        self.catalog = Arc::new(
            Catalog::new(
                Arc::clone(&self.catalog.registry),
                Arc::clone(&self.counters),
            )
            .with_list_changed(self.catalog.list_changed)
            .with_page_size(tools)
            .with_resources(self.catalog.resources.clone())
            .with_asking(self.catalog.asking.clone()),
        );
        self
    }

    /// This server offering `resources`, the files under a storage root, as MCP
    /// resources (`resources/list`, `resources/read`, `resources/templates/list`,
    /// `completion/complete` of paths): it then declares the `resources` and
    /// `completions` capabilities. Off by default (the methods are unknown). See
    /// [`resources`](crate::resources) for what each method answers and refuses.
    pub fn with_resources(mut self, resources: FileResources) -> Self {
        self.catalog = Arc::new(
            Catalog::new(
                Arc::clone(&self.catalog.registry),
                Arc::clone(&self.counters),
            )
            .with_list_changed(self.catalog.list_changed)
            .with_page_size(self.catalog.page_size)
            .with_resources(Some(resources))
            .with_asking(self.catalog.asking.clone()),
        );
        self
    }

    /// This server asking its client's user before a call the `policy` names runs
    /// (human approval by policy, through elicitation; docs/protocol.md). A client that
    /// cannot ask gets such calls refused, never run. None by default.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use toolhost::registry::Registry;
    /// use toolhost_mcp::{ApprovalPolicy, McpServer};
    ///
    /// let server = McpServer::new(Arc::new(Registry::new()))
    ///     .with_approval(ApprovalPolicy::new().confirm_destructive());
    /// # let _ = server;
    /// ```
    pub fn with_approval(self, policy: ApprovalPolicy) -> Self {
        let asking = self.catalog.asking.clone().with_approval(policy);
        self.with_asking(asking)
    }

    /// How long one question to the client's user (elicitation, approval) waits for its
    /// answer: [`DEFAULT_CONFIRM_TIMEOUT`](crate::elicit::DEFAULT_CONFIRM_TIMEOUT)
    /// (120 s) by default, at most
    /// [`MAX_CONFIRM_TIMEOUT`](crate::elicit::MAX_CONFIRM_TIMEOUT) (longer is cut to it).
    pub fn with_confirm_timeout(self, timeout: Duration) -> Self {
        let mut asking = self.catalog.asking.clone();
        asking.timeout = timeout.min(crate::elicit::MAX_CONFIRM_TIMEOUT);
        self.with_asking(asking)
    }

    fn with_asking(mut self, asking: Asking) -> Self {
        self.catalog = Arc::new(
            Catalog::new(
                Arc::clone(&self.catalog.registry),
                Arc::clone(&self.counters),
            )
            .with_list_changed(self.catalog.list_changed)
            .with_page_size(self.catalog.page_size)
            .with_resources(self.catalog.resources.clone())
            .with_asking(asking),
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

    /// This server with `bytes` as the longest line it reads (default [`MAX_LINE_BYTES`](crate::limits::MAX_LINE_BYTES)).
    pub fn with_max_line_bytes(mut self, bytes: usize) -> Self {
        self.limits = self.limits.with_max_line_bytes(bytes);
        self
    }

    /// This server with `calls` as the most tool calls running at once (default
    /// [`DEFAULT_MAX_IN_FLIGHT`](crate::limits::DEFAULT_MAX_IN_FLIGHT)).
    pub fn with_max_in_flight(mut self, calls: NonZeroUsize) -> Self {
        self.limits = self.limits.with_max_in_flight(calls);
        self
    }

    /// This server with `calls` as the most tool calls waiting for a place (default
    /// [`DEFAULT_MAX_QUEUED_CALLS`](crate::limits::DEFAULT_MAX_QUEUED_CALLS)).
    pub fn with_max_queued_calls(mut self, calls: NonZeroUsize) -> Self {
        self.limits = self.limits.with_max_queued_calls(calls);
        self
    }

    /// The limits this server keeps.
    pub fn limits(&self) -> McpLimits {
        self.limits
    }

    /// What the server holds now and held at most.
    pub fn stats(&self) -> McpStats {
        self.counters.stats()
    }

    /// The session every call of this server belongs to.
    pub fn session(&self) -> &Environment {
        &self.session
    }

    /// Serves MCP on the process's stdin and stdout until stdin ends.
    ///
    /// Pipes and sockets (how MCP clients start servers) are read and written
    /// non-blocking on the runtime's event loop, and the server runs as a task of its own
    /// on the runtime's workers, next to the tool calls, rather than wherever the caller
    /// awaits: every thread hand-off saved is CPU and latency per call. A terminal or a
    /// file, or a stdout that is also stderr, is served through tokio's blocking stdio.
    ///
    /// # Errors
    /// As [`McpServer::serve`].
    ///
    /// # Panics
    /// Outside a tokio runtime, or in one without IO enabled (`enable_io`, which
    /// `enable_all` and `#[tokio::main]` include) when stdin or stdout is a pipe or a
    /// socket, as tokio's own sockets do. A panic of the server is passed on.
    pub async fn serve_stdio(&self) -> Result<(), ServeError> {
        let (input, output) = stdio::open();
        debug!(
            stdin_event_driven = input.is_event_driven(),
            stdout_event_driven = output.is_event_driven(),
            "stdio opened"
        );
        let server = self.clone();
        let serving = async move { server.serve_with_writer_task(input, output).await };
        joined(tokio::spawn(serving).await)
    }

    /// Serves MCP, one JSON-RPC message per line, reading `input` and writing `output`,
    /// until `input` ends. Tool calls in flight then finish and are answered before this
    /// returns.
    ///
    /// While `output` does not take the answers (the client stopped reading), or the
    /// queue of tool calls waiting for a place is full, `input` is not read: see
    /// [`McpLimits`]. Calls at the in-flight limit alone never stop the reading.
    ///
    /// # Errors
    /// [`ServeError::Read`] or [`ServeError::Write`] on an I/O error (the client went away).
    /// Malformed messages are answered with JSON-RPC errors and are not errors here.
    pub async fn serve<R, W>(&self, input: R, output: W) -> Result<(), ServeError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        self.serve_with(input, |answers, space, failed| {
            write_loop(output, answers, space, failed)
        })
        .await
    }

    /// [`McpServer::serve`] with the writer as a task of its own. A task that wakes
    /// itself (the reader queueing an answer for a writer polled in the same task) is
    /// rescheduled as if it yielded, and tokio then wakes an idle worker to share the
    /// queue: a futex round trip per answer. A reader that wakes a writer task hands it
    /// the thread instead.
    async fn serve_with_writer_task<R, W>(&self, input: R, output: W) -> Result<(), ServeError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        self.serve_with(input, |answers, space, failed| async move {
            joined(tokio::spawn(write_loop(output, answers, space, failed)).await)
        })
        .await
    }

    /// Serves `input`, its answers written by the future `write` makes of the queue.
    async fn serve_with<R, F, Fut>(&self, input: R, write: F) -> Result<(), ServeError>
    where
        R: AsyncRead + Unpin,
        F: FnOnce(UnboundedReceiver<Answer>, Arc<Semaphore>, CancellationToken) -> Fut,
        Fut: Future<Output = Result<(), ServeError>>,
    {
        info!(
            session_id = %self.session.session_id,
            tools = self.catalog.registry.len(),
            max_in_flight = self.limits.max_in_flight(),
            max_queued_calls = self.limits.max_queued_calls(),
            max_in_flight_bytes = self.limits.max_in_flight_bytes(),
            max_queued_bytes = self.limits.max_queued_bytes(),
            "MCP server ready: reading JSON-RPC from stdin, one message per line"
        );
        let (outbox, answers) = Outbox::new(self.limits.max_queued_bytes(), &self.counters);
        let space = Arc::clone(&outbox.space);
        let writer_failed = CancellationToken::new();
        let (read, write) = tokio::join!(
            self.read_loop(BufReader::new(input), outbox, writer_failed.clone()),
            write(answers, space, writer_failed),
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
        session.set_tasks(
            Arc::new(
                crate::tasks::TaskStore::new(&self.limits).counting(Arc::clone(&self.counters)),
            ),
            crate::session::TaskOwner::Session(self.session.session_id.clone()),
        );
        let notifier = Notifier::new(Arc::new(outbox.clone()));
        session.set_notifier(notifier.clone());
        let limiter = CallLimiter::with_counters(&self.limits, Arc::clone(&self.counters));
        // Calls past the in-flight limit wait here, and the reading goes on.
        let queue = CallQueue::new(self.limits.max_queued_calls(), limiter, &self.counters);
        tasks.spawn(queue.clone().dispatch(notifier.clone()));
        // Tells an initialized legacy client when the tools change (with --watch).
        let announcer = tokio::spawn({
            let session = session.clone();
            let changes = session.tool_changes();
            async move { session.announce_changes(changes).await }
        });
        let mut line = Vec::new();
        let mut discarding = false;
        let max_line = self.limits.max_line_bytes();
        // A request read while the previous one waited for room in the full call queue:
        // handled next, before any further line is read.
        let mut held: Option<Result<Incoming, RpcError>> = None;
        let mut input_ended = false;
        loop {
            let message = if let Some(message) = held.take() {
                message
            } else {
                if input_ended {
                    break;
                }
                let read = tokio::select! {
                    read = read_line(&mut input, &mut line, &mut discarding, max_line) => read,
                    () = writer_failed.cancelled() => break,
                };
                match read.map_err(ServeError::Read)? {
                    Line::Eof => break,
                    Line::TooLong => Err(line_too_long(max_line)),
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
                                    .batch(&session, batch, &outbox, &notifier, &queue, &mut tasks);
                                tokio::select! {
                                    () = handled => {}
                                    () = writer_failed.cancelled() => break,
                                }
                                // It may have held cancellations.
                                queue.prune();
                                continue;
                            }
                        }
                        let message = parse_line(text);
                        line.clear();
                        message
                    }
                }
            };
            let cancels = is_cancel(&message);
            // Handling may wait (room in the response queue, a place in the call queue):
            // that is the backpressure. While it waits, lines go on being read as long as
            // they are not requests: answers to the server's own questions (a call that
            // waits for its user's answer must get it, or the full queue never drains)
            // and notifications (cancellations above all). The first request read stops
            // the reading until the wait ends; it is handled next.
            {
                let handled = async {
                    let step = session.receive(message);
                    let reply_to = ReplyTo::Out(notifier.clone());
                    step_task(step, &notifier, reply_to, &queue, &mut tasks).await;
                };
                tokio::pin!(handled);
                loop {
                    tokio::select! {
                        biased;
                        () = &mut handled => break,
                        () = writer_failed.cancelled() => break,
                        read = read_line(&mut input, &mut line, &mut discarding, max_line),
                            if held.is_none() && !input_ended =>
                        {
                            match read.map_err(ServeError::Read)? {
                                Line::Eof => input_ended = true,
                                Line::TooLong => held = Some(Err(line_too_long(max_line))),
                                Line::Complete => {
                                    let text = trim_line(&line);
                                    if text.is_empty() || session.accepts_batches() && text.starts_with(b"[") {
                                        // A batch waits like a request; an empty line is nothing.
                                        if !text.is_empty() {
                                            held = Some(Err(RpcError::new(
                                                RequestId::null(),
                                                INVALID_REQUEST,
                                                "Invalid Request: a batch sent while the call queue is full is refused; send it again once calls have finished".to_owned(),
                                            )));
                                        }
                                        line.clear();
                                        continue;
                                    }
                                    let message = parse_line(text);
                                    line.clear();
                                    match message {
                                        Ok(Incoming::Request { .. }) | Err(_) => held = Some(message),
                                        other => {
                                            let cancel = is_cancel(&other);
                                            // Answers and notifications get no reply and
                                            // need no call slot: handled at once.
                                            if let Step::Reply(reply) = session.receive(other) {
                                                ReplyTo::Out(notifier.clone()).reply(Some(reply)).await;
                                            }
                                            if cancel {
                                                queue.prune();
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            if writer_failed.is_cancelled() {
                break;
            }
            if cancels {
                // A cancelled call that waits for a place leaves the queue now.
                queue.prune();
            }
            while let Some(joined) = tasks.try_join_next() {
                report_join(joined);
            }
        }
        // No call comes any more: the queued ones run, then the dispatcher ends.
        queue.close();
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
        queue: &CallQueue,
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
            step_task(step, notifier, ReplyTo::Batch(sender), queue, tasks).await;
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

/// Whether `message` is a cancellation.
fn is_cancel(message: &Result<Incoming, RpcError>) -> bool {
    matches!(
        message,
        Ok(Incoming::Notification { method, .. }) if method == "notifications/cancelled"
    )
}

/// The error for a line longer than `max_line` bytes (logged once here).
fn line_too_long(max_line: usize) -> RpcError {
    warn!(
        limit = max_line,
        "skipped a message longer than the line limit"
    );
    RpcError::new(
        RequestId::null(),
        INVALID_REQUEST,
        format!("Invalid Request: the message is longer than {max_line} bytes, the limit for one line; send less per call"),
    )
}

/// Does what `step` asks for: sends a reply through `reply_to`, queues a call (which
/// answers through `reply_to` when it has run), or starts a subscription as a task in
/// `tasks`. Queueing a call waits while the queue is full (the backpressure).
async fn step_task(
    step: Step,
    notifier: &Notifier,
    reply_to: ReplyTo,
    queue: &CallQueue,
    tasks: &mut JoinSet<()>,
) {
    match step {
        Step::Nothing => reply_to.reply(None).await,
        Step::Reply(reply) => reply_to.reply(Some(reply)).await,
        Step::Call(call) => match queue.try_start(&call) {
            Some(slot) => {
                queue::spawn_call(tasks, call, slot, notifier.clone(), reply_to);
            }
            None => queue.push(call, reply_to).await,
        },
        Step::Listen(listen) => {
            let notifier = notifier.clone();
            tasks.spawn(async move { reply_to.reply(listen.run(notifier).await).await });
        }
    }
}

/// What a part of the server spawned as a task ended with: its result, its panic passed
/// on, or `Ok` when the runtime cancelled it (it is shutting down, and the caller with it).
fn joined(
    joined: Result<Result<(), ServeError>, tokio::task::JoinError>,
) -> Result<(), ServeError> {
    match joined {
        Ok(served) => served,
        Err(err) => match err.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_cancelled) => Ok(()),
        },
    }
}

fn report_join(joined: Result<(), tokio::task::JoinError>) {
    if let Err(err) = joined {
        if err.is_panic() {
            error!("a tool call task panicked outside the registry; its request was not answered");
        }
    }
}

#[cfg(test)]
mod tests;
