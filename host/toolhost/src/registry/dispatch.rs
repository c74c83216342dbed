//! [`Registry::dispatch`]: argument checks, the handler run under a deadline with panics
//! caught, and the result cap.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use futures_util::FutureExt;

use super::cap::cap_error;
use super::{
    Arguments, CallContext, CallEnd, CallStart, Environment, HandlerRun, Registry, StepKind,
    ToolCall, ToolError, ToolResult,
};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod watch_tests;

impl Registry {
    /// Runs one tool call.
    ///
    /// Before the handler runs: empty arguments count as `{}`; anything else must be a JSON
    /// object (a bare `null` is refused); every field in the schema's top-level `required`
    /// list must be present and not `null`. Types, enums and nested objects are left to
    /// the handler. Then the handler runs until the earlier of the caller's deadline and
    /// the registry's call timeout; a panic in it is caught; its result's JSON encoding
    /// must fit the result cap. When the tool declares an output schema, the result must
    /// follow its top level ([`check_output`](super::check_output)) and comes back with
    /// [`ToolResult::structured`] set; otherwise that flag is cleared, whatever the
    /// handler set.
    ///
    /// Every error, whatever produced it (dispatch's own checks, the handler, a panic
    /// message, a plugin), is held to the result cap the same way: its text, measured
    /// JSON-encoded as a string result is, is at most [`Registry::result_cap`] bytes. A
    /// longer message (an echoed 15 MiB argument, say) is cut at a character boundary and
    /// ends in `... (N more bytes cut)`; the error keeps its kind.
    ///
    /// # Errors
    /// [`ToolError::UnknownTool`], [`ToolError::InvalidArguments`],
    /// [`ToolError::ToolPanicked`], [`ToolError::TimedOut`], [`ToolError::Cancelled`],
    /// [`ToolError::ResultTooLarge`], [`ToolError::InvalidOutput`], or the handler's own
    /// error with the tool name set.
    pub async fn dispatch(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        env: &Environment,
    ) -> Result<ToolResult, ToolError> {
        let size = AtomicUsize::new(0);
        let ran = AtomicBool::new(false);
        let Some(observer) = self.observer.get() else {
            // The one exit of every call: no error reaches the caller uncapped.
            return self
                .run(ctx, call, env, &size, &ran, None)
                .await
                .map_err(|err| cap_error(err, self.result_cap));
        };
        let started = Instant::now();
        let start = CallStart {
            env,
            call,
            trace_parent: ctx.trace_parent(),
            trace_span_id: ctx.trace_span_id(),
            nested_in: ctx.nested_in(),
        };
        if let Err(refusal) = observer.admit(&start) {
            return Err(cap_error(
                ToolError::Failed {
                    tool: call.name.clone(),
                    message: refusal.message,
                },
                self.result_cap,
            ));
        }
        let times = HandlerTimes::default();
        let call_watch = observer.watch(&start);
        // What the call does through the host, when the observer reads it (decided now:
        // a call the observer does not trace or audit allocates nothing).
        let record = call_watch
            .record
            .then(|| std::sync::Arc::new(super::CallRecord::since(started)));
        // Told of the end even when the caller drops this future first.
        let mut watch = Watch {
            observer: &**observer,
            env,
            call,
            started,
            ran: &ran,
            done: false,
            trace_parent: ctx.trace_parent(),
            trace_span_id: ctx.trace_span_id(),
            times: Some(&times),
            nested_in: ctx.nested_in(),
            record: record.as_deref(),
            call_watch,
        };
        let outcome = self
            .run(
                ctx,
                call,
                env,
                &size,
                &ran,
                Some((started, &times, record.as_ref())),
            )
            .await
            .map_err(|err| cap_error(err, self.result_cap));
        watch.done = true;
        observer.finished(&CallEnd {
            env,
            call,
            ran: ran.load(Relaxed),
            admitted: true,
            outcome: outcome.as_ref(),
            duration: started.elapsed(),
            bytes_out: if outcome.is_ok() {
                size.load(Relaxed)
            } else {
                0
            },
            trace_parent: ctx.trace_parent(),
            trace_span_id: ctx.trace_span_id(),
            handler: times.read(),
            nested_in: ctx.nested_in(),
            record: record.as_deref(),
            watch: call_watch,
        });
        outcome
    }

