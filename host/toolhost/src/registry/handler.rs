//! What a tool's code looks like to the registry.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{Arguments, Environment, Interaction, ToolError, ToolResult};

/// The future a [`Handler`] returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<ToolResult, ToolError>> + Send>>;

/// A tool's code. Any `Fn(CallContext, Arguments, Environment) -> impl Future` that is
/// `Send + Sync + 'static` is a handler, so an `async move` closure registers directly.
///
/// A returned error is shown to the model as the tool's failure: write it for the model.
pub trait Handler: Send + Sync + 'static {
    /// Runs one call.
    fn call(&self, ctx: CallContext, arguments: Arguments, env: Environment) -> HandlerFuture;

    /// Whether this tool calls other tools of its registry (a code tool, a plugin holding
    /// the `tools` grant): dispatch then gives its calls a
    /// [`Composer`](super::Composer) ([`CallContext::composer`]), and never offers it to,
    /// nor lets it be called by, another composing tool. Default: `false`.
    fn composes(&self) -> bool {
        false
    }

    /// For a composing tool: whether its grant lets it call tool `name` (the tools its
    /// description lists, [`Registry::offered_definitions`](super::Registry::offered_definitions)).
    /// Dispatch still checks every nested call; this only says what to tell the model.
    /// Default: `true`.
    fn may_call(&self, name: &str) -> bool {
        let _ = name;
        true
    }
}

impl<F, Fut> Handler for F
where
    F: Fn(CallContext, Arguments, Environment) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ToolResult, ToolError>> + Send + 'static,
{
    fn call(&self, ctx: CallContext, arguments: Arguments, env: Environment) -> HandlerFuture {
        Box::pin(self(ctx, arguments, env))
    }
}

/// The deadline and cancellation signal of one call.
///
/// Callers pass one to [`Registry::dispatch`](super::Registry::dispatch); dispatch hands
/// the handler a copy whose deadline is the earlier of the caller's and the registry's
/// per-call timeout, and stops the handler when either passes. Long-running handlers
/// (a grep over a big tree, a plugin call) check [`CallContext::expired`] between steps.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    deadline: Option<Instant>,
    cancellation: CancellationToken,
    progress: Option<ProgressHook>,
    result_cap: Option<usize>,
    interaction: Option<InteractionHandle>,
    time_limit: Option<Duration>,
    trace_parent: Option<super::TraceParent>,
    trace_span_id: Option<[u8; 8]>,
    outgoing_gate: Option<OutgoingGate>,
    composer: Option<super::Composer>,
    gate: Option<GateHandle>,
    nested_in: Option<std::sync::Arc<str>>,
    record: Option<std::sync::Arc<super::CallRecord>>,
}

/// What a call's outgoing network requests (a plugin's HTTP) are counted against, set
/// by the caller with [`CallContext::with_outgoing_gate`] (a server's per-principal
/// quota): asked once per request before it is sent; `Err` refuses the request with
/// the message (which names the quota and when it resets). Must be cheap. A gate may
/// also count each admitted request somewhere a round trip away (a counter shared by
/// several processes, [`OutgoingGate::with_shared`]): that count is awaited before the
/// request is sent, never while the plugin runs.
#[derive(Clone)]
pub struct OutgoingGate {
    admit: std::sync::Arc<dyn Fn() -> Result<(), String> + Send + Sync>,
    shared: Option<std::sync::Arc<SharedAdmit>>,
}

/// A request's count by an [`OutgoingGate`]'s shared part, awaited before the request
/// is sent: `Err` refuses it with the message.
pub type OutgoingCount = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// The asynchronous part of an [`OutgoingGate`]: `None` when nothing is to be counted
/// (no round trip), else the count to await before the request is sent.
type SharedAdmit = dyn Fn() -> Option<OutgoingCount> + Send + Sync;

