use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolhost::registry::{
    CallContext, CallObserver, Environment, Registry, ToolCall, ToolDefinition, ToolResult,
};

use super::*;
use crate::observe::Observers;

/// A registry watched by an audit log, and that log (to wait for its writer).
struct Audited {
    registry: Registry,
    observers: Arc<Observers>,
}

impl std::ops::Deref for Audited {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        &self.registry
    }
}

impl Audited {
    /// Waits for the writer to write what is queued.
    fn flush(&self) {
        flush(&self.observers);
    }
}

/// Waits for `observers`' audit writer to write what is queued.
fn flush(observers: &Observers) {
    let audit = observers.audit.as_ref().unwrap();
    assert!(audit.flush(Duration::from_secs(10)), "the writer is stuck");
}

/// A registry with `echo` (gives back its `seq`), `needs` (requires `x`) and the audit
/// log at `path` watching it.
fn audited(path: &Path, max_bytes: Option<u64>, keep: usize) -> Audited {
    audited_with(AuditLog::open(path, max_bytes, keep, false).unwrap())
}

/// [`audited`] with the log given.
fn audited_with(log: AuditLog) -> Audited {
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new(
                "echo",
                "Echo.",
                serde_json::json!({"type": "object", "properties": {}}),
            ),
            |_ctx: CallContext, args: toolhost::registry::Arguments, _env: Environment| async move {
                Ok(ToolResult::new(
                    args.get("seq").cloned().unwrap_or(Value::Null),
                ))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new(
                "needs",
                "Needs x.",
                serde_json::json!({"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}),
            ),
            |_ctx: CallContext, _args: toolhost::registry::Arguments, _env: Environment| async move {
                Ok(ToolResult::new("ok"))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new(
                "forever",
                "Never ends.",
                serde_json::json!({"type": "object", "properties": {}}),
            ),
            |_ctx: CallContext, _args: toolhost::registry::Arguments, _env: Environment| async move {
                tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                Ok(ToolResult::new("late"))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new(
                "touch",
                "Records reads of the paths it is given, `writes` paths written and a request to each of `hosts`, as the plugin host would.",
                serde_json::json!({"type": "object", "properties": {}}),
            ),
            |ctx: CallContext, args: toolhost::registry::Arguments, _env: Environment| async move {
                let record = ctx.record().expect("the audit log asks for a record");
                let strings = |key: &str| -> Vec<String> {
                    args.get(key)
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                        .unwrap_or_default()
                };
                for path in strings("reads") {
                    record.file_read(&path, 1, record.now(), true);
                }
                for path in strings("writes") {
                    record.file_written(&path, 1, record.now(), true);
                }
                for (i, host) in strings("hosts").iter().enumerate() {
                    let port = 8000 + u16::try_from(i).unwrap();
                    record.http("GET", host, port, "http://h/", Some(200), record.now());
                }
                Ok(ToolResult::new("ok"))
            },
        )
        .unwrap();
    let observers = Arc::new(Observers {
        audit: Some(log),
        metrics: None,
        tracer: None,
    });
    registry
        .set_observer(Arc::clone(&observers) as Arc<dyn CallObserver>)
        .unwrap();
    Audited {
        registry,
        observers,
    }
}

fn env(session: &str) -> Environment {
    Environment {
        session_id: session.to_owned(),
        turn_id: "turn".to_owned(),
    }
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

async fn call(
    registry: &Registry,
    session: &str,
    tool: &str,
    arguments: &str,
) -> Result<ToolResult, ToolError> {
    registry
        .dispatch(
            &CallContext::new(),
            &ToolCall::new(tool, arguments),
            &env(session),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_calls_across_four_sessions_give_a_thousand_records_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let registry = Arc::new(audited(&path, None, 1));
    let sessions: Vec<_> = (0..4)
        .map(|session| {
            let registry = Arc::clone(&registry);
            tokio::spawn(async move {
                for seq in 0..250 {
                    let arguments = format!(r#"{{"seq":{seq}}}"#);
                    let result = call(&registry, &format!("s{session}"), "echo", &arguments).await;
                    assert_eq!(result.unwrap().content, seq);
                }
            })
        })
        .collect();
    for session in sessions {
        session.await.unwrap();
    }
    registry.flush();
    let records = records(&path);
    assert_eq!(records.len(), 1000);
    // Each session's calls ran one after the other: its records come in that order.
    for session in 0..4 {
        let seqs: Vec<String> = records
            .iter()
            .filter(|record| record["session"] == format!("s{session}"))
            .map(|record| record["arguments_sha256"].as_str().unwrap().to_owned())
            .collect();
        let expected: Vec<String> = (0..250)
            .map(|seq| {
                format!(
                    "sha256:{}",
                    hex(&Sha256::digest(format!(r#"{{"seq":{seq}}}"#)))
                )
            })
            .collect();
        assert_eq!(seqs, expected, "session s{session}");
    }
    let first = &records[0];
    assert_eq!(first["event"], "call");
    assert_eq!(first["tool"], "echo");
    assert_eq!(first["outcome"], "ok");
    assert_eq!(first["ran"], true);
    assert_eq!(first["arguments_bytes"], 9);
    assert_eq!(first["bytes_out"], 1);
    assert!(
        first.get("arguments").is_none(),
        "no arguments without --audit-arguments"
    );
    // Times are in order too.
    let times: Vec<&str> = records
        .iter()
        .map(|r| r["time"].as_str().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
}

#[tokio::test]
async fn a_tool_name_or_arguments_cannot_forge_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let registry = audited(&path, None, 1);
    let forged_name = "x\"}\n{\"event\":\"call\",\"tool\":\"forged\",\"outcome\":\"ok\"}\n";
    let err = call(&registry, "s", forged_name, "{}").await.unwrap_err();
    assert_eq!(err.kind(), "unknown_tool");
    registry.flush();
    let observers = Arc::new(Observers {
        audit: Some(AuditLog::open(&path, None, 1, true).unwrap()),
        metrics: None,
        tracer: None,
    });
    let registry2 = Registry::new();
    registry2
        .set_observer(Arc::clone(&observers) as Arc<dyn CallObserver>)
        .unwrap();
    let forged_arguments = "{\"a\":\"\n{\\\"event\\\":\\\"forged\\\"}\u{2028}\r\"}";
    let _ = call(&registry2, "s", "echo", forged_arguments).await;
    flush(&observers);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    let records = records(&path);
    assert_eq!(records[0]["tool"], forged_name);
    assert_eq!(records[0]["outcome"], "refused");
    assert_eq!(records[0]["error_kind"], "unknown_tool");
    assert_eq!(records[1]["arguments"], forged_arguments);
}

/// The files and hosts a call touched are listed in its own record, distinct and at
/// most 64 of each with the rest counted; a path the model named to break the line
/// (`a\n{"tool":"x"}`) stays a string of its one record.
#[tokio::test]
async fn files_and_hosts_a_call_touched_are_listed_bounded_in_its_one_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let registry = audited(&path, None, 1);
    let forged = "a\n{\"event\":\"call\",\"tool\":\"x\"}\u{2028}\r";
    let arguments = serde_json::json!({
        "reads": [forged, "notes/a.md", "notes/a.md"],
        "writes": ["out.md"],
        "hosts": ["127.0.0.1"],
    })
    .to_string();
    call(&registry, "s", "touch", &arguments).await.unwrap();
    let many: Vec<String> = (0..70).map(|i| format!("f{i}.md")).collect();
    let hosts: Vec<String> = (0..66).map(|i| format!("h{i}.test")).collect();
    let arguments =
        serde_json::json!({"reads": many, "writes": ["w.md"], "hosts": hosts}).to_string();
    call(&registry, "s", "touch", &arguments).await.unwrap();
    call(&registry, "s", "echo", "{}").await.unwrap();
    registry.flush();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    let records = records(&path);
    let first = &records[0];
    assert_eq!(
        first["files_read"],
        serde_json::json!([forged, "notes/a.md"])
    );
    assert_eq!(first["files_written"], serde_json::json!(["out.md"]));
    assert_eq!(first["hosts"], serde_json::json!(["127.0.0.1:8000"]));
    assert!(first.get("files_truncated").is_none());
    assert!(first.get("hosts_truncated").is_none());
    let second = &records[1];
    assert_eq!(second["files_read"].as_array().unwrap().len(), 64);
    assert_eq!(second["files_read"][63], "f63.md");
    assert_eq!(second["files_written"], serde_json::json!(["w.md"]));
    assert_eq!(second["files_truncated"], 6);
    assert_eq!(second["hosts"].as_array().unwrap().len(), 64);
    assert_eq!(second["hosts"][0], "h0.test:8000");
    assert_eq!(second["hosts_truncated"], 2);
    // A call that touched nothing carries none of the fields.
    for key in [
        "files_read",
        "files_written",
        "hosts",
        "files_truncated",
        "hosts_truncated",
    ] {
        assert!(records[2].get(key).is_none(), "{key}");
    }
}

#[test]
fn a_symlink_as_the_audit_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, "precious\n").unwrap();
    let link = dir.path().join("audit.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let err = AuditLog::open(&link, None, 1, false).unwrap_err();
    assert!(matches!(err, AuditError::Symlink { .. }), "{err:?}");
    assert!(err.to_string().contains("is a symbolic link"), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");
}

#[tokio::test]
async fn a_symlink_planted_after_start_is_not_followed_and_stops_calls() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let registry = audited(&path, None, 1);
    call(&registry, "s", "echo", "{}").await.unwrap();
    registry.flush();
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, "precious\n").unwrap();
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    // This call's record cannot be written (it ran already); the next, once the writer
    // saw it, is refused.
    call(&registry, "s", "echo", "{}").await.unwrap();
    registry.flush();
    let err = call(&registry, "s", "echo", "{}").await.unwrap_err();
    assert!(err.to_string().contains("the audit log"), "{err}");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");
}

#[tokio::test]
async fn an_unwritable_audit_log_stops_calls_until_it_can_be_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let registry = audited(&path, None, 1);
    call(&registry, "s", "echo", r#"{"seq":1}"#).await.unwrap();
    registry.flush();
    // The file cannot be written any more: a directory stands in its place (as root, a
    // read-only mode would not stop the writes).
    std::fs::rename(&path, dir.path().join("kept.jsonl")).unwrap();
    std::fs::create_dir(&path).unwrap();
    // The call during which writing fails had run: its record is lost.
    call(&registry, "s", "echo", r#"{"seq":2}"#).await.unwrap();
    registry.flush();
    for _ in 0..3 {
        let err = call(&registry, "s", "echo", r#"{"seq":3}"#)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "failed");
        let message = err.to_string();
        assert!(
            message.contains(&format!(
                "the audit log {} cannot be written",
                path.display()
            )),
            "{message}"
        );
        assert!(message.contains("no call runs unaudited"), "{message}");
    }
    // Writable again: calls run, the first record says how many were lost.
    std::fs::remove_dir(&path).unwrap();
    call(&registry, "s", "echo", r#"{"seq":4}"#).await.unwrap();
    registry.flush();
    let records = records(&path);
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["event"], "audit_resumed");
    assert_eq!(records[0]["lost"], 1);
    assert_eq!(records[1]["event"], "call");
    assert_eq!(
        records[1]["arguments_sha256"],
        format!("sha256:{}", hex(&Sha256::digest(r#"{"seq":4}"#)))
    );
}

#[tokio::test]
async fn rotation_keeps_the_given_number_of_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let registry = audited(&path, Some(1000), 2);
    for seq in 0..40 {
        call(&registry, "s", "echo", &format!(r#"{{"seq":{seq}}}"#))
            .await
            .unwrap();
    }
    registry.flush();
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]);
    for name in &names {
        let file = dir.path().join(name);
        let size = std::fs::metadata(&file).unwrap().len();
        assert!(size <= 1000, "{name}: {size}");
        assert!(!records(&file).is_empty());
    }
    // The newest record is in the live file, the older ones in .1 then .2.
    let last = records(&path).pop().unwrap();
    assert_eq!(
        last["arguments_sha256"],
        format!("sha256:{}", hex(&Sha256::digest(r#"{"seq":39}"#)))
    );
    let newest_rotated = records(&dir.path().join("audit.jsonl.1")).pop().unwrap();
    let first_live = records(&path).remove(0);
    assert!(newest_rotated["time"].as_str() <= first_live["time"].as_str());
}

#[tokio::test]
async fn refusals_before_a_call_are_recorded_and_secrets_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let registry = audited(&path, None, 1);
    let err = call(&registry, "s", "needs", r#"{"y":"hunter2-secret"}"#)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "invalid_arguments");
    registry.flush();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("hunter2"), "{text}");
    let records = records(&path);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["outcome"], "refused");
    assert_eq!(records[0]["ran"], false);
    assert_eq!(records[0]["error_kind"], "invalid_arguments");
}

#[tokio::test]
async fn a_call_whose_caller_gives_up_is_recorded_as_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let registry = audited(&path, None, 1);
    let gave_up = tokio::time::timeout(
        std::time::Duration::from_millis(50),
        call(&registry, "s", "forever", "{}"),
    )
    .await;
    assert!(gave_up.is_err());
    registry.flush();
    let records = records(&path);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["tool"], "forever");
    assert_eq!(records[0]["outcome"], "cancelled");
    assert_eq!(records[0]["ran"], true);
    assert_eq!(records[0]["error_kind"], "cancelled");
}

/// Calls `echo` through its [`Composer`](toolhost::registry::Composer), as a code tool.
struct Script;

impl toolhost::registry::Handler for Script {
    fn call(
        &self,
        ctx: CallContext,
        _args: toolhost::registry::Arguments,
        _env: Environment,
    ) -> toolhost::registry::HandlerFuture {
        Box::pin(async move {
            let Some(composer) = ctx.composer() else {
                return Err(ToolError::failed("no composer"));
            };
            composer.call("echo", r#"{"seq":7}"#).await
        })
    }

    fn composes(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn a_nested_call_is_audited_naming_the_composing_tool() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let registry = audited(&path, None, 1);
    registry
        .register(
            ToolDefinition::new(
                "script",
                "Runs a program.",
                serde_json::json!({"type": "object"}),
            ),
            Script,
        )
        .unwrap();
    let result = call(&registry, "s", "script", "{}").await.unwrap();
    assert_eq!(result.content, 7);
    registry.flush();
    let records = records(&path);
    // The nested call ends first.
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["tool"], "echo");
    assert_eq!(records[0]["nested_in"], "script");
    assert_eq!(records[0]["outcome"], "ok");
    assert_eq!(records[1]["tool"], "script");
    assert!(records[1].get("nested_in").is_none(), "{}", records[1]);
}

mod queue;
mod record_text;
