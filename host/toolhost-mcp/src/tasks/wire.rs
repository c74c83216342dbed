//! A task's JSON forms: 2025-11-25's `Task` (what `tasks/get`, `tasks/list` and
//! `notifications/tasks/status` carry) and the published extension's `DetailedTask`
//! (2026-07-28's `tasks/get`).

use serde_json::{json, Value};

use super::records::Entry;
use super::Finished;
use crate::limits::TASK_POLL_INTERVAL_MS;

/// `task` (2025-11-25's `Task`, as [`TaskStore::get`] gives it) in the shape of the
/// published tasks extension (`DetailedTask`): `ttlMs` and `pollIntervalMs`, and for an
/// ended task (`finished`) its `tools/call` result inline as `result`, for one waiting
/// for its user its open question (`input_requests`) as `inputRequests`. The extension
/// keeps `failed` for JSON-RPC errors, so a task whose tool failed (a result with
/// `isError: true`: the tool's error, its time limit, the result budget) is
/// `completed` with that result there.
///
/// [`TaskStore::get`]: super::TaskStore::get
pub(crate) fn published(
    mut task: Value,
    finished: Option<&Finished>,
    input_requests: Option<Value>,
) -> Value {
    let Value::Object(fields) = &mut task else {
        return task;
    };
    if let Some(ttl) = fields.remove("ttl") {
        fields.insert("ttlMs".into(), ttl);
    }
    if let Some(poll) = fields.remove("pollInterval") {
        fields.insert("pollIntervalMs".into(), poll);
    }
    let ended = matches!(
        fields.get("status").and_then(Value::as_str),
        Some("completed" | "failed")
    );
    let result = finished
        .filter(|_| ended)
        .and_then(|finished| finished.result.as_ref())
        .and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok());
    if let Some(result) = result {
        fields.insert("status".into(), json!("completed"));
        fields.insert("result".into(), result);
    } else if fields.get("status").and_then(Value::as_str) == Some("failed") {
        // Never so (a failed task keeps its result), but a failed task must say why.
        let message = fields
            .get("statusMessage")
            .cloned()
            .unwrap_or_else(|| json!("the task failed"));
        fields.insert(
            "error".into(),
            json!({ "code": -32603, "message": message }),
        );
    } else if fields.get("status").and_then(Value::as_str) == Some("input_required") {
        fields.insert(
            "inputRequests".into(),
            input_requests.unwrap_or_else(|| json!({})),
        );
    }
    task
}

impl Entry {
    pub(super) fn json(&self, id: &str) -> Value {
        let ttl = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let mut task = json!({
            "taskId": id,
            "status": self.status.as_str(),
            "createdAt": toolhost::registry::format_utc_time(self.created_at),
            "lastUpdatedAt": toolhost::registry::format_utc_time(self.updated_at),
            "ttl": ttl,
            "pollInterval": TASK_POLL_INTERVAL_MS,
        });
        if let Some(message) = &self.message {
            task["statusMessage"] = json!(message);
        }
        task
    }
}
