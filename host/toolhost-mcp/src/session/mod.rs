//! The transport-independent core: one MCP session's state and the methods it answers.
//!
//! A transport (stdio in [`McpServer`](crate::McpServer), Streamable HTTP in `http`) reads
//! a message, hands it to [`Session::receive`] and gets back a [`Step`]: nothing to send
//! (a notification), a [`Message`] to send at once (every method but `tools/call`), or a
//! [`PendingCall`] to run, concurrently with other messages, whose
//! [`run`](PendingCall::run) yields the call's response (or nothing, when the client
//! cancelled it). What a call may hold at once is the transport's business: it takes a
//! [`CallSlot`] from a [`CallLimiter`] before running the call.
//!
//! Messages the server sends on its own (progress, log lines, list changes) go through a
//! [`Notifier`]: each call gets one for messages about that request, and the session has
//! one for the rest ([`Session::set_notifier`]); a transport decides where they go (stdio:
//! the same output; HTTP: the request's event stream or the session's GET stream).
//!
//! Crate-private like the JSON-RPC layer it speaks (the crate's API is the two servers):
//! `tests::steps_for_each_kind_of_message` and `tests::a_call_runs_to_its_answer` below
//! show a message's way through it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use toolhost::registry::{CallContext, Environment, Registry, ToolCall};

use super::conn::{progress_hook, Conn, EncodedTools, Subscription};
use super::convert::{call_params, call_result, initialize_result_with, CallParams};
use super::jsonrpc::{response_head, Incoming, Params, RequestId, RpcError};
use super::logging::{self, SinkGuard};
use super::pagination::DEFAULT_PAGE_SIZE;
use super::protocol::{self, RequestMeta};
use super::revision::Revision;
use super::server::McpLimits;

/// One JSON-RPC message on its way out (a response or a notification): its JSON text in
/// parts, without a line end. A shared part (the encoded `tools/list`) is not copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Message {
    parts: Vec<Bytes>,
    error_code: Option<i64>,
}

impl Message {
    /// A success response answering `id` with `result` (its JSON text).
    pub(crate) fn response(id: &RequestId, result: Bytes) -> Self {
        Self {
            parts: vec![
                Bytes::from(response_head(id)),
                result,
                Bytes::from_static(b"}"),
            ],
            error_code: None,
        }
    }

    /// An error response (an unreadable id given as `"id": null`, JSON-RPC 2.0's rule;
    /// see [`Message::error_with`]).
    pub(crate) fn error(err: &RpcError) -> Self {
        Self::error_with(err, true)
    }

    /// An error response; `null_id` says how an unreadable id is given
    /// ([`RpcError::encode_with`]: as `null`, or no `id` member, as 2025-11-25 on ask).
    pub(crate) fn error_with(err: &RpcError, null_id: bool) -> Self {
        Self {
            parts: vec![Bytes::from(err.encode_with(null_id))],
            error_code: Some(err.code),
        }
    }

    /// A message whose whole JSON text is `text`.
    pub(crate) fn text(text: String) -> Self {
        Self {
            parts: vec![Bytes::from(text)],
            error_code: None,
        }
    }

    /// The answers of a JSON-RPC batch as one message, a JSON array (`None` when there is
    /// none: a batch of notifications only is not answered).
    pub(crate) fn batch(answers: Vec<Message>) -> Option<Self> {
        if answers.is_empty() {
            return None;
        }
        let mut parts = Vec::with_capacity(answers.len() * 4 + 1);
        for (at, answer) in answers.into_iter().enumerate() {
            parts.push(Bytes::from_static(if at == 0 { b"[" } else { b"," }));
            parts.extend(answer.parts);
        }
        parts.push(Bytes::from_static(b"]"));
        Some(Self {
            parts,
            error_code: None,
        })
    }

    /// A notification: `method` with `params` (left out when `None`).
    pub(crate) fn notification(method: &str, params: Option<&Value>) -> Self {
        let mut message = serde_json::json!({ "jsonrpc": "2.0", "method": method });
        if let Some(params) = params {
            message["params"] = params.clone();
        }
        Self {
            parts: vec![Bytes::from(message.to_string())],
            error_code: None,
        }
    }

    /// The error code, when this is an error response made here.
    pub(crate) fn error_code(&self) -> Option<i64> {
        self.error_code
    }

    /// The JSON text in parts, in order.
    pub(crate) fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// The length of the JSON text in bytes.
    pub(crate) fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    /// The JSON text in one piece.
    pub(crate) fn to_bytes(&self) -> Bytes {
        match self.parts.as_slice() {
            [one] => one.clone(),
            parts => Bytes::from(parts.concat()),
        }
    }
}

/// What [`Session::receive`] made of one message.
#[derive(Debug)]
#[must_use = "a reply must be sent and a call run"]
pub(crate) enum Step {
    /// Nothing to send: a notification, or a response to us.
    Nothing,
    /// The answer, ready to send.
    Reply(Message),
    /// A tool call: run it ([`PendingCall::run`]) to get its answer.
    Call(PendingCall),
    /// A subscription (`subscriptions/listen`, 2026-07-28): run it
    /// ([`PendingListen::run`]); it sends its notifications until the client cancels it
    /// or the session ends, and then gives its answer. It holds no call slot.
    Listen(PendingListen),
}

