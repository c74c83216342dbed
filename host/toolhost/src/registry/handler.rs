//! What a tool's code looks like to the registry.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{Arguments, Environment, ToolError, ToolResult};

/// The future a [`Handler`] returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<ToolResult, ToolError>> + Send>>;

/// A tool's code. Any `Fn(CallContext, Arguments, Environment) -> impl Future` that is
/// `Send + Sync + 'static` is a handler, so an `async move` closure registers directly.
///
/// A returned error is shown to the model as the tool's failure: write it for the model.
pub trait Handler: Send + Sync + 'static {
    /// Runs one call.
    fn call(&self, ctx: CallContext, arguments: Arguments, env: Environment) -> HandlerFuture;
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