impl OutgoingGate {
    /// A gate asking `admit` before each outgoing request.
    pub fn new(admit: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> Self {
        Self {
            admit: std::sync::Arc::new(admit),
            shared: None,
        }
    }

    /// This gate, also awaiting the count `shared` gives (when it gives one) after
    /// [`OutgoingGate::admit`] let a request through and before it is sent; `Err`
    /// refuses the request with the message.
    #[must_use]
    pub fn with_shared(
        mut self,
        shared: impl Fn() -> Option<OutgoingCount> + Send + Sync + 'static,
    ) -> Self {
        self.shared = Some(std::sync::Arc::new(shared));
        self
    }

    /// Whether one more request may go out now.
    ///
    /// # Errors
    /// The refusal's message.
    pub fn admit(&self) -> Result<(), String> {
        (self.admit)()
    }

    /// The shared count of a request [`OutgoingGate::admit`] let through, to await
    /// before it is sent (`Err`: refused, with the message); `None` when there is none.
    #[must_use]
    pub fn admit_shared(&self) -> Option<OutgoingCount> {
        self.shared.as_ref().and_then(|shared| shared())
    }
}

impl std::fmt::Debug for OutgoingGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutgoingGate")
    }
}

/// The [`Interaction`] of a call, shared (a newtype so [`CallContext`] stays `Debug`).
#[derive(Clone)]
struct InteractionHandle(std::sync::Arc<dyn Interaction>);

impl std::fmt::Debug for InteractionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interaction")
    }
}

/// How far a long call has got, as a tool reports it with [`CallContext::report_progress`]
/// (MCP's `notifications/progress`): `progress` grows with every report; `total` is the
/// end when it is known.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Work done so far (files scanned, bytes written...).
    pub progress: f64,
    /// The work there is in all, when known.
    pub total: Option<f64>,
    /// What is going on, for a person watching.
    pub message: Option<String>,
}

/// Where a call's [`Progress`] goes: set by the caller with [`CallContext::with_progress`]
/// (an MCP server, for a client that asked with a `progressToken`). Called from the
/// tool's own threads, possibly many times a second: it must be cheap and must not
/// block (the MCP server throttles and drops rather than waits).
#[derive(Clone)]
pub struct ProgressHook(std::sync::Arc<dyn Fn(Progress) + Send + Sync>);

impl ProgressHook {
    /// A hook calling `report` with each progress report.
    pub fn new(report: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(report))
    }
}

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressHook")
    }
}

impl CallContext {
    /// No deadline of its own (the registry's timeout still applies) and not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// A context that expires `timeout` from now.
    pub fn with_timeout(timeout: Duration) -> Self {
        Self::default().deadline_at(Instant::now() + timeout)
    }

    /// This context with its deadline at `deadline` (or the existing one, if earlier).
    pub fn deadline_at(mut self, deadline: Instant) -> Self {
        self.deadline = Some(match self.deadline {
            Some(existing) => existing.min(deadline),
            None => deadline,
        });
        self
    }