/// Where messages the server sends on its own go: a transport's outlet.
pub(crate) trait Outlet: Send + Sync + 'static {
    #[allow(
        dead_code,
        reason = "server-initiated messages (issue 12 part B: progress, log lines, list_changed) go this way; today only the transports' tests send through it"
    )]
    /// Sends `message`, waiting for room if the transport bounds what waits. A transport
    /// whose client is gone drops it.
    fn send(&self, message: Message) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;

    /// Sends `message` if that needs no waiting; `false` when it was dropped (the
    /// default: such a transport gets no progress or log lines). Progress and log lines
    /// go this way, so they never hold up a call. Must not log: it runs inside the log
    /// layer.
    fn try_send(&self, message: Message) -> bool {
        drop(message);
        false
    }
}

/// A handle for sending notifications through an [`Outlet`], or nowhere
/// ([`Notifier::none`]: the client cannot take them, e.g. a plain-JSON HTTP request).
#[derive(Clone, Default)]
pub(crate) struct Notifier(Option<Arc<dyn Outlet>>);

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Notifier(outlet)"
        } else {
            "Notifier(none)"
        })
    }
}

impl Notifier {
    /// Sends through `outlet`.
    pub(crate) fn new(outlet: Arc<dyn Outlet>) -> Self {
        Self(Some(outlet))
    }

    /// Sends nothing: every notification is dropped.
    pub(crate) fn none() -> Self {
        Self(None)
    }

    #[allow(
        dead_code,
        reason = "server-initiated messages (issue 12 part B: progress, log lines, list_changed) go this way; today only the transports' tests send through it"
    )]
    /// Whether anything reaches a client.
    pub(crate) fn is_connected(&self) -> bool {
        self.0.is_some()
    }

    #[allow(
        dead_code,
        reason = "server-initiated messages (issue 12 part B: progress, log lines, list_changed) go this way; today only the transports' tests send through it"
    )]
    /// Sends the notification `method` with `params`; nothing when not connected.
    pub(crate) async fn notify(&self, method: &str, params: Option<&Value>) {
        if let Some(outlet) = &self.0 {
            outlet.send(Message::notification(method, params)).await;
        }
    }

    #[allow(
        dead_code,
        reason = "server-initiated messages (issue 12 part B: progress, log lines, list_changed) go this way; today only the transports' tests send through it"
    )]
    /// Sends `message` as it is; nothing when not connected.
    pub(crate) async fn send(&self, message: Message) {
        if let Some(outlet) = &self.0 {
            outlet.send(message).await;
        }
    }

    /// Sends `message` if the outlet takes it without waiting ([`Outlet::try_send`]);
    /// `false` when it was dropped.
    pub(crate) fn try_send(&self, message: Message) -> bool {
        self.0
            .as_ref()
            .is_some_and(|outlet| outlet.try_send(message))
    }
}

/// What a server holds now and held at most, counted across every session that shares
/// the counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) queued_bytes: AtomicUsize,
    pub(crate) queued_answers: AtomicUsize,
    pub(crate) peak_queued_bytes: AtomicUsize,
    pub(crate) calls_running: AtomicUsize,
    pub(crate) peak_calls_running: AtomicUsize,
    pub(crate) call_argument_bytes: AtomicUsize,
    pub(crate) tools_list_encodings: AtomicUsize,
}

/// One registry as MCP offers it: the registry and its `tools/list` (each tool encoded
/// once per registry generation, each page built once), shared by every session over it.
#[derive(Debug)]
pub(crate) struct Catalog {
    pub(crate) registry: Arc<Registry>,
    tools: Mutex<Option<Arc<EncodedTools>>>,
    counters: Arc<Counters>,
    /// Whether clients are told when the tool list changes (hot reload).
    pub(crate) list_changed: bool,
    /// Tools per `tools/list` page.
    pub(crate) page_size: usize,
}

