//! What one session remembers (the legacy revision `initialize` settled, its log level,
//! its open subscriptions), the encoded tool list with its pages, and the notifications a
//! call or a subscription sends: progress and tool-list changes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use bytes::Bytes;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use toolhost::registry::{ProgressHook, TaskSupport, ToolDefinition};

use super::message::Message;
use super::notifier::Notifier;
use super::subscriptions::ListenResources;
use super::ListenTasks;
use crate::convert::{tool_json, tool_json_with_execution};
use crate::jsonrpc::{raw_type_name, Params, RequestId, RpcError, INVALID_PARAMS};
use crate::limits::{MAX_SUBSCRIPTIONS, PROGRESS_INTERVAL};
use crate::logging::{LogLevel, SinkGuard};
use crate::pagination::{page, Cursor};
use crate::protocol::{self, RequestMeta, META_SERVER_INFO, META_SUBSCRIPTION_ID};
use crate::revision::Revision;

/// One session's protocol state.
pub(crate) struct SessionState {
    negotiated: Mutex<Option<Revision>>,
    /// The session's log sink (legacy `logging/setLevel`).
    sink: SinkGuard,
    /// Cancelled when the input ends: open subscriptions then close.
    pub(crate) closing: CancellationToken,
    subscriptions: Arc<AtomicUsize>,
}

impl SessionState {
    /// State with `sink` as the session's log sink; subscriptions end when `closing` is
    /// cancelled (the session ends).
    pub(crate) fn new(sink: SinkGuard, closing: CancellationToken) -> Self {
        Self {
            negotiated: Mutex::new(None),
            sink,
            closing,
            subscriptions: Arc::default(),
        }
    }

    /// The revision `initialize` settled, if it came.
    pub(crate) fn negotiated(&self) -> Option<Revision> {
        *self
            .negotiated
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn negotiate(&self, revision: Revision) {
        *self
            .negotiated
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(revision);
    }

    /// Whether a line holding an array is read as a batch.
    pub(crate) fn accepts_batches(&self) -> bool {
        self.negotiated().is_some_and(Revision::accepts_batches)
    }

    /// Whether an error with an unreadable id says `"id": null` (only once a revision up
    /// to 2025-06-18 is negotiated; else the id is left out, as 2025-11-25 on ask).
    pub(crate) fn null_error_id(&self) -> bool {
        self.negotiated().is_some_and(Revision::null_error_id)
    }

    pub(crate) fn sink_id(&self) -> u64 {
        self.sink.id()
    }

    /// The level `logging/setLevel` set, if any.
    pub(crate) fn level(&self) -> Option<LogLevel> {
        self.sink.level()
    }

    /// `logging/setLevel`: forward this session's log lines at `params.level` and above.
    pub(crate) fn set_level(&self, id: &RequestId, params: &Params) -> Result<(), RpcError> {
        let level = params.str("level").and_then(|name| LogLevel::parse(&name));
        let Some(level) = level else {
            let got = match params.raw("level") {
                Some(raw) if raw_type_name(raw) == "string" => raw.get().to_owned(),
                Some(raw) => raw_type_name(raw).to_owned(),
                None => "nothing".to_owned(),
            };
            return Err(RpcError::new(
                id.clone(),
                INVALID_PARAMS,
                format!(
                    "Invalid params: logging/setLevel needs \"level\", one of {}; got {got}",
                    LogLevel::NAMES.join(", ")
                ),
            ));
        };
        self.sink.set_level(level);
        tracing::info!(level = level.as_str(), "client set the log level");
        Ok(())
    }

    /// Opens a `subscriptions/listen` subscription (modern era).
    ///
    /// # Errors
    /// [`INVALID_PARAMS`] for a filter that is not an object, or when
    /// [`MAX_SUBSCRIPTIONS`] are open.
    pub(crate) fn listen(
        &self,
        id: &RequestId,
        params: &Params,
        meta: &RequestMeta,
        list_changed: bool,
    ) -> Result<Subscription, RpcError> {
        let invalid = |what: &str| {
            RpcError::new(
                id.clone(),
                INVALID_PARAMS,
                format!("Invalid params: {what}"),
            )
        };
        let filter = match params.value("notifications") {
            None | Some(Value::Null) => json!({}),
            Some(filter @ Value::Object(_)) => filter,
            Some(_) => {
                return Err(invalid(
                    "\"notifications\" must be an object such as {\"toolsListChanged\": true}",
                ))
            }
        };
        let tools = filter["toolsListChanged"] == json!(true) && list_changed;
        // The catalog's lists change with hot reload too.
        let prompts = filter["promptsListChanged"] == json!(true) && list_changed;
        let resources = filter["resourcesListChanged"] == json!(true) && list_changed;
        let open = self.subscriptions.fetch_add(1, Ordering::SeqCst);
        let held = SubscriptionCount(Arc::clone(&self.subscriptions));
        if open >= MAX_SUBSCRIPTIONS {
            return Err(invalid(&format!(
                "{MAX_SUBSCRIPTIONS} subscriptions are open on this session already; cancel one first"
            )));
        }
        Ok(Subscription {
            id: id.clone(),
            tools,
            prompts,
            resources,
            watch: None,
            tasks: None,
            meta: meta.clone(),
            closing: self.closing.clone(),
            _held: held,
        })
    }
}

struct SubscriptionCount(Arc<AtomicUsize>);

impl Drop for SubscriptionCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An open `subscriptions/listen` request.
pub(crate) struct Subscription {
    id: RequestId,
    /// Whether `notifications/tools/list_changed` was asked for (and is offered).
    tools: bool,
    /// Whether `notifications/prompts/list_changed` was asked for (and is offered).
    prompts: bool,
    /// Whether `notifications/resources/list_changed` was asked for (and is offered).
    resources: bool,
    /// The resources it watches (`resourceSubscriptions`), when it asked for some.
    watch: Option<ListenResources>,
    /// The tasks it hears of (`taskIds`, 2026-07-28's tasks extension), when it asked.
    tasks: Option<ListenTasks>,
    meta: RequestMeta,
    closing: CancellationToken,
    _held: SubscriptionCount,
}

impl Subscription {
    /// The request's id.
    pub(crate) fn id(&self) -> &RequestId {
        &self.id
    }

