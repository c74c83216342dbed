//! Running what [`Session::receive`](super::Session::receive) hands back: a
//! `tools/call` ([`PendingCall`]) and a `subscriptions/listen` ([`PendingListen`]).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use toolhost::registry::{CallContext, ToolCall, ToolError};

use super::answer::call_result_text;
use super::interaction::SessionInteraction;
use super::state::{progress_hook, Subscription};
use crate::convert::{call_result_for, CallParams};
use crate::elicit::Replay;
use crate::jsonrpc::RequestId;
use crate::logging::{self, SinkGuard};
use crate::protocol::{self, RequestMeta};
use crate::resources::ResourceRequest;

use super::LOG_TARGET;
use super::{CallSlot, Message, Notifier, Registration};

/// A `tools/call` to run, from [`Session::receive`](super::Session::receive), or a
/// resource request (which reads or walks the storage, so it runs as a call does, in a
/// call's slot). Dropping it without running drops the call (its entry among the calls
/// in flight goes with it).
pub(crate) struct PendingCall {
    pub(super) registration: Registration,
    pub(super) id: RequestId,
    pub(super) work: Work,
    pub(super) meta: RequestMeta,
}

/// What a [`PendingCall`] runs.
#[derive(Debug)]
pub(super) enum Work {
    /// A tool call.
    Tool(CallParams),
    /// A resource request, run by the catalog's resources.
    Resource(ResourceRequest),
    /// A request to the registry's catalog (prompts, resources of plugins).
    Catalog(super::catalog_work::CatalogWork),
    /// A `tasks/result` waiting for its task to end.
    TaskResult(super::tasks::TaskWait),
    /// A task request through the backend shared with other processes (`--state`).
    SharedTask(super::task_shared::SharedWork),
}

impl From<super::catalog_work::CatalogWork> for Work {
    fn from(work: super::catalog_work::CatalogWork) -> Self {
        Work::Catalog(work)
    }
}

impl std::fmt::Debug for PendingCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingCall")
            .field("id", &self.id)
            .field("work", &self.work)
            .finish_non_exhaustive()
    }
}

impl PendingCall {
    /// The request's id.
    pub(crate) fn id(&self) -> &RequestId {
        &self.id
    }

    #[cfg(test)]
    /// The tool's name (a resource request's method).
    pub(crate) fn tool(&self) -> &str {
        match &self.work {
            Work::Tool(call) => &call.name,
            Work::Resource(request) => request.method(),
            Work::Catalog(work) => work.method(),
            Work::TaskResult(_) => "tasks/result",
            Work::SharedTask(work) => work.method(),
        }
    }

    /// What the call holds of
    /// [`McpLimits::max_in_flight_bytes`](crate::McpLimits::max_in_flight_bytes) while
    /// it waits and runs: the JSON text of its arguments, its tool's name, its id (kept
    /// twice: as sent, and as the key a cancellation finds it by) and its progress
    /// token. Each can be as long as a whole message, so all count, not the arguments
    /// alone.
    pub(crate) fn held_bytes(&self) -> usize {
        let progress_token = self
            .meta
            .progress_token
            .as_ref()
            .map_or(0, |token| token.as_json().len());
        let work = match &self.work {
            Work::Tool(call) => {
                call.arguments.len()
                    + call.name.len()
                    + call.input.as_ref().map_or(0, |input| input.held_bytes())
            }
            Work::Resource(request) => request.held_bytes(),
            Work::Catalog(work) => work.held_bytes(),
            Work::TaskResult(wait) => wait.held_bytes(),
            Work::SharedTask(work) => work.held_bytes(),
        };
        work + 2 * self.id.as_json().len() + progress_token
    }

    /// A token cancelled when the client cancels the call (or the session ends); a
    /// transport cancels it too when its client is gone.
    pub(crate) fn cancellation(&self) -> CancellationToken {
        self.registration.token.clone()
    }