impl Catalog {
    pub(crate) fn new(registry: Arc<Registry>, counters: Arc<Counters>) -> Self {
        Self {
            registry,
            tools: Mutex::new(None),
            counters,
            list_changed: false,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }

    /// This catalog telling clients when the registry's tools change.
    pub(crate) fn with_list_changed(mut self, list_changed: bool) -> Self {
        self.list_changed = list_changed;
        self
    }

    /// This catalog listing at most `tools` tools per page (at least 1).
    pub(crate) fn with_page_size(mut self, tools: usize) -> Self {
        self.page_size = tools.max(1);
        self
    }

    /// The tool set encoded, once per registry generation and shared after.
    fn encoded_tools(&self) -> Arc<EncodedTools> {
        let mut cached = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = self.registry.generation();
        if let Some(tools) = cached
            .as_ref()
            .filter(|tools| tools.generation == generation)
        {
            return Arc::clone(tools);
        }
        // Read after the generation: a change in between makes the next list encode again.
        let tools = Arc::new(EncodedTools::new(generation, &self.registry.definitions()));
        self.counters
            .tools_list_encodings
            .fetch_add(1, Ordering::SeqCst);
        *cached = Some(Arc::clone(&tools));
        tools
    }

    /// The `tools/list` page `params` asks for, shaped for the request's revision.
    fn tools_list(
        &self,
        id: &RequestId,
        params: &Params,
        meta: &RequestMeta,
    ) -> Result<Bytes, RpcError> {
        self.encoded_tools()
            .page(id, params, meta, self.page_size, self.list_changed)
    }
}

/// In-flight tool calls by request id key, so `notifications/cancelled` can stop them;
/// each with its number among the session's calls.
type InFlight = Mutex<HashMap<String, (u64, CancellationToken)>>;

struct Inner {
    catalog: Arc<Catalog>,
    env: Environment,
    in_flight: InFlight,
    /// Numbers the calls, so a finished call never removes a later one with its id.
    calls: AtomicU64,
    /// The legacy revision `initialize` settled, the `logging/setLevel` sink, the open
    /// subscriptions.
    conn: Conn,
    /// Where the session's own notifications (not about one request) go; shared with the
    /// session's log sink.
    notifier: Arc<Mutex<Notifier>>,
    /// Cancelled when the session ends: every call it runs stops.
    closed: CancellationToken,
}

/// One MCP session: its id, the registry it serves, its calls in flight, the protocol
/// version it settled on. Cheap to clone (shared).
#[derive(Clone)]
pub(crate) struct Session(Arc<Inner>);

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("session_id", &self.0.env.session_id)
            .field("protocol", &self.protocol())
            .finish_non_exhaustive()
    }
}

impl Session {
    #[cfg(test)]
    /// A session over `registry` whose calls belong to `env`'s session (the turn id is
    /// replaced per call).
    pub(crate) fn new(registry: Arc<Registry>, env: Environment) -> Self {
        let counters = Arc::default();
        Self::with_catalog(Arc::new(Catalog::new(registry, counters)), env)
    }

    /// A session sharing `catalog` (and its encoded `tools/list`) with others.
    pub(crate) fn with_catalog(catalog: Arc<Catalog>, env: Environment) -> Self {
        Self::with_catalog_under(catalog, env, CancellationToken::new())
    }

    /// A session that also ends when `closed` is cancelled (a server shutting down).
    pub(crate) fn with_catalog_under(
        catalog: Arc<Catalog>,
        env: Environment,
        closed: CancellationToken,
    ) -> Self {
        let notifier = Arc::new(Mutex::new(Notifier::none()));
        let sender = Arc::clone(&notifier);
        // The session's log lines (`logging/setLevel`, and host-wide news) go wherever its
        // notifications go now, when there is room.
        let sink = SinkGuard::new(None, true, move |line| {
            let notifier = sender
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            notifier.try_send(Message::text(line));
        });
        Self(Arc::new(Inner {
            catalog,
            env,
            in_flight: InFlight::default(),
            calls: AtomicU64::new(0),
            conn: Conn::new(sink, closed.child_token()),
            notifier,
            closed,
        }))
    }