    /// The subscription also watching `watch` (`notifications.resourceSubscriptions`).
    pub(super) fn watching(mut self, watch: Option<ListenResources>) -> Self {
        self.watch = watch;
        self
    }

    /// The subscription also hearing of `tasks` (`notifications.taskIds`): each
    /// acknowledged task's end is sent as `notifications/tasks`.
    pub(super) fn hearing(mut self, tasks: Option<ListenTasks>) -> Self {
        self.tasks = tasks;
        self
    }

    /// Acknowledges the subscription through `notifier`, then sends what it asked for
    /// until the client cancels it (`None`: no answer then) or the session ends (the
    /// completion result, to send as the request's response).
    /// `catalog_changes` are the registry's catalog's: each sends the prompt and resource
    /// list changes asked for.
    pub(crate) async fn run(
        self,
        mut changes: tokio::sync::watch::Receiver<u64>,
        mut catalog_changes: tokio::sync::watch::Receiver<u64>,
        notifier: &Notifier,
        cancelled: CancellationToken,
    ) -> Option<Message> {
        let tag = json!({ META_SUBSCRIPTION_ID: id_value(&self.id) });
        let mut acknowledged = json!({});
        for (asked, key) in [
            (self.tools, "toolsListChanged"),
            (self.prompts, "promptsListChanged"),
            (self.resources, "resourcesListChanged"),
        ] {
            if asked {
                acknowledged[key] = json!(true);
            }
        }
        // The watched resources: the files polled (each change comes through
        // `updated`), the catalog's told of when the catalog changes.
        let (files_changed, mut updated) =
            tokio::sync::mpsc::channel::<String>(crate::limits::MAX_RESOURCE_SUBSCRIPTIONS);
        let mut sources = Vec::new();
        let stop = CancellationToken::new();
        let _stop = stop.clone().drop_guard();
        // The tasks listened to: each one's changes come through `ended` (its state now
        // first), each forwarder waiting for room.
        let (task_ended, mut ended) = tokio::sync::mpsc::channel::<String>(
            self.tasks
                .as_ref()
                .map_or(1, |tasks| tasks.ids.len().max(1)),
        );
        if let Some(tasks) = &self.tasks {
            let ids: Vec<&str> = tasks.ids.iter().map(|(id, _)| id.as_str()).collect();
            acknowledged["taskIds"] = json!(ids);
            for (id, changes) in &tasks.ids {
                let (id, mut changes, stop, task_ended) = (
                    id.clone(),
                    changes.clone(),
                    stop.clone(),
                    task_ended.clone(),
                );
                tokio::spawn(async move {
                    loop {
                        tokio::select! {
                            changed = changes.changed() => {
                                // Closed: the task was forgotten.
                                if changed.is_err() || task_ended.send(id.clone()).await.is_err() {
                                    break;
                                }
                            }
                            () = stop.cancelled() => break,
                        }
                    }
                });
            }
        }
        drop(task_ended);
        if let Some(watch) = self.watch {
            acknowledged["resourceSubscriptions"] = json!(watch.uris);
            sources = watch.subscribed.source_uris();
            if let Some(files) = watch.files {
                let poller = watch.subscribed.poll(files, stop, move |uri| {
                    let files_changed = files_changed.clone();
                    async move {
                        // Waits for the stream (bounded: 64 URIs, each once a second).
                        let _ = files_changed.send(uri).await;
                    }
                });
                tokio::spawn(poller);
            }
        }
        let ack = json!({
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": { "_meta": tag, "notifications": acknowledged },
        });
        notifier.send(Message::text(ack.to_string())).await;
        changes.borrow_and_update();
        catalog_changes.borrow_and_update();
        let resource_updated = |uri: &str| {
            let note = json!({
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": { "uri": uri, "_meta": tag },
            });
            Message::text(note.to_string())
        };
        loop {
            tokio::select! {
                () = cancelled.cancelled() => return None,
                () = self.closing.cancelled() => break,
                Some(uri) = updated.recv() => {
                    notifier.send(resource_updated(&uri)).await;
                }
                Some(task_id) = ended.recv() => {
                    let note = self.tasks.as_ref().and_then(|tasks| tasks.notification(&task_id, &tag));
                    if let Some(note) = note {
                        notifier.send(note).await;
                    }
                }
                changed = catalog_changes.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    catalog_changes.borrow_and_update();
                    // A source cannot say when its content changes: each watched
                    // resource of the catalog may have.
                    for uri in &sources {
                        notifier.send(resource_updated(uri)).await;
                    }
                    for (asked, list) in [(self.prompts, "prompts"), (self.resources, "resources")] {
                        if asked {
                            let note = json!({
                                "jsonrpc": "2.0",
                                "method": format!("notifications/{list}/list_changed"),
                                "params": { "_meta": tag },
                            });
                            notifier.send(Message::text(note.to_string())).await;
                        }
                    }
                }
                changed = changes.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    changes.borrow_and_update();
                    if self.tools {
                        let note = json!({
                            "jsonrpc": "2.0",
                            "method": "notifications/tools/list_changed",
                            "params": { "_meta": tag },
                        });
                        notifier.send(Message::text(note.to_string())).await;
                    }
                }
            }
        }
        let mut result = protocol::complete(&self.meta, json!({}));
        result["_meta"][META_SUBSCRIPTION_ID] = id_value(&self.id);
        if !self.meta.modern {
            result["_meta"][META_SERVER_INFO] = protocol::server_info();
        }
        Some(Message::response(&self.id, Bytes::from(result.to_string())))
    }
}

