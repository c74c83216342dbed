use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolhost::registry::{
    CallContext, CallObserver, Environment, Registry, ToolCall, ToolDefinition, ToolResult,
};

use super::writer::time_text;
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

/// Calls `echo` with `arguments` from a thread of its own (a call blocked on a full queue
/// blocks its thread, as it would a server's worker).
fn call_on_thread(
    registry: &Arc<Audited>,
    arguments: String,
) -> std::thread::JoinHandle<Result<ToolResult, ToolError>> {
    let registry = Arc::clone(registry);
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(call(&registry, "s", "echo", &arguments))
    })
}

/// What the queue holds now: records queued since start, and bytes held.
fn queue_figures(audited: &Audited) -> (u64, usize) {
    let queue = audited
        .observers
        .audit
        .as_ref()
        .unwrap()
        .shared
        .lock_queue();
    (queue.pushed, queue.bytes)
}

#[test]
fn a_flood_of_calls_while_the_disk_stalls_keeps_the_queue_bounded_and_loses_no_record() {
    const BOUND: usize = 64 * 1024;
    const CALLS: usize = 96;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    // Arguments recorded (`--audit-arguments`): each record holds its 4 KiB of them.
    let log = AuditLog::open_with(&path, None, 1, true, BOUND, Duration::from_secs(60)).unwrap();
    let registry = Arc::new(audited_with(log));
    let stall = registry
        .observers
        .audit
        .as_ref()
        .unwrap()
        .shared
        .stall
        .lock()
        .unwrap();
    let filler = "x".repeat(4096);
    let threads: Vec<_> = (0..CALLS)
        .map(|seq| call_on_thread(&registry, format!(r#"{{"seq":{seq},"pad":"{filler}"}}"#)))
        .collect();
    // The queue fills up to its bound and stays there: the calls past it wait.
    let mut last = (0, 0);
    let mut steady = 0;
    for _ in 0..500 {
        std::thread::sleep(Duration::from_millis(10));
        let now = queue_figures(&registry);
        assert!(
            now.1 <= BOUND,
            "{} bytes queued, past the bound of {BOUND}",
            now.1
        );
        steady = if now == last { steady + 1 } else { 0 };
        last = now;
        if steady == 20 && now.0 > 0 {
            break;
        }
    }
    let (queued, bytes) = last;
    assert!(
        queued > 0 && (queued as usize) < CALLS,
        "{queued} of {CALLS} records queued"
    );
    assert!(bytes > BOUND / 2, "{bytes} bytes queued");
    let waiting = threads
        .iter()
        .filter(|thread| !thread.is_finished())
        .count();
    assert_eq!(waiting, CALLS - queued as usize, "calls waiting for room");
    // The disk is back: every call ends, and every record is written, in full.
    drop(stall);
    for thread in threads {
        thread.join().unwrap().unwrap();
    }
    registry.flush();
    let records = records(&path);
    assert_eq!(records.len(), CALLS);
    assert!(records.iter().all(|record| record["event"] == "call"
        && record["arguments"].as_str().unwrap().contains(&filler)));
    let mut seqs: Vec<u64> = records
        .iter()
        .map(|record| {
            let arguments: Value =
                serde_json::from_str(record["arguments"].as_str().unwrap()).unwrap();
            arguments["seq"].as_u64().unwrap()
        })
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..CALLS as u64).collect::<Vec<_>>());
}

#[test]
fn a_disk_stalled_past_the_wait_counts_the_record_lost_and_refuses_calls() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log =
        AuditLog::open_with(&path, None, 1, true, 8 * 1024, Duration::from_millis(200)).unwrap();
    let registry = Arc::new(audited_with(log));
    let stall = registry
        .observers
        .audit
        .as_ref()
        .unwrap()
        .shared
        .stall
        .lock()
        .unwrap();
    let filler = "x".repeat(6 * 1024);
    // The first record fits the empty queue; the writer takes it and stalls.
    call_on_thread(&registry, format!(r#"{{"seq":1,"pad":"{filler}"}}"#))
        .join()
        .unwrap()
        .unwrap();
    // The second does not fit: its call waits 200 ms, then its record counts as lost.
    let started = std::time::Instant::now();
    call_on_thread(&registry, format!(r#"{{"seq":2,"pad":"{filler}"}}"#))
        .join()
        .unwrap()
        .unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    // Calls are refused (at once, though the writer is still stuck).
    let err = call_on_thread(&registry, r#"{"seq":3}"#.to_owned())
        .join()
        .unwrap()
        .unwrap_err();
    assert_eq!(err.kind(), "failed");
    let message = err.to_string();
    assert!(message.contains("no call runs unaudited"), "{message}");
    assert!(
        message.contains("its writer could not take a record for 0.2 s"),
        "{message}"
    );
    // The disk is back: the next call runs, after a line counting the lost records (the
    // stalled batch, written after the failure, is counted too).
    drop(stall);
    registry.flush();
    call_on_thread(&registry, r#"{"seq":4}"#.to_owned())
        .join()
        .unwrap()
        .unwrap();
    registry.flush();
    let records = records(&path);
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["event"], "audit_resumed");
    assert_eq!(records[0]["lost"], 2);
    assert_eq!(records[1]["arguments"], r#"{"seq":4}"#);
}

#[test]
fn record_times_are_written_as_format_utc_time_writes_them() {
    let mut second = None;
    for millis in [
        0u64,
        951_782_400_123,
        951_782_400_999,
        951_782_401_007,
        1_764_877_826_045,
    ] {
        let at = std::time::UNIX_EPOCH + Duration::from_millis(millis);
        let mut out = Vec::new();
        time_text(&mut second, at, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            toolhost::registry::format_utc_time(at)
        );
    }
}

/// The record's hand-written line is, byte for byte, what serde_json writes for it: with
/// every optional field absent and present, and text in every field that carries outside
/// text (quotes, backslashes, newlines and every other control character, U+2028, other
/// non-ASCII) escaped the same way.
#[test]
fn hand_written_record_is_serde_json_byte_for_byte() {
    use super::writer::Line as _;
    let mut hostile: String = (0u8..0x20).map(char::from).collect();
    hostile.push_str("\"\\/\u{7f}\u{2028}\u{2029}é\u{1f600}\n{\"event\":\"forged\"}");
    let texts = [
        "",
        "plain-ascii_0.9 with spaces/and:colons",
        "9f0c2d1e-5b7a-4c3d-8e2f-0a1b2c3d4e5f",
        "quote\"inside",
        "back\\slash",
        "new\nline",
        "sep\u{2028}arator",
        hostile.as_str(),
    ];
    let plugin = serde_json::value::to_raw_value(&PluginRef {
        file: "/plugins/g\"reet\n.wasm".to_owned(),
        sha256: format!("sha256:{}", "ab".repeat(32)),
    })
    .unwrap();
    let mut digest = [0u8; 71];
    let sha = sha256_text(&Sha256::digest(b"{}"), &mut digest).to_owned();
    let mut checked = 0;
    for (i, text) in texts.iter().enumerate() {
        let list: Vec<String> = texts[..=i].iter().map(|t| (*t).to_owned()).collect();
        for full in [false, true] {
            for duration_ms in [0.0, 0.001_5, 1.0, 12.345_678_9, 1e21, f64::NAN] {
                let record = Record {
                    event: "call",
                    session: text,
                    principal: full.then_some(*text),
                    turn: text,
                    request: text,
                    tool: text,
                    nested_in: full.then_some(*text),
                    plugin: full.then_some(plugin.as_ref()),
                    arguments_sha256: &sha,
                    arguments_bytes: if full { usize::MAX } else { 0 },
                    arguments: full.then_some(*text),
                    outcome: if full { "tool_error" } else { "ok" },
                    ran: full,
                    error_kind: full.then_some("limit_exceeded"),
                    limit: full.then(|| (*text).to_owned()),
                    duration_ms,
                    bytes_out: if full { 1_234_567 } else { 0 },
                    files_read: if full { &list } else { &[] },
                    files_written: if full { &list[..1] } else { &[] },
                    files_truncated: if full { u32::MAX } else { 0 },
                    hosts: if full { &list } else { &[] },
                    hosts_truncated: if full { 7 } else { 0 },
                };
                let mut line = Vec::new();
                record.write_line(&mut line);
                let expected = serde_json::to_vec(&record).unwrap();
                assert_eq!(
                    String::from_utf8(line).unwrap(),
                    String::from_utf8(expected).unwrap(),
                    "text {text:?}, full {full}, duration {duration_ms}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, texts.len() * 2 * 6);
}

/// The eight-at-a-time check finds each byte serde_json escapes at every position of
/// a word and of the tail, and passes every other byte (0x7f and above included).
#[test]
fn needs_escape_is_exact_for_every_byte_at_every_position() {
    for len in 1..=17 {
        for at in 0..len {
            for byte in 0..=255u8 {
                let mut bytes = vec![b'a'; len];
                bytes[at] = byte;
                let expected = byte < 0x20 || byte == b'"' || byte == b'\\';
                assert_eq!(
                    super::needs_escape(&bytes),
                    expected,
                    "byte {byte:#x} at {at} of {len}"
                );
            }
        }
    }
    assert!(!super::needs_escape(b""));
    assert!(!super::needs_escape("\u{2028}é\u{7f}\u{80}".as_bytes()));
}