    /// The registry this session serves.
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.0.catalog.registry
    }

    /// The environment its calls run in (session id; the turn id is fresh per call).
    pub(crate) fn environment(&self) -> &Environment {
        &self.0.env
    }

    /// The protocol version `initialize` settled on, `None` before it (and for a client
    /// of the modern era, which names the revision in each request instead).
    pub(crate) fn protocol(&self) -> Option<&'static str> {
        self.0.conn.negotiated().map(Revision::as_str)
    }

    /// Whether an array is read as a JSON-RPC batch: only once `initialize` settled on
    /// 2025-03-26, the one revision with batches. A transport that reads an array
    /// otherwise passes it to [`Session::receive`] as it is, which refuses it.
    pub(crate) fn accepts_batches(&self) -> bool {
        self.0.conn.accepts_batches()
    }

    /// Whether an error whose request id could not be read says `"id": null` (a legacy
    /// revision up to 2025-06-18 negotiated) or leaves the id out (2025-11-25 on, and
    /// before any negotiation).
    pub(crate) fn null_error_id(&self) -> bool {
        self.0.conn.null_error_id()
    }

    /// Whether the session tells clients when the tool list changes (hot reload).
    pub(crate) fn announces_changes(&self) -> bool {
        self.0.catalog.list_changed
    }

    /// A receiver of the registry's changes that has seen the tool set as it is now.
    pub(crate) fn tool_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        let mut changes = self.registry().changes();
        changes.borrow_and_update();
        changes
    }

    /// Sends `notifications/tools/list_changed` through the session's notifier each time
    /// the registry's tools change, once a legacy client has initialized, until the session
    /// ends; returns at once when the session does not announce changes. A transport runs
    /// it beside the session (stdio: for the whole input; HTTP: while the session's GET
    /// stream is open). Clients of the modern era subscribe instead
    /// (`subscriptions/listen`).
    ///
    /// `changes` comes from [`Session::tool_changes`], taken before the task is spawned:
    /// a change made before the task first runs is then still announced.
    pub(crate) async fn announce_changes(&self, mut changes: tokio::sync::watch::Receiver<u64>) {
        if !self.announces_changes() {
            return;
        }
        loop {
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                () = self.0.closed.cancelled() => return,
            }
            changes.borrow_and_update();
            if self.0.conn.negotiated().is_some() {
                debug!("tools changed: telling the client");
                self.notifier()
                    .send(Message::text(
                        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#
                            .to_owned(),
                    ))
                    .await;
            }
        }
    }

    /// An error response as this session's revision gives it ([`Session::null_error_id`]).
    pub(crate) fn error_message(&self, err: &RpcError) -> Message {
        Message::error_with(err, self.null_error_id())
    }

    fn error(&self, err: &RpcError) -> Message {
        self.error_message(err)
    }

    /// Sends the session's own notifications (not about one request) through `notifier`
    /// from now on; [`Notifier::none`] drops them.
    pub(crate) fn set_notifier(&self, notifier: Notifier) {
        *self
            .0
            .notifier
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = notifier;
    }

    #[allow(
        dead_code,
        reason = "server-initiated messages (issue 12 part B: progress, log lines, list_changed) go this way; today only the transports' tests send through it"
    )]
    /// Where the session's own notifications go now.
    pub(crate) fn notifier(&self) -> Notifier {
        self.0
            .notifier
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Ends the session: every call it runs is cancelled (and left unanswered).
    pub(crate) fn close(&self) {
        self.0.closed.cancel();
    }

    /// Ends the open subscriptions (`subscriptions/listen`), each answered with its
    /// completion result, as a server closing them does; calls keep running. For a
    /// transport whose input ended.
    pub(crate) fn end_subscriptions(&self) {
        self.0.conn.closing.cancel();
    }

    /// Completes when the session is closed.
    pub(crate) async fn closed(&self) {
        self.0.closed.cancelled().await;
    }

    #[cfg(test)]
    /// Whether [`Session::close`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.0.closed.is_cancelled()
    }

    /// How many tool calls of this session are running.
    pub(crate) fn calls_in_flight(&self) -> usize {
        lock(&self.0.in_flight).len()
    }

    /// Handles one incoming message (or the error its parsing gave): what to send, or the
    /// call to run. Never waits.
    pub(crate) fn receive(&self, message: Result<Incoming, RpcError>) -> Step {
        let message = match message {
            Ok(message) => message,
            Err(err) => {
                debug!(code = err.code, "{}", err.message);
                return Step::Reply(self.error(&err));
            }
        };
        match message {
            Incoming::Request { id, method, params } => {
                debug!(%id, %method, "request");
                let conn = &self.0.conn;
                let meta = match protocol::read_meta(&id, &method, &params, conn.negotiated()) {
                    Ok(meta) => meta,
                    Err(err) => return Step::Reply(self.error(&err)),
                };
                let list_changed = self.0.catalog.list_changed;
                let reply = match (method.as_str(), meta.modern) {
                    ("initialize", false) => Ok(Bytes::from(self.initialize(&params).to_string())),
                    ("ping", false) => Ok(Bytes::from_static(b"{}")),
                    ("logging/setLevel", false) => conn
                        .set_level(&id, &params)
                        .map(|()| Bytes::from_static(b"{}")),
                    ("server/discover", true) => Ok(Bytes::from(
                        protocol::discover_result(&meta, list_changed).to_string(),
                    )),
                    ("tools/list", _) => self.0.catalog.tools_list(&id, &params, &meta),
                    ("tools/call", _) => match call_params(&id, &params) {
                        Ok(call) => return Step::Call(self.pending_call(id, call, meta)),
                        Err(err) => Err(err),
                    },
                    ("subscriptions/listen", true) => {
                        match conn.listen(&id, &params, &meta, list_changed) {
                            Ok(subscription) => {
                                return Step::Listen(PendingListen {
                                    registration: self.register(&id),
                                    subscription,
                                })
                            }
                            Err(err) => Err(err),
                        }
                    }
                    _ => Err(protocol::method_not_found(&id, &method, &meta)),
                };
                Step::Reply(match reply {
                    Ok(result) => Message::response(&id, result),
                    Err(err) => self.error(&err),
                })
            }
            Incoming::Notification { method, params } => {
                match method.as_str() {
                    "notifications/initialized" => debug!("client initialized"),
                    "notifications/cancelled" => self.cancel(&params),
                    _ => debug!(%method, "ignored notification"),
                }
                Step::Nothing
            }
            Incoming::Response { id } => {
                debug!(%id, "ignored a response: this server sends no requests");
                Step::Nothing
            }
        }
    }

    fn initialize(&self, params: &Params) -> Value {
        let requested = params.str("protocolVersion");
        let result = initialize_result_with(requested.as_deref(), self.0.catalog.list_changed);
        let info = params.value("clientInfo");
        let client = |field: &str| {
            info.as_ref()
                .and_then(|info| info.get(field))
                .and_then(|value| value.as_str())
                .unwrap_or("unknown")
                .to_owned()
        };
        let (name, version) = (client("name"), client("version"));
        let protocol = result["protocolVersion"].as_str().unwrap_or_default();
        if let Some(revision) = Revision::parse(protocol) {
            self.0.conn.negotiate(revision);
        }
        info!(
            session_id = %self.0.env.session_id,
            client = %name,
            client_version = %version,
            requested = requested.as_deref().unwrap_or("none"),
            protocol,
            "initialize"
        );
        result
    }

    /// Registers the call as in flight (so a cancellation that comes right after finds
    /// it) and hands it out to be run.
    fn pending_call(&self, id: RequestId, call: CallParams, meta: RequestMeta) -> PendingCall {
        PendingCall {
            registration: self.register(&id),
            id,
            call,
            meta,
        }
    }

    /// Registers a request as in flight, so `notifications/cancelled` finds it.
    fn register(&self, id: &RequestId) -> Registration {
        let key = id.key();
        let token = self.0.closed.child_token();
        let number = self.0.calls.fetch_add(1, Ordering::Relaxed);
        lock(&self.0.in_flight).insert(key.clone(), (number, token.clone()));
        Registration {
            session: self.clone(),
            key,
            number,
            token,
        }
    }

    fn cancel(&self, params: &Params) {
        let Some(raw) = params.raw("requestId") else {
            debug!("notifications/cancelled without a requestId");
            return;
        };
        let Ok(id) = RequestId::from_raw(raw) else {
            debug!("notifications/cancelled with a requestId that is not a string or a number");
            return;
        };
        match lock(&self.0.in_flight).get(&id.key()) {
            Some((_, token)) => {
                info!(request = %id, reason = ?params.str("reason"), "client cancelled a tool call");
                token.cancel();
            }
            None => debug!(request = %id, "cancelled a request that is not in flight"),
        }
    }
}