    /// This context cancelled by `token`.
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = token;
        self
    }

    /// This context reporting progress to `hook`.
    pub fn with_progress(mut self, hook: ProgressHook) -> Self {
        self.progress = Some(hook);
        self
    }

    /// This context with its own time limit, in place of the registry's call timeout and
    /// a plugin's per-call limit: for a call the operator allowed to run longer (an MCP
    /// task under `--task-timeout`). The deadline still applies when it is earlier.
    pub fn with_time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = Some(limit);
        self
    }

    /// The call's own time limit, when it has one ([`CallContext::with_time_limit`]).
    pub fn time_limit(&self) -> Option<Duration> {
        self.time_limit
    }

    /// This context able to ask the client's user through `interaction`.
    pub fn with_interaction(mut self, interaction: std::sync::Arc<dyn Interaction>) -> Self {
        self.interaction = Some(InteractionHandle(interaction));
        self
    }

    /// How this call may ask the client's user, if it may: `None` when the caller set
    /// none (no client, or a client that cannot ask), which a tool must read as "no".
    pub fn interaction(&self) -> Option<&std::sync::Arc<dyn Interaction>> {
        self.interaction.as_ref().map(|handle| &handle.0)
    }

    /// This context carrying the caller's trace context (a client's `traceparent`): the
    /// [`CallObserver`](super::CallObserver) sees it, to parent the call's span, and
    /// the call gets a random span id of its own ([`CallContext::trace_span_id`]) that
    /// the call's outgoing requests name as their parent.
    pub fn with_trace_parent(mut self, parent: super::TraceParent) -> Self {
        self.trace_parent = Some(parent);
        let mut span_id = [0u8; 8];
        span_id.copy_from_slice(&uuid::Uuid::new_v4().as_bytes()[..8]);
        if span_id == [0; 8] {
            span_id[7] = 1;
        }
        self.trace_span_id = Some(span_id);
        self
    }

    /// The call's own span id, set with [`CallContext::with_trace_parent`]: the span an
    /// exporter records for the call should have it.
    pub fn trace_span_id(&self) -> Option<[u8; 8]> {
        self.trace_span_id
    }

    /// The `traceparent` the call's outgoing requests carry: the caller's trace, with
    /// the call's own span as parent. `None` when the caller sent no trace context.
    pub fn outgoing_trace_parent(&self) -> Option<super::TraceParent> {
        let (parent, span_id) = (self.trace_parent?, self.trace_span_id?);
        Some(super::TraceParent { span_id, ..parent })
    }

    /// This context recording what the call does through the host into `record`
    /// (dispatch sets it when the registry's observer
    /// [asks](super::CallWatch::record) for the call).
    pub fn with_record(mut self, record: std::sync::Arc<super::CallRecord>) -> Self {
        self.record = Some(record);
        self
    }

    /// Where a handler records what the call does through the host (files read and
    /// written, HTTP requests), when someone watches: `None` otherwise, and the handler
    /// records nothing (no clock read, no allocation).
    pub fn record(&self) -> Option<&std::sync::Arc<super::CallRecord>> {
        self.record.as_ref()
    }

    /// This context counting its outgoing requests against `gate`.
    pub fn with_outgoing_gate(mut self, gate: OutgoingGate) -> Self {
        self.outgoing_gate = Some(gate);
        self
    }

    /// The gate its outgoing requests are counted against, if any.
    pub fn outgoing_gate(&self) -> Option<&OutgoingGate> {
        self.outgoing_gate.as_ref()
    }

    /// The caller's trace context, if it sent a well-formed one.
    pub fn trace_parent(&self) -> Option<super::TraceParent> {
        self.trace_parent
    }

    /// How this call reaches the other tools of its registry: set by
    /// [`Registry::dispatch`](super::Registry::dispatch) for a tool whose handler
    /// [composes](Handler::composes), `None` otherwise.
    pub fn composer(&self) -> Option<&super::Composer> {
        self.composer.as_ref()
    }

    /// This context with `composer` (dispatch sets it).
    pub(crate) fn with_composer(mut self, composer: super::Composer) -> Self {
        self.composer = Some(composer);
        self
    }

    /// This context checking every nested call of a composing tool with `gate` before
    /// it runs (the checks the caller applies to direct calls outside dispatch, such as
    /// an approval).
    pub fn with_gate(mut self, gate: std::sync::Arc<dyn CallGate>) -> Self {
        self.gate = Some(GateHandle(gate));
        self
    }

    /// The gate nested calls pass ([`CallContext::with_gate`]).
    pub(crate) fn gate(&self) -> Option<&std::sync::Arc<dyn CallGate>> {
        self.gate.as_ref().map(|gate| &gate.0)
    }

    /// Whether this is a nested call, made by a composing tool through its
    /// [`Composer`](super::Composer): it runs inside that tool's call (which waits for
    /// it), so it may use what that call holds (a plugin's concurrency slot).
    pub fn is_nested(&self) -> bool {
        self.nested_in.is_some()
    }

    /// The composing tool whose call made this nested call, if it is one
    /// ([`CallContext::is_nested`]).
    pub fn nested_in(&self) -> Option<&str> {
        self.nested_in.as_deref()
    }

    /// The context of a nested call made from this one (the handler context of a call
    /// of the composing tool `parent`): its deadline, cancellation, interaction and gate,
    /// its outgoing-request gate (the principal's quota: a nested plugin's HTTP counts
    /// as the caller's own), its trace as the parent, and nothing else (no progress, no
    /// own time limit, no composer).
    pub(crate) fn nested(&self, parent: &str) -> Self {
        let mut nested = Self {
            deadline: self.deadline,
            cancellation: self.cancellation.clone(),
            interaction: self.interaction.clone(),
            gate: self.gate.clone(),
            outgoing_gate: self.outgoing_gate.clone(),
            nested_in: Some(std::sync::Arc::from(parent)),
            ..Self::default()
        };
        if let Some(parent) = self.outgoing_trace_parent() {
            nested = nested.with_trace_parent(parent);
        }
        nested
    }

    /// Whether anyone listens to progress reports: a tool may skip counting when not.
    pub fn wants_progress(&self) -> bool {
        self.progress.is_some()
    }

    /// Reports how far the call has got (`done` of `total`, when known). Does nothing
    /// unless the caller asked for progress; the message is only built when it did.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use toolhost::registry::{CallContext, ProgressHook};
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let sink = Arc::clone(&seen);
    /// let ctx = CallContext::new()
    ///     .with_progress(ProgressHook::new(move |p| sink.lock().unwrap().push(p.progress)));
    /// ctx.report_progress(1, Some(4), || Some("1 of 4 files".into()));
    /// ctx.report_progress(4, Some(4), || None);
    /// assert_eq!(*seen.lock().unwrap(), [1.0, 4.0]);
    /// ```
    pub fn report_progress(
        &self,
        done: u64,
        total: Option<u64>,
        message: impl FnOnce() -> Option<String>,
    ) {
        if let Some(hook) = &self.progress {
            (hook.0)(Progress {
                progress: done as f64,
                total: total.map(|total| total as f64),
                message: message(),
            });
        }
    }

    /// The largest result the call may return, JSON-encoded, in bytes: the registry's
    /// [result cap](super::Registry::result_cap), set by dispatch (`None` outside it). A
    /// tool whose result will pass it can stop building that result and answer
    /// [`ToolError::ResultTooLarge`](super::ToolError::ResultTooLarge) instead.
    pub fn result_cap(&self) -> Option<usize> {
        self.result_cap
    }

    /// This context with the result cap dispatch applies.
    pub(crate) fn with_result_cap(mut self, cap: usize) -> Self {
        self.result_cap = Some(cap);
        self
    }

    /// When the call must be finished, if it has a deadline.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Time left before the deadline (`None` without one; zero once passed).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|deadline| deadline.saturating_duration_since(Instant::now()))
    }

    /// The token that cancels this call.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancellation
    }

    /// Whether the call was cancelled or its deadline has passed.
    pub fn expired(&self) -> bool {
        self.cancellation.is_cancelled() || self.remaining() == Some(Duration::ZERO)
    }
}

/// A check every nested call must pass before it runs, set by the caller of the
/// composing call with [`CallContext::with_gate`]: the
/// checks its direct calls get outside [`Registry::dispatch`](super::Registry::dispatch)
/// (an MCP server's `--confirm` approval, say), so a nested call gets them too.
pub trait CallGate: Send + Sync + 'static {
    /// `Ok` lets `call` (a nested call of the composing tool `parent`) run; an error is
    /// its answer instead.
    fn check<'a>(
        &'a self,
        registry: &'a super::Registry,
        parent: &'a str,
        call: &'a super::ToolCall,
        ctx: &'a CallContext,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<(), super::ToolError>> + Send + 'a>,
    >;
}

/// The [`CallGate`] of a call, shared (a newtype so `CallContext` stays `Debug`).
#[derive(Clone)]
pub(crate) struct GateHandle(pub(crate) std::sync::Arc<dyn CallGate>);

impl std::fmt::Debug for GateHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallGate")
    }
}
