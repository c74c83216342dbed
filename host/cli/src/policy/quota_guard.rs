//! Each call of a session's tool under its principal's quotas: a calls-per-minute token
//! and a concurrent-calls place (a nested call: the token only), the bytes a file tool
//! is about to write counted first, and the plugin's outgoing requests counted too; in
//! this process and, with `--state`, across processes.

use std::sync::Arc;

use toolhost::registry::{
    Arguments, CallContext, Environment, Handler, HandlerFuture, OutgoingGate, Registry, ToolCall,
    ToolError,
};
use toolhost_mcp::policy::quota::PrincipalQuota;
use toolhost_mcp::policy::SharedRefusal;

/// The bytes a built-in tool call is about to write: what the quota counts (the new
/// text given; a failed write still counts).
fn written_bytes(tool: &str, args: &Arguments) -> u64 {
    let text = |value: Option<&serde_json::Value>| {
        value
            .and_then(serde_json::Value::as_str)
            .map_or(0, str::len) as u64
    };
    match tool {
        "write_file" => text(args.get("content")),
        "edit_file" => text(args.get("new_string")),
        "multi_edit" => args
            .get("edits")
            .and_then(serde_json::Value::as_array)
            .map_or(0, |edits| {
                edits
                    .iter()
                    .map(|edit| text(edit.get("new_string")))
                    .fold(0u64, u64::saturating_add)
            }),
        _ => 0,
    }
}

/// A handler running tool `name` of `from` under `quota`: a calls-per-minute token and
/// a concurrent-calls place per call, and the bytes a file tool writes counted before
/// it writes (over the day's quota: refused, the file untouched).
pub(super) struct Guarded {
    from: Arc<Registry>,
    name: String,
    quota: Arc<PrincipalQuota>,
    /// The principal's outgoing-HTTP quota, given to each call's plugin requests.
    gate: OutgoingGate,
}

pub(super) fn guarded(from: Arc<Registry>, name: String, quota: Arc<PrincipalQuota>) -> Guarded {
    let counted = Arc::clone(&quota);
    let shared = Arc::clone(&quota);
    let gate = OutgoingGate::new(move || {
        counted
            .take_http_request()
            .map_err(|exceeded| exceeded.to_string())
    })
    // Across processes (`--state`): each request counted in Redis before it is sent;
    // over the shared limit, or Redis lost (fail closed), the request is refused.
    .with_shared(move || {
        if !shared.shares_http_requests() {
            return None;
        }
        let quota = Arc::clone(&shared);
        Some(Box::pin(async move {
            quota
                .count_shared_http_request()
                .await
                .map_err(|refusal| refusal.to_string())
        }))
    });
    Guarded {
        from,
        name,
        quota,
        gate,
    }
}

impl Handler for Guarded {
    fn call(&self, ctx: CallContext, args: Arguments, env: Environment) -> HandlerFuture {
        let (from, name, quota) = (
            Arc::clone(&self.from),
            self.name.clone(),
            Arc::clone(&self.quota),
        );
        let ctx = ctx.with_outgoing_gate(self.gate.clone());
        Box::pin(async move {
            let refused =
                |exceeded: toolhost_mcp::policy::QuotaExceeded| ToolError::QuotaExceeded {
                    tool: name.clone(),
                    quota: exceeded.quota.name().to_owned(),
                    limit: exceeded.limit,
                    retry_after_secs: exceeded.retry_after_secs(),
                    message: exceeded.to_string(),
                };
            // Across processes (`--state`): refused over the shared limit, or when the
            // shared counter cannot count (fail closed), naming why.
            let shared_refused = |refusal: SharedRefusal| match refusal {
                SharedRefusal::Exceeded(exceeded) => refused(exceeded),
                SharedRefusal::Unavailable(_) => ToolError::QuotaExceeded {
                    tool: name.clone(),
                    quota: "quota_state_unavailable".to_owned(),
                    limit: 0,
                    retry_after_secs: 1,
                    message: refusal.to_string(),
                },
            };
            // A nested call (a code tool's) runs in its caller's concurrent-calls place.
            // (A top-level call was counted across processes by the HTTP layer.)
            let _permit = if ctx.is_nested() {
                quota.begin_nested_call().map_err(refused)?;
                quota.count_shared_call().await.map_err(shared_refused)?;
                None
            } else {
                Some(quota.begin_call().map_err(refused)?)
            };
            let written = written_bytes(&name, &args);
            if written > 0 {
                quota
                    .charge_written_shared(written)
                    .await
                    .map_err(shared_refused)?;
                quota.charge_written(written).map_err(refused)?;
            }
            let call = ToolCall::new(name.clone(), args.raw());
            from.dispatch(&ctx, &call, &env).await
        })
    }

    // The session's registry then serves a composing tool's nested calls: only what the
    // profile offers, each under the principal's quotas.
    fn composes(&self) -> bool {
        self.from.composes(&self.name)
    }

    fn may_call(&self, name: &str) -> bool {
        self.from.may_call(&self.name, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_bytes_count_the_new_text() {
        let args = |raw: &str| Arguments::parse("t", raw).unwrap();
        assert_eq!(
            written_bytes("write_file", &args(r#"{"path":"a","content":"héllo"}"#)),
            6
        );
        assert_eq!(
            written_bytes(
                "edit_file",
                &args(r#"{"path":"a","old_string":"x","new_string":"abc"}"#)
            ),
            3
        );
        assert_eq!(
            written_bytes(
                "multi_edit",
                &args(
                    r#"{"path":"a","edits":[{"old_string":"x","new_string":"ab"},{"old_string":"y","new_string":"cde"}]}"#
                )
            ),
            5
        );
        assert_eq!(
            written_bytes("read_file", &args(r#"{"path":"a","content":"x"}"#)),
            0
        );
    }
}