/// A call's entry among its session's calls in flight, removed when the call ends (or is
/// dropped without running).
struct Registration {
    session: Session,
    key: String,
    /// Which call of the session this is (ids may be reused).
    number: u64,
    token: CancellationToken,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut in_flight = lock(&self.session.0.in_flight);
        // Another call may have taken the same id since: leave its entry alone.
        if in_flight
            .get(&self.key)
            .is_some_and(|(number, _)| *number == self.number)
        {
            in_flight.remove(&self.key);
        }
    }
}

/// A `tools/call` to run, from [`Session::receive`]. Dropping it without running drops
/// the call (its entry among the calls in flight goes with it).
pub(crate) struct PendingCall {
    registration: Registration,
    id: RequestId,
    call: CallParams,
    meta: RequestMeta,
}

impl std::fmt::Debug for PendingCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingCall")
            .field("id", &self.id)
            .field("tool", &self.call.name)
            .finish_non_exhaustive()
    }
}

impl PendingCall {
    /// The request's id.
    pub(crate) fn id(&self) -> &RequestId {
        &self.id
    }

    #[cfg(test)]
    /// The tool's name.
    pub(crate) fn tool(&self) -> &str {
        &self.call.name
    }

    /// The size of the arguments' JSON text, what the call holds of
    /// [`McpLimits::max_in_flight_bytes`].
    pub(crate) fn argument_bytes(&self) -> usize {
        self.call.arguments.len()
    }

    /// A token cancelled when the client cancels the call (or the session ends); a
    /// transport cancels it too when its client is gone.
    pub(crate) fn cancellation(&self) -> CancellationToken {
        self.registration.token.clone()
    }