fn id_value(id: &RequestId) -> Value {
    serde_json::from_str(id.as_json()).unwrap_or(Value::Null)
}

/// A progress hook for a call whose client sent `token`: at most one notification per
/// [`PROGRESS_INTERVAL`] (and the last), always increasing, none once the call is
/// cancelled or done (the returned token, cancelled by the caller when the call ends),
/// dropped rather than waited for when the transport has no room for it now.
pub(crate) fn progress_hook(
    token: RequestId,
    notifier: Notifier,
    cancelled: CancellationToken,
) -> (ProgressHook, CancellationToken) {
    let done = CancellationToken::new();
    let finished = done.clone();
    let token = id_value(&token);
    // The last progress sent and when.
    let state: Mutex<(f64, Option<Instant>)> = Mutex::new((f64::NEG_INFINITY, None));
    let hook = ProgressHook::new(move |progress| {
        if finished.is_cancelled() || cancelled.is_cancelled() {
            return;
        }
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        if progress.progress <= state.0 {
            return;
        }
        let last = progress
            .total
            .is_some_and(|total| progress.progress >= total);
        if !last && state.1.is_some_and(|at| at.elapsed() < PROGRESS_INTERVAL) {
            return;
        }
        let mut params = json!({ "progressToken": token, "progress": progress.progress });
        if let Some(total) = progress.total {
            params["total"] = json!(total);
        }
        if let Some(message) = progress.message {
            params["message"] = json!(message);
        }
        let note =
            json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": params });
        if notifier.try_send(Message::text(note.to_string())) {
            *state = (progress.progress, Some(Instant::now()));
        }
    });
    (hook, done)
}