    /// [`Registry::dispatch`] before its errors are capped.
    async fn run(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        env: &Environment,
        size_out: &AtomicUsize,
        ran: &AtomicBool,
        // With an observer: when the call was admitted, and where to note when its
        // handler ran (no clock read, no store without one), and the call's record when
        // the observer reads one.
        timed: Option<(
            Instant,
            &HandlerTimes,
            Option<&std::sync::Arc<super::CallRecord>>,
        )>,
    ) -> Result<ToolResult, ToolError> {
        let name = call.name.as_str();
        let entry = self.lookup(name).ok_or_else(|| ToolError::UnknownTool {
            name: name.to_owned(),
        })?;
        let record = timed.and_then(|(_, _, record)| record);
        let checking = record.map(|record| record.now());
        let checked = check_arguments(name, &call.arguments, &entry.required);
        if let (Some(record), Some(start)) = (record, checking) {
            record.step(StepKind::ArgumentCheck, start, checked.is_err());
        }
        let arguments = checked?;

        let started = Instant::now();
        let call_timeout = ctx.time_limit().unwrap_or(self.call_timeout);
        let deadline = match ctx.deadline() {
            Some(deadline) => deadline.min(started + call_timeout),
            None => started + call_timeout,
        };
        let limit = deadline.saturating_duration_since(started);
        let mut handler_ctx = ctx
            .clone()
            .deadline_at(deadline)
            .with_result_cap(self.result_cap);
        if let Some(record) = record {
            handler_ctx = handler_ctx.with_record(std::sync::Arc::clone(record));
        }
        let cancellation = ctx.cancellation().clone();
        // A composing tool reaches the registry's other tools through a channel this
        // dispatch serves (a plain tool pays only this check). When the caller's context
        // already holds a composer, this registry runs a tool another one offers (a
        // wrapper handler of an outer registry that delegates here, such as a
        // per-principal view): that outer registry serves the nested calls, with what it
        // offers and checks, never this one's wider set.
        let composing = if entry.handler.composes() && ctx.composer().is_none() {
            let nested_ctx = handler_ctx.nested(name);
            let (composer, requests) = super::Composer::channel();
            handler_ctx = handler_ctx.with_composer(composer);
            Some((nested_ctx, requests))
        } else {
            None
        };

        // A panic may happen while the handler builds its future or while it runs: catch both.
        let handler = &entry.handler;
        ran.store(true, Relaxed);
        // Notes how long the handler ran, however this function returns.
        let timing = timed.map(|(admitted, times, _)| {
            times.after.store(nanos(started - admitted), Relaxed);
            HandlerTiming { started, times }
        });
        let future = std::panic::catch_unwind(AssertUnwindSafe(|| {
            handler.call(handler_ctx, arguments, env.clone())
        }))
        .map_err(|panic| panicked(name, &*panic))?;
        let guarded = AssertUnwindSafe(future).catch_unwind();

        let outcome = match composing {
            None => tokio::select! {
                biased;
                outcome = guarded => outcome,
                () = tokio::time::sleep_until(deadline.into()) => {
                    return Err(ToolError::TimedOut { tool: name.to_owned(), limit });
                }
                () = cancellation.cancelled() => {
                    return Err(ToolError::Cancelled { tool: name.to_owned() });
                }
            },
            Some((nested_ctx, mut requests)) => {
                let mut guarded = std::pin::pin!(guarded);
                let sleep = tokio::time::sleep_until(deadline.into());
                let mut sleep = std::pin::pin!(sleep);
                loop {
                    tokio::select! {
                        biased;
                        outcome = &mut guarded => break outcome,
                        () = &mut sleep => {
                            return Err(ToolError::TimedOut { tool: name.to_owned(), limit });
                        }
                        () = cancellation.cancelled() => {
                            return Err(ToolError::Cancelled { tool: name.to_owned() });
                        }
                        // The handler waits for the answer, so a nested call runs alone
                        // and within this call's deadline and cancellation (its context's).
                        Some(request) = requests.recv() => {
                            self.serve_nested(name, request, &nested_ctx, env).await;
                            // The nested call ran in place of the arms below: a cancellation
                            // or the deadline it ended by ends this call too, before the
                            // handler runs on.
                            if cancellation.is_cancelled() {
                                return Err(ToolError::Cancelled { tool: name.to_owned() });
                            }
                            if Instant::now() >= deadline {
                                return Err(ToolError::TimedOut { tool: name.to_owned(), limit });
                            }
                        }
                    }
                }
            }
        };
        drop(timing);
        let mut result =
            outcome
                .map_err(|panic| panicked(name, &*panic))?
                .map_err(|err| match err {
                    // The handler stopped itself at the deadline this call gave it, and measured
                    // its limit from its own start ("999ms" for `--timeout 1s`): report the
                    // configured limit. A handler stopped earlier by its own, lower limit keeps
                    // its figure.
                    ToolError::TimedOut { tool, .. } if Instant::now() >= deadline => {
                        ToolError::TimedOut { tool, limit }.with_tool(name)
                    }
                    err => err.with_tool(name),
                })?;
        result.structured = match &entry.definition.output_schema {
            Some(schema) => {
                super::check_output(schema, &result.content).map_err(|message| {
                    ToolError::InvalidOutput {
                        tool: name.to_owned(),
                        message,
                    }
                })?;
                true
            }
            None => false,
        };

        let size = if result.blocks.is_empty() {
            encoded_len(&result.content)
        } else {
            let structured = match result.content {
                serde_json::Value::Null => 0,
                ref content => encoded_len(content),
            };
            result.blocks.iter().fold(structured, |size, block| {
                size.saturating_add(block.payload_len())
            })
        };
        size_out.store(size, Relaxed);
        if size > self.result_cap {
            return Err(ToolError::ResultTooLarge {
                tool: name.to_owned(),
                size,
                cap: self.result_cap,
            });
        }
        Ok(result)
    }
}