    /// Runs the call, holding `slot` until it ends, and gives its response: `None` when
    /// the call was cancelled (MCP: a cancelled request is not answered). Messages about
    /// the call (progress when the client sent a `progressToken`, log lines at the level
    /// it asked for) go through `notifier`, when they fit without waiting.
    pub(crate) async fn run(self, slot: CallSlot, notifier: Notifier) -> Option<Message> {
        let _slot = slot;
        let session = self.registration.session.clone();
        let token = self.registration.token.clone();
        let env = session.0.env.next_turn();
        let id = self.id;
        let meta = self.meta;
        // Log lines of this call go to the client that asked, at the level it asked for:
        // in the modern era per request; in the legacy era at the session's level, on
        // this call's own channel when it has one (an HTTP event stream), else on the
        // session's.
        let level = if meta.modern {
            meta.log_level
        } else {
            session.0.conn.level()
        };
        let request_sink = match level {
            Some(level) if notifier.is_connected() => {
                let sender = notifier.clone();
                Some(SinkGuard::new(Some(level), false, move |line| {
                    sender.try_send(Message::text(line));
                }))
            }
            _ => None,
        };
        let sink = match (&request_sink, meta.modern) {
            (Some(sink), _) => sink.id(),
            (None, true) => 0,
            (None, false) => session.0.conn.sink_id(),
        };
        let progress = match &meta.progress_token {
            Some(progress_token) if notifier.is_connected() => Some(progress_hook(
                progress_token.clone(),
                notifier.clone(),
                token.clone(),
            )),
            _ => None,
        };
        info!(session_id = %env.session_id, turn_id = %env.turn_id, tool = %self.call.name, request = %id, "tools/call");
        let started = Instant::now();
        let call = ToolCall {
            id: id.as_json().to_owned(),
            name: self.call.name,
            arguments: self.call.arguments,
        };
        let mut ctx = CallContext::new().with_cancellation(token.clone());
        if let Some((hook, _)) = &progress {
            ctx = ctx.with_progress(hook.clone());
        }
        // The call's own lines (the plugin's, the host's about it) go to its log sink.
        let span = logging::call_span(sink);
        let outcome = tracing::Instrument::instrument(
            session.registry().dispatch(&ctx, &call, &env),
            span.clone(),
        )
        .await;
        // Progress stops with the call, whatever its threads still do.
        if let Some((_, done)) = &progress {
            done.cancel();
        }
        drop(self.registration);
        let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
        span.in_scope(|| match &outcome {
            Ok(_) => info!(turn_id = %env.turn_id, tool = %call.name, elapsed_ms, "tool call ok"),
            Err(err) => info!(
                turn_id = %env.turn_id, tool = %call.name, elapsed_ms, kind = err.kind(),
                "tool call failed: {err}"
            ),
        });
        drop(request_sink);
        if token.is_cancelled() {
            // MCP: the receiver of a cancellation should not answer the cancelled request.
            debug!(request = %id, "not answering a cancelled call");
            return None;
        }
        let result = protocol::complete(&meta, call_result(&outcome));
        Some(Message::response(&id, Bytes::from(result.to_string())))
    }
}

/// A `subscriptions/listen` request to run, from [`Session::receive`]: it acknowledges,
/// then sends the tool-list changes it asked for until the client cancels it or the
/// session ends. Dropping it without running drops the subscription.
pub(crate) struct PendingListen {
    registration: Registration,
    subscription: Subscription,
}

impl std::fmt::Debug for PendingListen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingListen")
            .field("id", self.subscription.id())
            .finish_non_exhaustive()
    }
}

impl PendingListen {
    /// The request's id.
    pub(crate) fn id(&self) -> &RequestId {
        self.subscription.id()
    }

    /// A token cancelled when the client cancels the subscription (or the session
    /// ends); a transport cancels it too when its client is gone.
    pub(crate) fn cancellation(&self) -> CancellationToken {
        self.registration.token.clone()
    }

    /// Runs the subscription, sending its notifications through `notifier`, until the
    /// client cancels it (`None`: not answered) or the session ends (its response).
    pub(crate) async fn run(self, notifier: Notifier) -> Option<Message> {
        let changes = self.registration.session.registry().changes();
        let token = self.registration.token.clone();
        let closing = self.registration.session.0.conn.closing.clone();
        // A cancelled request is not answered; the session's end completes it.
        let cancelled = CancellationToken::new();
        let watcher = {
            let (token, cancelled) = (token.clone(), cancelled.clone());
            async move {
                token.cancelled().await;
                if !closing.is_cancelled() {
                    cancelled.cancel();
                }
            }
        };
        let run = self.subscription.run(changes, &notifier, cancelled.clone());
        tokio::pin!(run);
        let answer = tokio::select! {
            answer = &mut run => answer,
            () = watcher => run.await,
        };
        drop(self.registration);
        answer
    }
}

/// What the calls in flight may hold: [`McpLimits::max_in_flight`] places and
/// [`McpLimits::max_in_flight_bytes`] of arguments. Share one among the sessions whose
/// calls it bounds together. Never closed: acquiring only waits.
#[derive(Debug, Clone)]
pub(crate) struct CallLimiter {
    calls: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    bytes_capacity: usize,
    limits: McpLimits,
    counters: Arc<Counters>,
}

/// Why [`CallLimiter::try_acquire`] gave no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum Busy {
    /// As many calls as allowed are running.
    #[error("{limit} tool calls are running, the most allowed at once; retry when one ends")]
    Calls {
        /// The limit, [`McpLimits::max_in_flight`].
        limit: usize,
    },
    /// The calls running hold too many bytes of arguments for these to fit.
    #[error("the tool calls running hold too much argument data ({limit} bytes at most) for {wanted} more bytes; retry when one ends")]
    Bytes {
        /// The limit, [`McpLimits::max_in_flight_bytes`].
        limit: usize,
        /// The arguments' size.
        wanted: usize,
    },
}

impl CallLimiter {
    #[cfg(test)]
    /// A limiter for `limits`' in-flight counts, with its own counters.
    pub(crate) fn new(limits: &McpLimits) -> Self {
        Self::with_counters(limits, Arc::default())
    }

