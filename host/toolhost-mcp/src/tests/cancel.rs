//! Hostile clients that fill the in-flight limit with runaway calls: their cancels and
//! pings are still read and acted on, calls past the limit wait in a bounded queue, and
//! only a full queue stops the reading.

use super::*;

/// Counts the calls of a `spin` tool, a runaway that never ends by itself (a plugin's
/// endless loop, as the server sees it): how many started, and how many were stopped
/// (their future dropped).
#[derive(Default)]
struct Spins {
    started: AtomicUsize,
    stopped: AtomicUsize,
}

struct Stopped(Arc<Spins>);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.stopped.fetch_add(1, Ordering::SeqCst);
    }
}

/// `spin` (runs until stopped) and `greet`, under the 10 s call time limit the issue's
/// plugins had.
fn spinning_registry() -> (Arc<Registry>, Arc<Spins>) {
    let spins: Arc<Spins> = Arc::default();
    let registry = Registry::new();
    let state = Arc::clone(&spins);
    registry
        .register(
            ToolDefinition::new("spin", "Never ends.", json!({"type": "object"})),
            move |_ctx: CallContext, _args: Arguments, _env: Environment| {
                let state = Arc::clone(&state);
                async move {
                    state.started.fetch_add(1, Ordering::SeqCst);
                    let _stopped = Stopped(state);
                    std::future::pending::<()>().await;
                    Ok(ToolResult::new("never"))
                }
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("greet", "Greet.", json!({"type": "object"})),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new("Hello!"))
            },
        )
        .unwrap();
    (
        Arc::new(registry.with_call_timeout(Duration::from_secs(10))),
        spins,
    )
}

fn spin_request(id: usize) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"spin"}}}}"#)
}

fn cancel_line(id: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id},"reason":"user"}}}}"#
    )
}

