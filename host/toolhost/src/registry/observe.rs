//! [`CallObserver`]: a hook every [`Registry::dispatch`](super::Registry::dispatch) passes,
//! for an audit log, metrics or traces an embedder plugs in
//! ([`Registry::set_observer`](super::Registry::set_observer)).
//!
//! With no observer set, a call pays one atomic load for the hook: no lock, no
//! allocation.

use std::time::Duration;

use super::{CallRecord, Environment, Limit, ToolCall, ToolError, ToolResult, TraceParent};

/// Sees every call of a registry: asked before it runs (and may refuse it), told when it
/// ends. Refusals before a call (an unknown tool, arguments without a required field, an
/// approval declined, the observer's own refusal) end too, with
/// [`CallEnd::ran`] false.
///
/// Both methods run on the call's task: keep them short (no waiting on the network).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use toolhost::registry::{
///     CallContext, CallEnd, CallObserver, CallStart, Environment, ObserverRefusal, Registry,
///     ToolCall,
/// };
///
/// #[derive(Default)]
/// struct Seen(Mutex<Vec<String>>);
/// impl CallObserver for Seen {
///     fn admit(&self, _call: &CallStart<'_>) -> Result<(), ObserverRefusal> {
///         Ok(())
///     }
///     fn finished(&self, end: &CallEnd<'_>) {
///         let line = format!("{} {}", end.call.name, end.outcome_class());
///         self.0.lock().unwrap().push(line);
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let registry = Registry::new();
/// let seen = Arc::new(Seen::default());
/// registry.set_observer(seen.clone()).unwrap();
/// let env = Environment::default();
/// let _ = registry.dispatch(&CallContext::new(), &ToolCall::new("nope", "{}"), &env).await;
/// assert_eq!(*seen.0.lock().unwrap(), ["nope refused"]);
/// # });
/// ```
pub trait CallObserver: Send + Sync {
    /// Before a call runs (before its arguments are checked). An `Err` refuses the call:
    /// the caller gets [`ToolError::Failed`] with the refusal's message, and
    /// [`CallObserver::finished`] is not called for it (the observer refused it, it
    /// knows).
    ///
    /// # Errors
    /// The reason the call must not run (an audit log that cannot be written, say).
    fn admit(&self, call: &CallStart<'_>) -> Result<(), ObserverRefusal>;

    /// After a call ends, refused or run, in the order calls end. A call whose
    /// [`Registry::dispatch`](super::Registry::dispatch) future is dropped before it ends
    /// (its caller gave up on it) ends then, as [`ToolError::Cancelled`]: every admitted
    /// call is told of exactly once.
    fn finished(&self, end: &CallEnd<'_>);

    /// What this observer wants of a call, decided at its start: after a successful
    /// [`CallObserver::admit`] (and, for a refusal before a call, just before
    /// [`CallObserver::finished`]). Handed back in [`CallEnd::watch`]. The default wants
    /// nothing: the call records nothing and pays nothing for it.
    ///
    /// A tracer decides here whether the call is sampled (the caller's trace is known
    /// now) and asks for a [`CallRecord`] only then, so a call it drops records nothing.
    fn watch(&self, call: &CallStart<'_>) -> CallWatch {
        let _ = call;
        CallWatch::default()
    }
}

/// What a [`CallObserver`] wants of one call ([`CallObserver::watch`]), decided at its
/// start and handed back at its end ([`CallEnd::watch`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallWatch {
    /// Whether the call gets a [`CallRecord`] of what it does through the host (one
    /// allocation; [`CallEnd::record`]). Asked for an admitted call only.
    pub record: bool,
    /// The trace the call's span belongs to, when the observer traces this call: the
    /// caller's trace id, or a new one for a call without a parent. `None`: the call is
    /// not traced (sampled out, or no tracer).
    pub trace_id: Option<[u8; 16]>,
}

/// Why a [`CallObserver`] refused a call: a message for the client saying what is wrong
/// and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObserverRefusal {
    /// The message.
    pub message: String,
}

/// [`Registry::set_observer`](super::Registry::set_observer) on a registry that has
/// one: an observer cannot be replaced (calls in flight would be told of by another).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this registry has a call observer already; set one observer (combine several in it) before the first call")]
pub struct ObserverAlreadySet;

