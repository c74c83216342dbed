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
/// registry.register(
///     ToolDefinition::new("twice", "Greets two people", serde_json::json!({"type": "object"})),
///     Twice,
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

/// The error a nested call of a composing tool gets.
pub(crate) fn composing_refused(name: &str) -> ToolError {
    ToolError::Failed {
        tool: name.to_owned(),
        message: format!(
            "tool {name} composes other tools itself, so it cannot be called from a composing tool (no recursion); call it directly"
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};

    use super::super::offered::{LISTED_DESCRIPTION_CHARS, LISTED_TOOLS};

    use serde_json::json;

    use super::super::*;
    use super::*;

    /// Calls each tool named in its `tools` argument, in turn, and answers what each gave.
    struct Caller;

    impl Handler for Caller {
        fn call(&self, ctx: CallContext, arguments: Arguments, _: Environment) -> HandlerFuture {
            Box::pin(async move {
                let Some(composer) = ctx.composer() else {
                    return Err(arguments.invalid("no composer"));
                };
                let names: Vec<String> = composer
                    .definitions()
                    .await
                    .into_iter()
                    .map(|d| d.name)
                    .collect();
                let mut answers = Vec::new();
                for tool in arguments
                    .get("tools")
                    .and_then(|t| t.as_array())
                    .into_iter()
                    .flatten()
                {
                    let tool = tool.as_str().unwrap_or_default();
                    answers.push(match composer.call(tool, "{}").await {
                        Ok(result) => result.content,
                        Err(err) => json!({"error": err.kind(), "message": err.to_string()}),
                    });
                }
                Ok(ToolResult::new(
                    json!({"offered": names, "answers": answers}),
                ))
            })
        }

        fn composes(&self) -> bool {
            true
        }
    }

    /// Refuses every nested call of `denied`.
    struct Deny;

    impl CallGate for Deny {
        fn check<'a>(
            &'a self,
            _registry: &'a Registry,
            parent: &'a str,
            call: &'a ToolCall,
            _ctx: &'a CallContext,
        ) -> Pin<Box<dyn Future<Output = Result<(), ToolError>> + Send + 'a>> {
            Box::pin(async move {
                if call.name == "denied" {
                    return Err(ToolError::Failed {
                        tool: call.name.clone(),
                        message: format!("not approved (called by {parent})"),
                    });
                }
                Ok(())
            })
        }
    }

    /// Records the calls it sees start.
    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);

    impl CallObserver for Seen {
        fn admit(&self, call: &CallStart<'_>) -> Result<(), ObserverRefusal> {
            let name = &call.call.name;
            self.0.lock().unwrap().push(match call.nested_in {
                Some(parent) => format!("{name} in {parent}"),
                None => name.clone(),
            });
            Ok(())
        }
        fn finished(&self, _end: &CallEnd<'_>) {}
    }

    fn registry() -> (Registry, Arc<Seen>) {
        let registry = Registry::new();
        let object = json!({"type": "object"});
        for name in ["plain", "denied"] {
            registry
                .register(
                    ToolDefinition::new(name, "Answers its name.", object.clone()),
                    move |_: CallContext, _: Arguments, _: Environment| async move {
                        Ok(ToolResult::new(name))
                    },
                )
                .unwrap();
        }
        for name in ["caller", "other_caller"] {
            registry
                .register(
                    ToolDefinition::new(name, "Calls tools.", object.clone()),
                    Caller,
                )
                .unwrap();
        }
        let seen = Arc::new(Seen::default());
        registry
            .set_observer(Arc::clone(&seen) as Arc<dyn CallObserver>)
            .unwrap();
        (registry, seen)
    }

    /// Offers tool `name` of `inner` in another registry, as a per-principal view does.
    struct Delegate {
        inner: Arc<Registry>,
        name: &'static str,
        calls: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Handler for Delegate {
        fn call(&self, ctx: CallContext, arguments: Arguments, env: Environment) -> HandlerFuture {
            let (inner, name) = (Arc::clone(&self.inner), self.name);
            self.calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Box::pin(async move {
                let call = ToolCall::new(name, arguments.raw());
                inner.dispatch(&ctx, &call, &env).await
            })
        }

        fn composes(&self) -> bool {
            self.inner.composes(self.name)
        }
    }

    #[tokio::test]
    async fn a_view_of_a_registry_serves_the_nested_calls_of_the_composing_tools_it_offers() {
        // The inner registry has plain, denied, caller and other_caller; the view offers
        // caller and plain only, each through a delegate that counts its calls.
        let (inner, _seen) = registry();
        let inner = Arc::new(inner);
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let view = Registry::new();
        for name in ["caller", "plain"] {
            let definition = inner.with_definition(name, Clone::clone).unwrap();
            view.register(
                definition,
                Delegate {
                    inner: Arc::clone(&inner),
                    name,
                    calls: Arc::clone(&calls),
                },
            )
            .unwrap();
        }
        assert!(view.composes("caller") && !view.composes("plain"));
        let call = ToolCall::new("caller", r#"{"tools": ["plain", "denied"]}"#);
        let result = view
            .dispatch(&CallContext::new(), &call, &Environment::default())
            .await
            .unwrap();
        // What the view offers, not the inner registry's wider set; the tool the view
        // does not offer is unknown to the nested call, as to a direct one.
        assert_eq!(result.content["offered"], json!(["plain"]));
        assert_eq!(result.content["answers"][0], json!("plain"));
        assert_eq!(result.content["answers"][1]["error"], json!("unknown_tool"));
        // The nested call of plain went through the view's delegate (its checks).
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 2);
    }

    /// A composing tool whose grant names only `plain`.
    struct OnlyPlain;

    impl Handler for OnlyPlain {
        fn call(&self, ctx: CallContext, arguments: Arguments, env: Environment) -> HandlerFuture {
            Caller.call(ctx, arguments, env)
        }
        fn composes(&self) -> bool {
            true
        }
        fn may_call(&self, name: &str) -> bool {
            name == "plain"
        }
    }

    #[test]
    fn a_composing_tools_offered_description_lists_what_it_may_call_and_no_more() {
        let (registry, _seen) = registry();
        let object = json!({"type": "object"});
        registry
            .register(
                ToolDefinition::new("narrow", "Runs code.", object.clone()),
                OnlyPlain,
            )
            .unwrap();
        let offered = registry.offered_definitions();
        let description = |name: &str| {
            offered
                .iter()
                .find(|d| d.name == name)
                .map(|d| d.description.clone())
                .unwrap()
        };
        // Not the composing tools, and only the first line of each description.
        assert_eq!(
            description("caller"),
            "Calls tools.\n\nTools the program can call:\n- plain: Answers its name.\n- denied: Answers its name."
        );
        assert_eq!(
            description("narrow"),
            "Runs code.\n\nTools the program can call:\n- plain: Answers its name."
        );
        assert_eq!(description("plain"), "Answers its name.");
        // The registered definitions are left as they were.
        assert_eq!(
            registry
                .with_definition("caller", |d| d.description.clone())
                .unwrap(),
            "Calls tools."
        );
        // A long list is cut at LISTED_TOOLS, the rest counted; long lines are cut.
        let many = Registry::new();
        many.register(
            ToolDefinition::new("code", "Runs code.", object.clone()),
            Caller,
        )
        .unwrap();
        for i in 0..LISTED_TOOLS + 5 {
            let name = format!("t{i}");
            let text = "x".repeat(500);
            many.register(
                ToolDefinition::new(name, text, object.clone()),
                |_: CallContext, _: Arguments, _: Environment| async { Ok(ToolResult::new("")) },
            )
            .unwrap();
        }
        let code = many.offered_definitions().swap_remove(0).description;
        assert_eq!(
            code.lines().filter(|l| l.starts_with("- t")).count(),
            LISTED_TOOLS
        );
        assert!(
            code.ends_with("\n- and 5 more: list them from the program"),
            "{code}"
        );
        let first = code.lines().find(|l| l.starts_with("- t0:")).unwrap();
        assert_eq!(
            first.chars().count(),
            "- t0: ".len() + LISTED_DESCRIPTION_CHARS
        );
    }

    #[test]
    fn a_nested_call_counts_its_outgoing_requests_against_the_callers_gate() {
        let ctx = CallContext::new().with_outgoing_gate(crate::registry::OutgoingGate::new(|| {
            Err("quota http_requests_per_minute reached".to_owned())
        }));
        let nested = ctx.nested("run_javascript");
        assert_eq!(nested.nested_in(), Some("run_javascript"));
        assert_eq!(
            nested.outgoing_gate().map(|gate| gate.admit()),
            Some(Err("quota http_requests_per_minute reached".to_owned()))
        );
    }

    #[tokio::test]
    async fn an_outgoing_gates_shared_count_is_awaited_only_when_it_gives_one() {
        let plain = crate::registry::OutgoingGate::new(|| Ok(()));
        assert!(plain.admit_shared().is_none());
        let counted = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let seen = std::sync::Arc::clone(&counted);
        let shared = crate::registry::OutgoingGate::new(|| Ok(())).with_shared(move || {
            let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Some(Box::pin(async move {
                if n < 1 {
                    Ok(())
                } else {
                    Err("quota exceeded: http_requests_per_minute (limit 1)".to_owned())
                }
            }))
        });
        // A nested call's gate is the caller's, its shared part included.
        let ctx = CallContext::new().with_outgoing_gate(shared);
        let nested = ctx.nested("run_javascript");
        let gate = nested.outgoing_gate().unwrap();
        assert_eq!(gate.admit_shared().unwrap().await, Ok(()));
        assert_eq!(
            gate.admit_shared().unwrap().await,
            Err("quota exceeded: http_requests_per_minute (limit 1)".to_owned())
        );
        assert_eq!(counted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn nested_calls_pass_the_gate_and_the_observer_and_never_reach_a_composing_tool() {
        let (registry, seen) = registry();
        let ctx = CallContext::new().with_gate(Arc::new(Deny));
        let call = ToolCall::new(
            "caller",
            json!({"tools": ["plain", "denied", "other_caller", "caller", "nope"]}).to_string(),
        );
        let result = registry
            .dispatch(&ctx, &call, &Environment::default())
            .await
            .unwrap();
        assert_eq!(
            result.content,
            json!({
                "offered": ["plain", "denied"],
                "answers": [
                    "plain",
                    {"error": "failed", "message": "denied: not approved (called by caller)"},
                    {"error": "failed", "message": "other_caller: tool other_caller composes other tools itself, so it cannot be called from a composing tool (no recursion); call it directly"},
                    {"error": "failed", "message": "caller: tool caller composes other tools itself, so it cannot be called from a composing tool (no recursion); call it directly"},
                    {"error": "unknown_tool", "message": "unknown tool \"nope\": no tool of that name is registered; call one of the tools you were offered"},
                ],
            })
        );
        // The observer saw the composing call and the nested calls that were admitted.
        assert_eq!(
            *seen.0.lock().unwrap(),
            ["caller", "plain in caller", "nope in caller"]
        );
    }

    #[tokio::test]
    async fn a_composer_kept_past_its_call_answers_cancelled() {
        let (composer, requests) = Composer::channel();
        drop(requests);
        let err = composer.call("plain", "{}").await.unwrap_err();
        assert_eq!(
            err,
            ToolError::Cancelled {
                tool: "plain".into()
            }
        );
        assert!(composer.definitions().await.is_empty());
    }

    /// Sets its flag when dropped (the future it lives in stopped).
    struct Dropped(Arc<std::sync::atomic::AtomicBool>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_nested_call_is_cancelled_with_its_caller_and_ends_by_its_deadline() {
        let (registry, _seen) = registry();
        let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&stopped);
        registry
            .register(
                ToolDefinition::new("slow", "Takes 10 s.", json!({"type": "object"})),
                move |_: CallContext, _: Arguments, _: Environment| {
                    let guard = Dropped(Arc::clone(&flag));
                    async move {
                        let _guard = guard;
                        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
                        Ok(ToolResult::new("late"))
                    }
                },
            )
            .unwrap();
        let call = ToolCall::new("caller", json!({"tools": ["slow"]}).to_string());
        let token = tokio_util::sync::CancellationToken::new();
        let ctx = CallContext::new().with_cancellation(token.clone());
        let cancel = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            token.cancel();
        });
        let started = std::time::Instant::now();
        let err = registry
            .dispatch(&ctx, &call, &Environment::default())
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ToolError::Cancelled {
                tool: "caller".into()
            }
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert!(stopped.load(std::sync::atomic::Ordering::SeqCst));
        cancel.await.unwrap();

        // A deadline of 100 ms: the nested call ends by it, and so does its caller.
        stopped.store(false, std::sync::atomic::Ordering::SeqCst);
        let ctx = CallContext::with_timeout(std::time::Duration::from_millis(100));
        let started = std::time::Instant::now();
        let err = registry
            .dispatch(&ctx, &call, &Environment::default())
            .await
            .unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert!(
            matches!(&err, ToolError::TimedOut { tool, .. } if tool == "caller"),
            "{err:?}"
        );
        assert!(stopped.load(std::sync::atomic::Ordering::SeqCst));
    }
}