    /// Runs the call in `_slot` and gives its response: `None` when the call was
    /// cancelled (MCP: a cancelled request is not answered). The caller keeps the slot
    /// until it has handed the response on (queued it for the client), so that calls
    /// cannot finish ahead of the limit while their answers wait, and with one slot the
    /// answers go out in the order of the requests. Messages about the call (progress
    /// when the client sent a `progressToken`, log lines at the level it asked for) go
    /// through `notifier`, when they fit without waiting.
    pub(crate) async fn run(self, _slot: &CallSlot, notifier: Notifier) -> Option<Message> {
        let call = match self.work {
            Work::Tool(call) => call,
            Work::Resource(request) => {
                return run_resource(self.registration, &self.id, &self.meta, request).await
            }
            Work::Catalog(work) => {
                return super::catalog_work::run_catalog(
                    self.registration,
                    &self.id,
                    &self.meta,
                    work,
                )
                .await
            }
            Work::TaskResult(wait) => {
                return wait
                    .run(self.registration, &self.id, &self.meta, notifier)
                    .await
            }
            Work::SharedTask(work) => {
                return work.run(self.registration, &self.id, &self.meta).await
            }
        };
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
            session.0.state.level()
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
        // The level is read as the call starts, as a call's own sink above takes it: a
        // legacy session that has set no level gets none of this call's lines, even if it
        // sets one while the call runs (no sink then, and no span to tie lines to it).
        let sink = match (&request_sink, meta.modern) {
            (Some(sink), _) => sink.id(),
            (None, false) if level.is_some() => session.0.state.sink_id(),
            (None, _) => 0,
        };
        let progress = match &meta.progress_token {
            Some(progress_token) if notifier.is_connected() => Some(progress_hook(
                progress_token.clone(),
                notifier.clone(),
                token.clone(),
            )),
            _ => None,
        };
        // Per call at debug: the audit log (--audit-log) is the operator's record of every
        // call; at info two lines a call cost 6 % of a greet call's CPU over stdio. A
        // failed call stays at info (below).
        debug!(target: LOG_TARGET, session_id = %env.session_id, turn_id = %env.turn_id, tool = %call.name, request = %id, "tools/call");
        let started = Instant::now();
        let input = call.input;
        let call = ToolCall {
            id: id.as_json().to_owned(),
            name: call.name,
            arguments: call.arguments,
        };
        // A composing tool's nested calls need approval as direct calls do.
        let mut ctx = CallContext::new()
            .with_cancellation(token.clone())
            .with_gate(session.0.catalog.asking.approval.gate());
        if let Some(parent) = meta.trace_parent {
            ctx = ctx.with_trace_parent(parent);
        }
        if let Some((hook, _)) = &progress {
            ctx = ctx.with_progress(hook.clone());
        }
        // A client that declared elicitation (sampling) can be asked (sampled), on the
        // call's own channel (legacy), or through `input_required` rounds (2026-07-28).
        let asking = &session.0.catalog.asking;
        let (elicits, samples) = if meta.modern {
            (meta.client_asks, meta.client_samples)
        } else {
            (
                session.0.questions.client_asks(),
                session.0.questions.client_samples(),
            )
        };
        let replay = (meta.modern && (elicits || samples)).then(|| {
            Replay::new(
                &call.name,
                &call.arguments,
                input.as_deref(),
                meta.revision,
                (elicits, samples),
            )
        });
        if let Some(replay) = &replay {
            // Its own token: a round that ends stops what the call started.
            ctx = ctx
                .with_cancellation(token.child_token())
                .with_interaction(Arc::new(replay.clone()));
        } else if !meta.modern && (elicits || samples) {
            ctx = ctx.with_interaction(Arc::new(SessionInteraction::new(
                Arc::clone(&session.0.questions),
                notifier.clone(),
                token.clone(),
                asking.timeout,
                meta.revision,
                elicits,
                samples,
            )));
        }
        // The call's own lines (the plugin's, the host's about it) go to its log sink. With
        // none (sink 0) the span would tie them nowhere: no span then, which saves making,
        // entering and closing one per call.
        let span = if sink == 0 {
            tracing::Span::none()
        } else {
            logging::call_span(sink)
        };
        let run = async {
            let policy = &asking.approval;
            if policy.needs_approval(session.registry(), &call.name) {
                if let Err(err) = policy
                    .approve(
                        session.registry(),
                        &call.name,
                        &call.arguments,
                        // Only a client that can ask its user approves.
                        ctx.interaction().filter(|_| elicits),
                    )
                    .await
                {
                    session.registry().observe_refusal(&call, &env, &err);
                    return Err(err);
                }
            }
            session.registry().dispatch(&ctx, &call, &env).await
        };
        let run = tracing::Instrument::instrument(run, span.clone());
        let (outcome, input_required) = match &replay {
            None => (run.await, None),
            Some(replay) => {
                tokio::select! {
                    outcome = run => (outcome, None),
                    () = replay.needs_input() => {
                        ctx.cancellation().cancel();
                        (Err(ToolError::Cancelled { tool: call.name.clone() }), replay.input_required())
                    }
                }
            }
        };
        // Progress stops with the call, whatever its threads still do.
        if let Some((_, done)) = &progress {
            done.cancel();
        }
        drop(self.registration);
        let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
        span.in_scope(|| match &outcome {
            Ok(_) => debug!(target: LOG_TARGET, turn_id = %env.turn_id, tool = %call.name, elapsed_ms, "tool call ok"),
            Err(err) => info!(
                target: LOG_TARGET,
                session_id = %env.session_id, turn_id = %env.turn_id, tool = %call.name,
                request = %id, elapsed_ms, kind = err.kind(),
                "tool call failed: {err}"
            ),
        });
        drop(request_sink);
        if token.is_cancelled() {
            // MCP: the receiver of a cancellation should not answer the cancelled request.
            debug!(target: LOG_TARGET, request = %id, "not answering a cancelled call");
            return None;
        }
        let result = match input_required {
            Some(input_required) => {
                info!(target: LOG_TARGET, turn_id = %env.turn_id, tool = %call.name, "the call needs the user's input: input_required");
                let mut result = protocol::complete(&meta, input_required);
                result["resultType"] = serde_json::json!("input_required");
                result
            }
            None => {
                if let Err(ToolError::QuotaExceeded {
                    quota,
                    limit,
                    retry_after_secs,
                    ..
                }) = &outcome
                {
                    // Not the model's to read: the caller is over its quota.
                    let data = serde_json::json!({
                        "quota": quota,
                        "limit": limit,
                        "retryAfterSeconds": retry_after_secs,
                    });
                    let message = outcome.as_ref().err().map(ToString::to_string);
                    let err = crate::jsonrpc::RpcError::new(
                        id.clone(),
                        crate::jsonrpc::QUOTA_EXCEEDED,
                        message.unwrap_or_default(),
                    )
                    .with_data(data);
                    return Some(Message::error_with(&err, meta.revision.null_error_id()));
                }
                if !meta.modern {
                    // The common answer, written without a JSON tree.
                    let text = call_result_text(&outcome, meta.revision);
                    return Some(Message::response(&id, Bytes::from(text)));
                }
                protocol::complete(&meta, call_result_for(&outcome, meta.revision))
            }
        };
        Some(Message::response(&id, Bytes::from(result.to_string())))
    }
}