/// The tool set of one registry generation, each tool encoded once, and the pages built
/// from them so far.
#[derive(Debug)]
pub(crate) struct EncodedTools {
    pub(crate) generation: u64,
    names: Vec<String>,
    tools: Vec<Bytes>,
    /// The tools as listed where `execution.taskSupport` is (2025-11-25); empty when
    /// no tool may run as a task (then they are listed as `tools`).
    with_execution: Vec<Bytes>,
    /// The tools that may run as a task, or ask for a shorter task time limit: their
    /// support and limit (most registries have none).
    task_settings: HashMap<String, (TaskSupport, Option<std::time::Duration>)>,
    /// Pages built, by (modern, with execution, first tool): a page of one generation
    /// never changes.
    pages: Mutex<HashMap<(bool, bool, usize), Bytes>>,
}

impl EncodedTools {
    pub(crate) fn new(generation: u64, definitions: &[ToolDefinition]) -> Self {
        let task_settings: HashMap<_, _> = definitions
            .iter()
            .filter(|d| !d.task_support.is_forbidden() || d.task_timeout.is_some())
            .map(|d| (d.name.clone(), (d.task_support, d.task_timeout)))
            .collect();
        let with_execution = if definitions.iter().any(|d| !d.task_support.is_forbidden()) {
            definitions
                .iter()
                .map(|d| Bytes::from(tool_json_with_execution(d).to_string()))
                .collect()
        } else {
            Vec::new()
        };
        Self {
            generation,
            with_execution,
            task_settings,
            names: definitions.iter().map(|d| d.name.clone()).collect(),
            tools: definitions
                .iter()
                .map(|d| Bytes::from(tool_json(d).to_string()))
                .collect(),
            pages: Mutex::default(),
        }
    }

    /// How tool `name` may run as a task, and the task time limit it asks for
    /// (forbidden and none for a tool not listed, or unknown).
    pub(crate) fn task_settings(&self, name: &str) -> (TaskSupport, Option<std::time::Duration>) {
        self.task_settings
            .get(name)
            .copied()
            .unwrap_or((TaskSupport::Forbidden, None))
    }

    /// Whether any tool may run as a task.
    pub(crate) fn any_task_support(&self) -> bool {
        !self.with_execution.is_empty()
    }

    /// The `tools/list` result for `params` (its `cursor`), as the request's era shapes it.
    pub(crate) fn page(
        &self,
        id: &RequestId,
        params: &Params,
        meta: &RequestMeta,
        size: usize,
        list_changed: bool,
    ) -> Result<Bytes, RpcError> {
        let invalid = |message: String| RpcError::new(id.clone(), INVALID_PARAMS, message);
        let cursor = match params.raw("cursor") {
            None => None,
            Some(raw) if raw_type_name(raw) == "null" => None,
            Some(raw) => match params.str("cursor") {
                Some(text) => Some(Cursor::parse(&text)),
                None => {
                    return Err(invalid(format!(
                        "Invalid params: \"cursor\" must be a string (the nextCursor of the last page), got {}",
                        raw_type_name(raw)
                    )))
                }
            },
        };
        let page =
            page(&self.names, cursor.as_ref(), size).map_err(|err| invalid(err.to_string()))?;
        let execution = meta.revision.lists_task_support() && !self.with_execution.is_empty();
        let key = (meta.modern, execution, page.range.start);
        let mut pages = self.pages.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(built) = pages.get(&key) {
            return Ok(built.clone());
        }
        // Keys in serde_json's (sorted) order, as every other result.
        let mut out: Vec<u8> = Vec::new();
        out.push(b'{');
        if meta.modern {
            out.extend_from_slice(
                format!(
                    "\"_meta\":{},\"cacheScope\":\"public\",",
                    json!({ META_SERVER_INFO: protocol::server_info() })
                )
                .as_bytes(),
            );
        }
        if let Some(next) = &page.next {
            out.extend_from_slice(format!("\"nextCursor\":{},", json!(next.as_str())).as_bytes());
        }
        if meta.modern {
            out.extend_from_slice(b"\"resultType\":\"complete\",");
        }
        out.extend_from_slice(b"\"tools\":[");
        let tools = if execution {
            &self.with_execution
        } else {
            &self.tools
        };
        for (at, tool) in tools[page.range].iter().enumerate() {
            if at > 0 {
                out.push(b',');
            }
            out.extend_from_slice(tool);
        }
        out.push(b']');
        if meta.modern {
            out.extend_from_slice(
                format!(",\"ttlMs\":{}", protocol::ttl_ms(list_changed)).as_bytes(),
            );
        }
        out.push(b'}');
        let built = Bytes::from(out);
        pages.insert(key, built.clone());
        Ok(built)
    }
}