    pub(crate) fn with_counters(limits: &McpLimits, counters: Arc<Counters>) -> Self {
        let bytes_capacity = limits.max_in_flight_bytes.get().min(Semaphore::MAX_PERMITS);
        Self {
            calls: Arc::new(Semaphore::new(
                limits.max_in_flight.get().min(Semaphore::MAX_PERMITS),
            )),
            bytes: Arc::new(Semaphore::new(bytes_capacity)),
            bytes_capacity,
            limits: *limits,
            counters,
        }
    }

    fn wanted(&self, bytes: usize) -> u32 {
        u32::try_from(bytes.clamp(1, self.bytes_capacity)).unwrap_or(u32::MAX)
    }

    /// A place for one more call whose arguments are `bytes` long, waiting while
    /// [`McpLimits::max_in_flight`] calls hold one, or while the arguments do not fit in
    /// what [`McpLimits::max_in_flight_bytes`] leaves. Arguments larger than the whole
    /// budget wait until no other call runs, then go alone.
    pub(crate) async fn acquire(&self, bytes: usize) -> CallSlot {
        let permit = match Arc::clone(&self.calls).try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(TryAcquireError::NoPermits | TryAcquireError::Closed) => {
                info!(
                    limit = self.limits.max_in_flight,
                    "tool calls at the in-flight limit: this call, and reading further messages, wait until one ends"
                );
                Arc::clone(&self.calls).acquire_owned().await.ok()
            }
        };
        let wanted = self.wanted(bytes);
        let bytes_permit = match Arc::clone(&self.bytes).try_acquire_many_owned(wanted) {
            Ok(permit) => Some(permit),
            Err(TryAcquireError::NoPermits | TryAcquireError::Closed) => {
                info!(
                    limit = self.limits.max_in_flight_bytes,
                    arguments = bytes,
                    "tool call arguments over the in-flight byte limit: this call, and reading further messages, wait until calls end"
                );
                Arc::clone(&self.bytes)
                    .acquire_many_owned(wanted)
                    .await
                    .ok()
            }
        };
        self.slot(permit, bytes_permit, bytes)
    }

    /// A place for one more call, now or never: for transports that refuse work over the
    /// limit instead of waiting.
    ///
    /// # Errors
    /// [`Busy`] naming the limit that is reached.
    pub(crate) fn try_acquire(&self, bytes: usize) -> Result<CallSlot, Busy> {
        let permit = Arc::clone(&self.calls)
            .try_acquire_owned()
            .map_err(|_| Busy::Calls {
                limit: self.limits.max_in_flight.get(),
            })?;
        let bytes_permit = Arc::clone(&self.bytes)
            .try_acquire_many_owned(self.wanted(bytes))
            .map_err(|_| Busy::Bytes {
                limit: self.limits.max_in_flight_bytes.get(),
                wanted: bytes,
            })?;
        Ok(self.slot(Some(permit), Some(bytes_permit), bytes))
    }

    fn slot(
        &self,
        permit: Option<OwnedSemaphorePermit>,
        bytes_permit: Option<OwnedSemaphorePermit>,
        bytes: usize,
    ) -> CallSlot {
        let c = &self.counters;
        let now = c.calls_running.fetch_add(1, Ordering::SeqCst) + 1;
        c.peak_calls_running.fetch_max(now, Ordering::SeqCst);
        c.call_argument_bytes.fetch_add(bytes, Ordering::SeqCst);
        CallSlot {
            _permits: (permit, bytes_permit),
            bytes,
            counters: Arc::clone(&self.counters),
        }
    }
}