/// A call about to run, for [`CallObserver::admit`].
#[derive(Debug)]
#[non_exhaustive]
pub struct CallStart<'a> {
    /// The session and turn.
    pub env: &'a Environment,
    /// The call as asked (name and arguments' JSON text as sent).
    pub call: &'a ToolCall,
    /// The caller's trace context ([`CallContext::with_trace_parent`](super::CallContext::with_trace_parent)).
    pub trace_parent: Option<TraceParent>,
    /// The call's own span id ([`CallContext::trace_span_id`](super::CallContext::trace_span_id)).
    pub trace_span_id: Option<[u8; 8]>,
    /// The composing tool that made this call through its
    /// [`Composer`](super::Composer), for a nested call; `None` for a direct one.
    pub nested_in: Option<&'a str>,
}

/// A call that ended, for [`CallObserver::finished`].
#[derive(Debug)]
#[non_exhaustive]
pub struct CallEnd<'a> {
    /// The session and turn.
    pub env: &'a Environment,
    /// The call as asked (name and arguments' JSON text as sent).
    pub call: &'a ToolCall,
    /// Whether the tool's handler ran: false for a refusal before the call.
    pub ran: bool,
    /// Whether [`CallObserver::admit`] was asked for this call first: false for a
    /// refusal told by [`Registry::observe_refusal`](super::Registry::observe_refusal).
    pub admitted: bool,
    /// The result, or the error the caller gets.
    pub outcome: Result<&'a ToolResult, &'a ToolError>,
    /// From the hook's admit to the end.
    pub duration: Duration,
    /// The result's size as the result cap measures it (0 for an error).
    pub bytes_out: usize,
    /// The caller's trace context ([`CallContext::with_trace_parent`](super::CallContext::with_trace_parent)).
    pub trace_parent: Option<TraceParent>,
    /// The call's own span id ([`CallContext::trace_span_id`](super::CallContext::trace_span_id)).
    pub trace_span_id: Option<[u8; 8]>,
    /// When the tool's handler ran (for a plugin tool: its instantiation and the guest
    /// call), if it ran.
    pub handler: Option<HandlerRun>,
    /// The composing tool that made this call through its
    /// [`Composer`](super::Composer), for a nested call; `None` for a direct one.
    pub nested_in: Option<&'a str>,
    /// What the call did through the host, when the observer
    /// [asked](CallWatch::record) and the call was admitted.
    pub record: Option<&'a CallRecord>,
    /// What the observer decided at the call's start ([`CallObserver::watch`]).
    pub watch: CallWatch,
}

/// When a call's handler ran, within the call ([`CallEnd::handler`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandlerRun {
    /// From the call's admission to the handler's start (the argument checks).
    pub after: Duration,
    /// How long the handler ran (to its result, the timeout or the cancellation).
    pub took: Duration,
}

impl CallEnd<'_> {
    /// The outcome in a few classes, for counting: `ok`; `refused` (the handler did not
    /// run: unknown tool, arguments refused, approval declined); `timeout`; `cancelled`;
    /// `memory` (the memory limit); `limit` (another resource limit, the result cap, a
    /// file too large); `trap` (a panic or a WebAssembly trap); `tool_error` (the tool's
    /// own error, or output that does not follow its schema).
    pub fn outcome_class(&self) -> &'static str {
        match self.outcome {
            Ok(_) => "ok",
            Err(_) if !self.ran => "refused",
            Err(err) => match err {
                ToolError::TimedOut { .. } => "timeout",
                ToolError::Cancelled { .. } => "cancelled",
                ToolError::LimitExceeded {
                    limit: Limit::Memory { .. },
                    ..
                } => "memory",
                ToolError::LimitExceeded { .. }
                | ToolError::ResultTooLarge { .. }
                | ToolError::FileTooLarge { .. } => "limit",
                ToolError::ToolPanicked { .. } => "trap",
                _ => "tool_error",
            },
        }
    }
}

/// Every class [`CallEnd::outcome_class`] gives, in a fixed order.
pub const OUTCOME_CLASSES: [&str; 8] = [
    "ok",
    "refused",
    "timeout",
    "cancelled",
    "memory",
    "limit",
    "trap",
    "tool_error",
];