impl Registry {
    /// Answers one request of the composing tool `parent`'s [`Composer`](super::Composer).
    async fn serve_nested(
        &self,
        parent: &str,
        request: super::compose::Request,
        ctx: &CallContext,
        env: &Environment,
    ) {
        match request {
            super::compose::Request::Definitions(reply) => {
                let _ = reply.send(self.composable_definitions());
            }
            super::compose::Request::Call {
                call,
                deadline,
                reply,
            } => {
                let outcome = match deadline {
                    Some(deadline) => {
                        let ctx = ctx.clone().deadline_at(deadline);
                        self.nested_call(parent, &call, &ctx, env).await
                    }
                    None => self.nested_call(parent, &call, ctx, env).await,
                };
                // The handler may have stopped waiting: nothing to answer then.
                let _ = reply.send(outcome);
            }
        }
    }

    /// A nested call of `parent`: refused for a composing tool, checked by the caller's
    /// gate, then dispatched as a direct call is.
    fn nested_call<'a>(
        &'a self,
        parent: &'a str,
        call: &'a ToolCall,
        ctx: &'a CallContext,
        env: &'a Environment,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<ToolResult, ToolError>> + Send + 'a>,
    > {
        Box::pin(async move {
            if self
                .lookup(&call.name)
                .is_some_and(|entry| entry.handler.composes())
            {
                let err = super::compose::composing_refused(&call.name);
                self.observe_refusal_in(call, env, &err, Some(parent));
                return Err(cap_error(err, self.result_cap));
            }
            if let Some(gate) = ctx.gate() {
                if let Err(err) = gate.check(self, parent, call, ctx).await {
                    self.observe_refusal_in(call, env, &err, Some(parent));
                    return Err(cap_error(err, self.result_cap));
                }
            }
            self.dispatch(ctx, call, env).await
        })
    }
}

/// The call's arguments parsed and checked against the tool's `required` fields (empty
/// arguments count as `{}`).
fn check_arguments(tool: &str, raw: &str, required: &[String]) -> Result<Arguments, ToolError> {
    let arguments = Arguments::parse(tool, raw)?;
    match required.iter().find(|field| arguments.get(field).is_none()) {
        Some(missing) => Err(arguments.missing(missing)),
        None => Ok(arguments),
    }
}

/// Tells the observer of a call whose future was dropped before it ended (the caller
/// gave up on it: a client gone, a round that needs the user's input): it ends as
/// [`ToolError::Cancelled`].
struct Watch<'a> {
    observer: &'a dyn super::CallObserver,
    env: &'a Environment,
    call: &'a ToolCall,
    started: Instant,
    ran: &'a AtomicBool,
    done: bool,
    trace_parent: Option<super::TraceParent>,
    trace_span_id: Option<[u8; 8]>,
    times: Option<&'a HandlerTimes>,
    nested_in: Option<&'a str>,
    record: Option<&'a super::CallRecord>,
    call_watch: super::CallWatch,
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let cancelled = ToolError::Cancelled {
            tool: self.call.name.clone(),
        };
        self.observer.finished(&CallEnd {
            env: self.env,
            call: self.call,
            ran: self.ran.load(Relaxed),
            admitted: true,
            outcome: Err(&cancelled),
            duration: self.started.elapsed(),
            bytes_out: 0,
            trace_parent: self.trace_parent,
            trace_span_id: self.trace_span_id,
            handler: self.times.and_then(HandlerTimes::read),
            nested_in: self.nested_in,
            record: self.record,
            watch: self.call_watch,
        });
    }
}

/// When a call's handler ran, in nanoseconds: from the admission to its start, and how
/// long it took (`u64::MAX`: it did not run, or has not ended).
struct HandlerTimes {
    after: AtomicU64,
    took: AtomicU64,
}

impl Default for HandlerTimes {
    fn default() -> Self {
        Self {
            after: AtomicU64::new(u64::MAX),
            took: AtomicU64::new(u64::MAX),
        }
    }
}

impl HandlerTimes {
    fn read(&self) -> Option<HandlerRun> {
        let (after, took) = (self.after.load(Relaxed), self.took.load(Relaxed));
        (after != u64::MAX && took != u64::MAX).then(|| HandlerRun {
            after: Duration::from_nanos(after),
            took: Duration::from_nanos(took),
        })
    }
}

/// Notes the handler's run time when dropped (its result, a timeout, a cancellation).
struct HandlerTiming<'a> {
    started: Instant,
    times: &'a HandlerTimes,
}

impl Drop for HandlerTiming<'_> {
    fn drop(&mut self) {
        self.times
            .took
            .store(nanos(self.started.elapsed()), Relaxed);
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX - 1)
}

/// Length of `value` as compact JSON (what the result cap measures), without building
/// the string.
pub(crate) fn encoded_len(value: &serde_json::Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing a Value into an infallible sink cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

fn panicked(tool: &str, panic: &(dyn Any + Send)) -> ToolError {
    let message = if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic with a non-text value".to_owned()
    };
    ToolError::ToolPanicked {
        tool: tool.to_owned(),
        message: format!("panicked: {message}"),
    }
}
