//! Tool composition: a tool whose handler [composes](super::Handler::composes) (a code
//! tool running a model's program, a plugin holding the `tools` grant) lists and calls the
//! other tools of the registry that dispatched it, through the [`Composer`] in its
//! [`CallContext`](super::CallContext).
//!
//! The rules, enforced here for every composing handler whatever it is:
//! - a nested call goes through [`Registry::dispatch`](super::Registry::dispatch) of the
//!   registry that runs the composing call, so it gets every check of a direct call
//!   (arguments, the call's time limit, the result cap, the
//!   [`CallObserver`](super::CallObserver), the [`CallGate`] its caller set);
//! - it runs under what is left of the composing call's deadline and is cancelled with it;
//! - a composing tool is never offered nor callable through a [`Composer`] (no recursion,
//!   no cycle: a call tree is at most two deep);
//! - nested calls run one at a time, inside the composing call's dispatch (the composing
//!   handler waits for each answer), so a call tree holds at most the composing call and
//!   one nested call at once.
//!
//! The [`Composer`] is a channel to the dispatch running the composing call: a handler that
//! does not compose pays nothing (no channel is made for it).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::{ToolCall, ToolDefinition, ToolError, ToolResult};

/// What a composing handler asks of the dispatch running it.
pub(crate) enum Request {
    /// The definitions of the tools it may call.
    Definitions(oneshot::Sender<Vec<ToolDefinition>>),
    /// A call of another tool.
    Call {
        call: ToolCall,
        /// The caller's own deadline, when earlier than the composing call's.
        deadline: Option<std::time::Instant>,
        reply: oneshot::Sender<Result<ToolResult, ToolError>>,
    },
}

/// How a composing tool reaches the other tools of the registry that dispatched it: set
/// by [`Registry::dispatch`](super::Registry::dispatch) in the
/// [`CallContext`](super::CallContext) of a handler whose
/// [`composes`](super::Handler::composes) is `true`, valid while that call runs.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use toolhost::registry::*;
///
/// struct Twice;
/// impl Handler for Twice {
///     fn call(&self, ctx: CallContext, _: Arguments, _: Environment) -> HandlerFuture {
///         Box::pin(async move {
///             let composer = ctx.composer().expect("dispatch sets it for a composing tool");
///             let one = composer.call("greet", r#"{"name":"Ada"}"#).await?;
///             let two = composer.call("greet", r#"{"name":"Bob"}"#).await?;
///             Ok(ToolResult::new(serde_json::json!([one.content, two.content])))
///         })
///     }
///     fn composes(&self) -> bool {
///         true
///     }
/// }
///
/// let registry = Registry::new();
/// let schema = serde_json::json!({"type": "object", "required": ["name"]});
/// registry.register(
///     ToolDefinition::new("greet", "Greets someone", schema),
///     |_ctx: CallContext, args: Arguments, _env: Environment| async move {
///         Ok(ToolResult::new(format!("Hello, {}!", args.required_str("name")?)))
///     },
/// ).unwrap();
/// registry.register_shared(
///     ToolDefinition::new("twice", "Greets two people", serde_json::json!({"type": "object"})),
///     Arc::new(Twice),
/// ).unwrap();
/// let result = registry
///     .dispatch(&CallContext::new(), &ToolCall::new("twice", "{}"), &Environment::default())
///     .await
///     .unwrap();
/// assert_eq!(result.content, serde_json::json!(["Hello, Ada!", "Hello, Bob!"]));
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct Composer {
    requests: mpsc::Sender<Request>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Definitions(_) => f.write_str("Definitions"),
            Request::Call { call, .. } => write!(f, "Call({})", call.name),
        }
    }
}

impl Composer {
    /// A composer and the receiving end its dispatch serves.
    pub(crate) fn channel() -> (Self, mpsc::Receiver<Request>) {
        // One request at a time: the handler waits for each answer.
        let (requests, receiver) = mpsc::channel(1);
        (Self { requests }, receiver)
    }

    /// The definitions of the tools a composing tool may call, in the registry's order:
    /// every tool of the registry but the composing ones (empty once the composing call
    /// has ended).
    pub async fn definitions(&self) -> Vec<ToolDefinition> {
        let (reply, answer) = oneshot::channel();
        if self
            .requests
            .send(Request::Definitions(reply))
            .await
            .is_err()
        {
            return Vec::new();
        }
        answer.await.unwrap_or_default()
    }

    /// Calls tool `name` with `arguments` (JSON text) through the registry, as
    /// [`Registry::dispatch`](super::Registry::dispatch) would for a direct call, under
    /// what is left of the composing call's deadline.
    ///
    /// # Errors
    /// Whatever dispatch returns for the call; [`ToolError::Failed`] when `name` is a
    /// composing tool (never callable this way); [`ToolError::Cancelled`] once the
    /// composing call has ended.
    pub async fn call(
        &self,
        name: &str,
        arguments: impl Into<String>,
    ) -> Result<ToolResult, ToolError> {
        self.call_until(name, arguments, None).await
    }

    /// [`Composer::call`] that must also end by `deadline` (the composing handler's own,
    /// when it runs under a shorter limit than the call dispatch gave it: a plugin's
    /// per-call time limit).
    ///
    /// # Errors
    /// As [`Composer::call`]; [`ToolError::TimedOut`] at `deadline`.
    pub async fn call_until(
        &self,
        name: &str,
        arguments: impl Into<String>,
        deadline: Option<std::time::Instant>,
    ) -> Result<ToolResult, ToolError> {
        let (reply, answer) = oneshot::channel();
        let request = Request::Call {
            call: ToolCall::new(name, arguments),
            deadline,
            reply,
        };
        let ended = || ToolError::Cancelled {
            tool: name.to_owned(),
        };
        self.requests.send(request).await.map_err(|_| ended())?;
        answer.await.map_err(|_| ended())?
    }
}

/// A check every nested call must pass before it runs, set by the caller of the
/// composing call with [`CallContext::with_gate`](super::CallContext::with_gate): the
/// checks its direct calls get outside [`Registry::dispatch`](super::Registry::dispatch)
/// (an MCP server's `--confirm` approval, say), so a nested call gets them too.
pub trait CallGate: Send + Sync + 'static {
    /// `Ok` lets `call` (a nested call of the composing tool `parent`) run; an error is
    /// its answer instead.
    fn check<'a>(
        &'a self,
        registry: &'a super::Registry,
        parent: &'a str,
        call: &'a ToolCall,
        ctx: &'a super::CallContext,
    ) -> Pin<Box<dyn Future<Output = Result<(), ToolError>> + Send + 'a>>;
}

/// The [`CallGate`] of a call, shared (a newtype so `CallContext` stays `Debug`).
#[derive(Clone)]
pub(crate) struct GateHandle(pub(crate) Arc<dyn CallGate>);

impl std::fmt::Debug for GateHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallGate")
    }
}

/// The error a nested call of a composing tool gets.
pub(crate) fn composing_refused(name: &str) -> ToolError {
    ToolError::Failed {
        tool: name.to_owned(),
        message: format!(
            "tool {name} composes other tools itself, so it cannot be called from a composing tool (no recursion); call it directly"
        ),
    }
}