/// A server whose in-flight limit of 4 is filled by runaway calls 0-3, with calls 4 and
/// 5 queued behind them, and a ping sent then answered meanwhile.
async fn runaways_fill_the_limit() -> (
    Client,
    tokio::task::JoinHandle<Result<(), ServeError>>,
    McpServer,
    Arc<Spins>,
) {
    let (registry, spins) = spinning_registry();
    let server = McpServer::new(registry).with_max_in_flight(NonZeroUsize::new(4).unwrap());
    let watch = server.clone();
    let (mut client, serving) = serve_client(server);
    for id in 0..6 {
        client.send(&spin_request(id)).await;
    }
    settled(
        &spins.started,
        Duration::from_millis(300),
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(spins.started.load(Ordering::SeqCst), 4);
    let stats = watch.stats();
    assert_eq!(
        (stats.calls_running, stats.calls_queued),
        (4, 2),
        "{stats:?}"
    );

    client
        .send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        .await;
    assert_eq!(
        client
            .answer_within(Duration::from_secs(5))
            .await
            .as_deref(),
        Some(r#"{"id":"p","jsonrpc":"2.0","result":{}}"#),
        "a ping is answered while the calls fill the limit"
    );
    (client, serving, watch, spins)
}

/// Sends a cancellation for each of `ids`, then a `greet` call: it is answered first
/// (the cancelled calls are not answered) and at once, not when the runaways reach
/// their 10 s limit.
async fn cancel_then_greet(client: &mut Client, ids: impl IntoIterator<Item = usize>) {
    let started = Instant::now();
    for id in ids {
        client.send(&cancel_line(id)).await;
    }
    client
        .send(r#"{"jsonrpc":"2.0","id":"g","method":"tools/call","params":{"name":"greet"}}"#)
        .await;
    assert_eq!(
        client
            .answer_within(Duration::from_secs(5))
            .await
            .as_deref(),
        Some(
            r#"{"id":"g","jsonrpc":"2.0","result":{"content":[{"text":"Hello!","type":"text"}],"isError":false}}"#
        ),
        "the call after the cancellations is answered first, and at once"
    );
    let answered = started.elapsed();
    assert!(answered < Duration::from_secs(5), "{answered:?}");
}

/// Every call is over and nothing is held; the cancelled calls get no answer: after the
/// end of input, nothing more comes.
async fn all_over_and_unanswered(
    client: Client,
    serving: tokio::task::JoinHandle<Result<(), ServeError>>,
    watch: &McpServer,
) {
    let stats = watch.stats();
    assert_eq!(
        (
            stats.calls_running,
            stats.calls_queued,
            stats.queued_call_bytes
        ),
        (0, 0, 0),
        "{stats:?}"
    );
    let Client { input, mut output } = client;
    drop(input);
    serving.await.unwrap().unwrap();
    let mut rest = String::new();
    output.read_to_string(&mut rest).await.unwrap();
    assert_eq!(rest, "");
}

/// Runaway calls fill the in-flight limit and more wait behind them: a ping is still
/// answered, the client's cancellations are read and stop every call (the waiting ones
/// never start), and the next call is answered at once, not when the runaways reach
/// their 10 s limit. The cancelled calls are not answered (MCP).
///
/// The waiting calls are cancelled first: a waiting call never starts once its
/// cancellation is read, and here no place frees before it is (the reader handles the
/// lines in order, and only a later cancellation stops a running call). Cancelled after
/// a running one, a waiting call may start in the place that call freed before its own
/// cancellation is read: see the next test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellations_and_pings_are_read_while_calls_fill_the_limit() {
    let (mut client, serving, watch, spins) = runaways_fill_the_limit().await;
    cancel_then_greet(&mut client, [4, 5, 0, 1, 2, 3]).await;
    // The runaways were stopped (their futures dropped) and gave their slots back; the
    // waiting ones never ran.
    let stopped = settled(
        &spins.stopped,
        Duration::from_millis(200),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(stopped, 4);
    assert_eq!(spins.started.load(Ordering::SeqCst), 4);
    all_over_and_unanswered(client, serving, &watch).await;
}

/// The same calls cancelled in the order sent (running calls 0-3, then waiting 4 and
/// 5): a waiting call may start in a place a cancelled runaway freed before the reader
/// has read its own cancellation (the server cannot know it is coming), and is then
/// stopped when it is read. Whatever the timing, every call that started is stopped,
/// none is answered, and the call after them is answered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellations_in_the_order_sent_stop_every_call_that_started() {
    let (mut client, serving, watch, spins) = runaways_fill_the_limit().await;
    cancel_then_greet(&mut client, 0..6).await;
    let stopped = settled(
        &spins.stopped,
        Duration::from_millis(200),
        Duration::from_secs(5),
    )
    .await;
    let started = spins.started.load(Ordering::SeqCst);
    assert!((4..=6).contains(&started), "{started}");
    assert_eq!(stopped, started, "every call that started was stopped");
    all_over_and_unanswered(client, serving, &watch).await;
}

/// A limit of 1 and a queue of 2: one call runs, two wait, and the fourth call is read
/// but finds the queue full, so the ping behind it is not read (the backpressure). Once
/// the calls are let go, every call is answered in the order sent, then the ping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_full_call_queue_stops_the_reading() {
    let (registry, holds) = holding_registry();
    let server = McpServer::new(registry).with_limits(McpLimits {
        max_in_flight: NonZeroUsize::new(1).unwrap(),
        max_queued_calls: NonZeroUsize::new(2).unwrap(),
        ..McpLimits::default()
    });
    assert_eq!(server.limits().max_queued_calls.get(), 2);
    let watch = server.clone();
    let (mut client, serving) = serve_client(server);
    for id in 0..4 {
        client.send(&hold_request(id)).await;
    }
    client
        .send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        .await;
    assert_eq!(
        client.answer_within(Duration::from_millis(500)).await,
        None,
        "the ping waits behind the call that found the queue full"
    );
    let stats = watch.stats();
    assert_eq!(
        (
            stats.calls_running,
            stats.calls_queued,
            stats.peak_calls_queued
        ),
        (1, 2, 2),
        "{stats:?}"
    );
    assert_eq!(holds.running.load(Ordering::SeqCst), 1);
    holds.release.send_replace(true);
    let mut ids = Vec::new();
    for _ in 0..5 {
        let line = client
            .answer_within(Duration::from_secs(20))
            .await
            .expect("an answer");
        ids.push(serde_json::from_str::<Value>(&line).unwrap()["id"].to_string());
    }
    let calls: Vec<&String> = ids.iter().filter(|id| *id != "\"p\"").collect();
    assert_eq!(calls, ["0", "1", "2", "3"], "calls start in the order sent");
    assert!(ids.contains(&"\"p\"".to_owned()), "{ids:?}");
    assert_eq!(holds.peak.load(Ordering::SeqCst), 1);
    drop(client.input);
    serving.await.unwrap().unwrap();
    let stats = watch.stats();
    assert_eq!(
        (
            stats.calls_running,
            stats.calls_queued,
            stats.queued_call_bytes
        ),
        (0, 0, 0),
        "{stats:?}"
    );
}

/// A cancelled call that waits in the queue leaves it at once: it never runs, is not
/// answered, and its place takes the next call (a queue of 1 would otherwise be full).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_queued_call_never_runs_and_frees_its_place() {
    let (registry, holds) = holding_registry();
    let server = McpServer::new(registry).with_limits(McpLimits {
        max_in_flight: NonZeroUsize::new(1).unwrap(),
        max_queued_calls: NonZeroUsize::new(1).unwrap(),
        ..McpLimits::default()
    });
    let watch = server.clone();
    let (mut client, serving) = serve_client(server);
    client.send(&hold_request(0)).await;
    client.send(&hold_request(1)).await;
    client.send(&cancel_line(1)).await;
    client.send(&hold_request(2)).await;
    client
        .send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        .await;
    assert_eq!(
        client
            .answer_within(Duration::from_secs(5))
            .await
            .as_deref(),
        Some(r#"{"id":"p","jsonrpc":"2.0","result":{}}"#),
        "the cancelled call's place went to call 2, and the reading went on"
    );
    let stats = watch.stats();
    assert_eq!(
        (stats.calls_running, stats.calls_queued),
        (1, 1),
        "{stats:?}"
    );
    holds.release.send_replace(true);
    let first = client.answer_within(Duration::from_secs(20)).await.unwrap();
    let second = client.answer_within(Duration::from_secs(20)).await.unwrap();
    let id = |line: &str| serde_json::from_str::<Value>(line).unwrap()["id"].clone();
    assert_eq!((id(&first), id(&second)), (json!(0), json!(2)));
    drop(client.input);
    serving.await.unwrap().unwrap();
    let mut rest = String::new();
    client.output.read_to_string(&mut rest).await.unwrap();
    assert_eq!(rest, "", "the cancelled call is not answered");
    assert_eq!(holds.peak.load(Ordering::SeqCst), 1);
    assert_eq!(watch.stats().peak_calls_queued, 1);
}

/// A batch (2025-03-26) cannot hide a call from the queue's bound, and a cancellation
/// in a later batch takes a queued member out: the batch is answered without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_member_waits_in_the_queue_and_can_be_cancelled() {
    let (registry, holds) = holding_registry();
    let server = McpServer::new(registry).with_limits(McpLimits {
        max_in_flight: NonZeroUsize::new(1).unwrap(),
        ..McpLimits::default()
    });
    let watch = server.clone();
    let (mut client, serving) = serve_client(server);
    client
        .send(r#"{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-03-26"}}"#)
        .await;
    let init = client.answer_within(Duration::from_secs(5)).await.unwrap();
    assert!(init.contains(r#""protocolVersion":"2025-03-26""#), "{init}");
    client
        .send(&format!("[{},{}]", hold_request(0), hold_request(1)))
        .await;
    client
        .send(&format!(
            r#"[{},{{"jsonrpc":"2.0","id":"p","method":"ping"}}]"#,
            cancel_line(1)
        ))
        .await;
    assert_eq!(
        client
            .answer_within(Duration::from_secs(5))
            .await
            .as_deref(),
        Some(r#"[{"id":"p","jsonrpc":"2.0","result":{}}]"#)
    );
    // The ping's answer may come out before the reader has pruned the queue.
    let started = Instant::now();
    while watch.stats().calls_queued != 0 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the cancelled member left the queue"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    holds.release.send_replace(true);
    let answer = client.answer_within(Duration::from_secs(20)).await.unwrap();
    assert_eq!(
        answer,
        r#"[{"id":0,"jsonrpc":"2.0","result":{"content":[{"text":"let go","type":"text"}],"isError":false}}]"#
    );
    drop(client.input);
    serving.await.unwrap().unwrap();
    assert_eq!(holds.peak.load(Ordering::SeqCst), 1);
}