/// Runs a resource request: its response, or `None` when the client cancelled it (or
/// the session ended) first, which also stops its walk or read.
async fn run_resource(
    registration: Registration,
    id: &RequestId,
    meta: &RequestMeta,
    request: ResourceRequest,
) -> Option<Message> {
    let session = registration.session.clone();
    let token = registration.token.clone();
    let resources = session.0.catalog.resources.clone()?;
    let method = request.method();
    debug!(target: LOG_TARGET, request = %id, method, "resource request");
    let outcome = tokio::select! {
        outcome = resources.run(id, request) => outcome,
        () = token.cancelled() => {
            debug!(target: LOG_TARGET, request = %id, "not answering a cancelled resource request");
            return None;
        }
    };
    drop(registration);
    Some(super::catalog_work::finish(
        &session, id, meta, method, outcome,
    ))
}

/// A `subscriptions/listen` request to run, from [`Session::receive`](super::Session::receive): it acknowledges,
/// then sends the tool-list changes it asked for until the client cancels it or the
/// session ends. Dropping it without running drops the subscription.
pub(crate) struct PendingListen {
    pub(super) registration: Registration,
    pub(super) subscription: Subscription,
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
    #[cfg(feature = "http")]
    pub(crate) fn id(&self) -> &RequestId {
        self.subscription.id()
    }

    /// A token cancelled when the client cancels the subscription (or the session
    /// ends); a transport cancels it too when its client is gone.
    #[cfg(feature = "http")]
    pub(crate) fn cancellation(&self) -> CancellationToken {
        self.registration.token.clone()
    }

    /// Runs the subscription, sending its notifications through `notifier`, until the
    /// client cancels it (`None`: not answered) or the session ends (its response).
    pub(crate) async fn run(self, notifier: Notifier) -> Option<Message> {
        let changes = self.registration.session.registry().changes();
        let token = self.registration.token.clone();
        let closing = self.registration.session.0.state.closing.clone();
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
        let catalog_changes = self.registration.session.registry().catalog().changes();
        let run = self
            .subscription
            .run(changes, catalog_changes, &notifier, cancelled.clone());
        tokio::pin!(run);
        let answer = tokio::select! {
            answer = &mut run => answer,
            () = watcher => run.await,
        };
        drop(self.registration);
        answer
    }
}
