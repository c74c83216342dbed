//! The writer's queue while the disk stalls: bounded in bytes, no record lost, calls
//! refused once a record could not be written in time.

use super::*;

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

/// The audit log's state shared with its writer.
fn shared(audited: &Audited) -> &Shared {
    &audited.observers.audit.as_ref().unwrap().shared
}

/// What the queue holds now: records queued since start, and bytes held.
fn queue_figures(audited: &Audited) -> (u64, usize) {
    let queue = shared(audited).lock_queue();
    (queue.pushed, queue.bytes)
}

/// Stalls the writer's disk until the guard is dropped.
fn stall_writer(audited: &Audited) -> std::sync::MutexGuard<'_, ()> {
    shared(audited).stall.lock().unwrap()
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
    let stall = stall_writer(&registry);
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
    let stall = stall_writer(&registry);
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