/// One tool call's place among the calls in flight, given back when dropped.
pub(crate) struct CallSlot {
    /// A place and its arguments' bytes (`None` only if the semaphores were closed,
    /// which they never are).
    _permits: (Option<OwnedSemaphorePermit>, Option<OwnedSemaphorePermit>),
    bytes: usize,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for CallSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallSlot")
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl Drop for CallSlot {
    fn drop(&mut self) {
        self.counters.calls_running.fetch_sub(1, Ordering::SeqCst);
        self.counters
            .call_argument_bytes
            .fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

fn lock(
    in_flight: &InFlight,
) -> std::sync::MutexGuard<'_, HashMap<String, (u64, CancellationToken)>> {
    // The map is only inserted into and removed from; a poisoned lock leaves it usable.
    in_flight.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;

    use super::*;
    use crate::jsonrpc::parse_line;
    use toolhost::registry::{Arguments, ToolDefinition, ToolResult};

    fn session() -> Session {
        let registry = Registry::new();
        registry
            .register(
                ToolDefinition::new("echo", "Echo.", serde_json::json!({"type": "object"})),
                |_ctx: CallContext, args: Arguments, _env: Environment| async move {
                    Ok(ToolResult::new(args.raw().to_owned()))
                },
            )
            .unwrap();
        Session::new(
            Arc::new(registry),
            Environment {
                session_id: "s".into(),
                turn_id: String::new(),
            },
        )
    }

    fn call(session: &Session, id: &str) -> PendingCall {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"a":1}}}}}}"#
        );
        match session.receive(parse_line(line.as_bytes())) {
            Step::Call(call) => call,
            other => panic!("{other:?}"),
        }
    }

    fn cancel(session: &Session, id: &str) {
        let line = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
        );
        assert!(matches!(
            session.receive(parse_line(line.as_bytes())),
            Step::Nothing
        ));
    }

    #[test]
    fn steps_for_each_kind_of_message() {
        let session = session();
        assert_eq!(session.protocol(), None);
        let Step::Reply(reply) = session.receive(parse_line(
            br#"{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#,
        )) else {
            panic!()
        };
        let reply: Value = serde_json::from_slice(&reply.to_bytes()).unwrap();
        assert_eq!(reply["result"]["protocolVersion"], "2025-06-18");
        assert_eq!(session.protocol(), Some("2025-06-18"));
        assert!(matches!(
            session.receive(parse_line(
                br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
            )),
            Step::Nothing
        ));
        assert!(matches!(
            session.receive(parse_line(br#"{"jsonrpc":"2.0","id":5,"result":{}}"#)),
            Step::Nothing
        ));
        let Step::Reply(reply) = session.receive(parse_line(b"nope")) else {
            panic!()
        };
        assert!(reply.to_bytes().starts_with(br#"{"error":{"code":-32700"#));
        let call = call(&session, "7");
        assert_eq!(
            (call.id().as_json(), call.tool(), call.argument_bytes()),
            ("7", "echo", 7)
        );
        assert_eq!(session.calls_in_flight(), 1);
        drop(call);
        assert_eq!(
            session.calls_in_flight(),
            0,
            "a dropped call leaves no entry"
        );
    }

    #[tokio::test]
    async fn a_call_runs_to_its_answer() {
        let session = session();
        let limiter = CallLimiter::new(&McpLimits::default());
        let call = call(&session, r#""x""#);
        let slot = limiter.try_acquire(call.argument_bytes()).unwrap();
        let reply = call.run(slot, Notifier::none()).await.unwrap();
        assert_eq!(
            reply.to_bytes(),
            r#"{"id":"x","jsonrpc":"2.0","result":{"content":[{"text":"{\"a\":1}","type":"text"}],"isError":false}}"#
        );
        assert_eq!(session.calls_in_flight(), 0);
    }

    #[tokio::test]
    async fn a_finished_call_never_unregisters_a_later_one_with_its_id() {
        let session = session();
        let first = call(&session, "1");
        let second = call(&session, "1");
        drop(first);
        assert_eq!(session.calls_in_flight(), 1);
        let token = second.cancellation();
        cancel(&session, "1");
        assert!(
            token.is_cancelled(),
            "the later call is still found by its id"
        );
        let slot = CallLimiter::new(&McpLimits::default())
            .try_acquire(0)
            .unwrap();
        assert_eq!(second.run(slot, Notifier::none()).await, None);
    }

    #[test]
    fn closing_the_session_cancels_its_calls() {
        let session = session();
        let pending = call(&session, "3");
        let token = pending.cancellation();
        assert!(!token.is_cancelled() && !session.is_closed());
        session.close();
        assert!(token.is_cancelled() && session.is_closed());
    }

    #[test]
    fn try_acquire_refuses_over_either_limit() {
        let limits = McpLimits {
            max_in_flight: NonZeroUsize::new(2).unwrap(),
            max_in_flight_bytes: NonZeroUsize::new(100).unwrap(),
            ..McpLimits::default()
        };
        let limiter = CallLimiter::new(&limits);
        let a = limiter.try_acquire(60).unwrap();
        assert_eq!(
            limiter.try_acquire(60).unwrap_err(),
            Busy::Bytes {
                limit: 100,
                wanted: 60
            }
        );
        let b = limiter.try_acquire(40).unwrap();
        assert_eq!(
            limiter.try_acquire(0).unwrap_err(),
            Busy::Calls { limit: 2 }
        );
        drop((a, b));
        // Larger than the whole budget: alone, it goes.
        let _c = limiter.try_acquire(1000).unwrap();
    }

    struct Collect(Mutex<Vec<Bytes>>);

    impl Outlet for Collect {
        fn send(&self, message: Message) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
            self.0.lock().unwrap().push(message.to_bytes());
            Box::pin(async {})
        }
    }

    #[tokio::test]
    async fn notifiers_send_through_their_outlet_or_nowhere() {
        let outlet = Arc::new(Collect(Mutex::new(Vec::new())));
        let session = session();
        assert!(!session.notifier().is_connected());
        session.notifier().notify("x", None).await;
        session.set_notifier(Notifier::new(Arc::clone(&outlet) as Arc<dyn Outlet>));
        session
            .notifier()
            .notify(
                "notifications/tools/list_changed",
                Some(&serde_json::json!({})),
            )
            .await;
        assert_eq!(
            *outlet.0.lock().unwrap(),
            [Bytes::from_static(
                br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{}}"#
            )]
        );
    }
}
