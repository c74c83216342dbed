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

mod announce;
mod answer;
mod calls;
mod catalog;
mod catalog_work;
mod interaction;
mod limiter;
mod message;
mod notifier;
mod offer;
mod state;
mod subscriptions;
mod task_asking;
mod task_home;
mod task_inputs;
mod task_published;
mod task_shared;
mod tasks;

pub(crate) use crate::counters::Counters;
use calls::Work;
pub(crate) use calls::{PendingCall, PendingListen};
pub(crate) use catalog::Catalog;
pub(crate) use limiter::{CallLimiter, CallSlot, Reserved};
pub(crate) use message::Message;
pub(crate) use notifier::{Notifier, Outlet};
use task_published::ListenTasks;
pub(crate) use tasks::TaskOwner;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use bytes::Bytes;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use toolhost::registry::{Environment, Registry};

use crate::convert::{call_params, initialize_result_with};
use crate::elicit::Questions;
use crate::jsonrpc::{Incoming, Params, RequestId, RpcError};
use crate::logging::SinkGuard;
use crate::protocol::{self, RequestMeta};
use crate::resources::{add_cache_hints, templates_result};
use crate::revision::Revision;
use state::SessionState;

/// The target of the core's log lines in every file of this module: its own path, the
/// logger name clients see in `notifications/message` and what `RUST_LOG` filters on,
/// as it was when the module was one file.
const LOG_TARGET: &str = module_path!();

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
    state: SessionState,
    /// Where the session's own notifications (not about one request) go; shared with the
    /// session's log sink.
    notifier: Arc<Mutex<Notifier>>,
    /// Cancelled when the session ends: every call it runs stops.
    closed: CancellationToken,
    /// The questions it has open for its client's user (elicitation).
    questions: Arc<Questions>,
    /// The files it subscribed to (`resources/subscribe`).
    subscribed: crate::resources::subscribe::Subscribed,
    /// Where its tasks are kept and whose they are, when it offers tasks
    /// ([`Session::set_tasks`]).
    tasks: OnceLock<tasks::TaskHome>,
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
            state: SessionState::new(sink, closed.child_token()),
            notifier,
            closed,
            questions: Arc::default(),
            subscribed: crate::resources::subscribe::Subscribed::default(),
            tasks: OnceLock::new(),
        }))
    }

    /// The registry this session serves.
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.0.catalog.registry
    }

    #[cfg(feature = "http")]
    /// The environment its calls run in (session id; the turn id is fresh per call).
    pub(crate) fn environment(&self) -> &Environment {
        &self.0.env
    }

    /// The protocol version `initialize` settled on, `None` before it (and for a client
    /// of the modern era, which names the revision in each request instead).
    pub(crate) fn protocol(&self) -> Option<&'static str> {
        self.0.state.negotiated().map(Revision::as_str)
    }

    /// For a session rebuilt from its id by a process that did not answer its
    /// `initialize`: `revision` (what its requests name) taken as negotiated.
    #[cfg(feature = "http")]
    pub(crate) fn resume_as(&self, revision: Revision) {
        if self.0.state.negotiated().is_none() {
            self.0.state.negotiate(revision);
        }
    }

    /// Whether an array is read as a JSON-RPC batch: only once `initialize` settled on
    /// 2025-03-26, the one revision with batches. A transport that reads an array
    /// otherwise passes it to [`Session::receive`] as it is, which refuses it.
    pub(crate) fn accepts_batches(&self) -> bool {
        self.0.state.accepts_batches()
    }

    /// Whether an error whose request id could not be read says `"id": null` (a legacy
    /// revision up to 2025-06-18 negotiated) or leaves the id out (2025-11-25 on, and
    /// before any negotiation).
    pub(crate) fn null_error_id(&self) -> bool {
        self.0.state.null_error_id()
    }

    /// Whether the session tells clients when the tool list changes (hot reload).
    pub(crate) fn announces_changes(&self) -> bool {
        self.0.catalog.list_changed
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
        self.0.state.closing.cancel();
    }

    #[cfg(feature = "http")]
    /// Completes when the session is closed.
    pub(crate) async fn closed(&self) {
        self.0.closed.cancelled().await;
    }

    #[cfg(test)]
    /// Whether [`Session::close`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.0.closed.is_cancelled()
    }

    #[cfg(all(test, feature = "http"))]
    /// The session's open questions (elicitation).
    pub(crate) fn questions(&self) -> &Questions {
        &self.0.questions
    }

    #[cfg(any(feature = "http", test))]
    /// How many tool calls of this session are running.
    pub(crate) fn calls_in_flight(&self) -> usize {
        lock(&self.0.in_flight).len()
    }

    /// Handles one incoming message (or the error its parsing gave): what to send, or the
    /// call to run. Never waits.
    pub(crate) fn receive(&self, message: Result<Incoming, RpcError>) -> Step {
        self.receive_traced(message, None)
    }

    /// [`Session::receive`] with the trace context the transport carried (the HTTP
    /// `traceparent` header): a request's own `_meta.traceparent` wins over it.
    pub(crate) fn receive_traced(
        &self,
        message: Result<Incoming, RpcError>,
        transport_parent: Option<toolhost::registry::TraceParent>,
    ) -> Step {
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
                let conn = &self.0.state;
                let mut meta = match protocol::read_meta(&id, &method, &params, conn.negotiated()) {
                    Ok(meta) => meta,
                    Err(err) => return Step::Reply(self.error(&err)),
                };
                if meta.trace_parent.is_none() {
                    meta.trace_parent = transport_parent;
                }
                if let Some(step) = self.catalog_step(&id, &method, &params, &meta) {
                    return step;
                }
                let list_changed = self.0.catalog.list_changed;
                let has_resources = self.0.catalog.resources.is_some();
                let reply = match (method.as_str(), meta.modern) {
                    ("initialize", false) => Ok(Bytes::from(self.initialize(&params).to_string())),
                    ("ping", false) => Ok(Bytes::from_static(b"{}")),
                    ("logging/setLevel", false) => conn
                        .set_level(&id, &params)
                        .map(|()| Bytes::from_static(b"{}")),
                    ("server/discover", true) => {
                        let mut result = self.with_task_extension(protocol::discover_result(
                            &meta,
                            list_changed,
                            has_resources,
                        ));
                        self.add_capabilities(&mut result["capabilities"]);
                        Ok(Bytes::from(result.to_string()))
                    }
                    ("resources/templates/list", _) if has_resources => {
                        let mut result = templates_result();
                        if meta.modern {
                            add_cache_hints(&method, &mut result);
                        }
                        Ok(Bytes::from(protocol::complete(&meta, result).to_string()))
                    }
                    ("resources/list" | "resources/read" | "completion/complete", _) => {
                        match &self.0.catalog.resources {
                            Some(files) => {
                                match files.request(&id, &method, &params, self.0.catalog.page_size)
                                {
                                    Ok(request) => {
                                        return Step::Call(self.pending(
                                            id,
                                            Work::Resource(request),
                                            meta,
                                        ))
                                    }
                                    Err(err) => Err(err),
                                }
                            }
                            None => Err(protocol::method_not_found(&id, &method, &meta, false)),
                        }
                    }
                    ("tools/list", _) => self.0.catalog.tools_list(&id, &params, &meta),
                    ("tools/call", _) => match call_params(&id, &params) {
                        Ok(call) => return self.call_step(id, call, &params, meta),
                        Err(err) => Err(err),
                    },
                    ("subscriptions/listen", true) => {
                        let listened = self.listen_resources(&id, &params).and_then(|watch| {
                            let tasks = self.listen_tasks(&id, &params, &meta)?;
                            conn.listen(&id, &params, &meta, list_changed)
                                .map(|subscription| subscription.watching(watch).hearing(tasks))
                        });
                        match listened {
                            Ok(subscription) => {
                                return Step::Listen(PendingListen {
                                    registration: self.register(&id),
                                    subscription,
                                })
                            }
                            Err(err) => Err(err),
                        }
                    }
                    (task_method, modern)
                        if crate::tasks::TASK_METHODS.contains(&task_method)
                            || (modern && task_method == crate::tasks::UPDATE_METHOD) =>
                    {
                        if let Some(home) = self.tasks_for(&meta) {
                            return self.task_request(home, id, task_method, &params, meta);
                        }
                        Err(protocol::method_not_found(
                            &id,
                            &method,
                            &meta,
                            has_resources,
                        ))
                    }
                    _ => Err(protocol::method_not_found(
                        &id,
                        &method,
                        &meta,
                        has_resources,
                    )),
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
            Incoming::Response { id, body } => {
                self.0.questions.answer(&id, body);
                Step::Nothing
            }
        }
    }

    fn initialize(&self, params: &Params) -> Value {
        let requested = params.str("protocolVersion");
        let catalog = &self.0.catalog;
        let mut result = initialize_result_with(
            requested.as_deref(),
            catalog.list_changed,
            catalog.resources.is_some(),
        );
        self.add_capabilities(&mut result["capabilities"]);
        let info = params.value("clientInfo");
        let client = |field: &str| {
            info.as_ref()
                .and_then(|info| info.get(field))
                .and_then(|value| value.as_str())
                .unwrap_or("unknown")
                .to_owned()
        };
        let (name, version) = (client("name"), client("version"));
        let result = self.with_task_capability(result);
        let protocol = result["protocolVersion"].as_str().unwrap_or_default();
        if let Some(revision) = Revision::parse(protocol) {
            self.0.state.negotiate(revision);
        }
        self.0
            .questions
            .read_capabilities(params, Revision::parse(protocol));
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

    /// Registers the call (or resource request) as in flight (so a cancellation that
    /// comes right after finds it) and hands it out to be run.
    fn pending(&self, id: RequestId, work: Work, meta: RequestMeta) -> PendingCall {
        PendingCall {
            registration: self.register(&id),
            id,
            work,
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

fn lock(
    in_flight: &InFlight,
) -> std::sync::MutexGuard<'_, HashMap<String, (u64, CancellationToken)>> {
    // The map is only inserted into and removed from; a poisoned lock leaves it usable.
    in_flight.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
