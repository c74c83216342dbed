//! Hostile clients that flood tool calls: calls and argument bytes in flight are capped,
//! calls past the cap wait their turn, and a finished call keeps its slot until its
//! answer is queued.

use super::*;

/// 80 slow calls at once: at most 64 (the default limit) run, the rest wait their turn and
/// are all answered once the first ones end.
#[tokio::test]
async fn tool_calls_in_flight_are_capped_at_the_default() {
    const CALLS: usize = 80;
    let (registry, holds) = holding_registry();
    let (input, _) = Requests::new(CALLS, hold_request);
    let mut output = Vec::new();
    let server = McpServer::new(registry);
    let watch = server.clone();
    let serving =
        tokio::spawn(async move { server.serve(input, &mut output).await.map(|()| output) });

    let running = settled(
        &holds.running,
        Duration::from_millis(500),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        running,
        DEFAULT_MAX_IN_FLIGHT.get(),
        "calls running at once"
    );
    assert_eq!(running, 64);
    assert_eq!(watch.stats().calls_running, 64);
    holds.release.send_replace(true);
    let output = serving.await.unwrap().unwrap();
    assert_eq!(holds.peak.load(Ordering::SeqCst), 64);
    let stats = watch.stats();
    assert_eq!((stats.peak_calls_running, stats.calls_running), (64, 0));
    let answers: Vec<Value> = String::from_utf8(output)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(answers.len(), CALLS);
    assert!(answers
        .iter()
        .all(|a| a["result"]["content"][0]["text"] == "let go"));
}

/// A limit of 3: three calls run and the fourth waits in the queue, while a ping sent
/// after it is read and answered at once: calls at the in-flight limit do not stop the
/// reading. Once the calls are let go, the fourth runs too.
#[tokio::test]
async fn the_in_flight_limit_is_configurable_and_calls_past_it_wait_their_turn() {
    let (registry, holds) = holding_registry();
    let server = McpServer::new(registry).with_max_in_flight(NonZeroUsize::new(3).unwrap());
    assert_eq!(server.limits().max_in_flight.get(), 3);
    let watch = server.clone();
    let (mut client, serving) = serve_client(server);
    for id in 0..4 {
        client.send(&hold_request(id)).await;
    }
    client
        .send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        .await;
    assert_eq!(
        client
            .answer_within(Duration::from_secs(5))
            .await
            .as_deref(),
        Some(r#"{"id":"p","jsonrpc":"2.0","result":{}}"#),
        "the ping is answered while the fourth call waits"
    );
    let running = settled(
        &holds.running,
        Duration::from_millis(300),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(running, 3);
    let stats = watch.stats();
    assert_eq!(
        (stats.calls_running, stats.calls_queued),
        (3, 1),
        "{stats:?}"
    );
    holds.release.send_replace(true);
    drop(client.input);
    serving.await.unwrap().unwrap();
    let mut text = String::new();
    client.output.read_to_string(&mut text).await.unwrap();
    let mut ids: Vec<String> = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["id"].to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, ["0", "1", "2", "3"]);
    assert_eq!(holds.peak.load(Ordering::SeqCst), 3);
    assert_eq!(watch.stats().peak_calls_running, 3);
}

/// Calls whose arguments would pass the in-flight byte budget wait like calls over the
/// count: with 10 KiB, two calls carrying 4 KiB run and the third waits; a call carrying
/// more than the whole budget runs alone once the others end.
#[tokio::test]
async fn argument_bytes_in_flight_are_capped() {
    let (registry, holds) = holding_registry();
    let call = |id: usize, pad: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"hold","arguments":{{"pad":"{}"}}}}}}"#,
            "x".repeat(pad)
        ) + "\n"
    };
    let input = call(0, 4096) + &call(1, 4096) + &call(2, 4096) + &call(3, 20 * 1024);
    // What a call holds: its arguments, its tool's name and its id (twice).
    let argument_bytes = r#"{"pad":""}"#.len() + 4096 + "hold".len() + 2;
    let server = McpServer::new(registry).with_limits(McpLimits {
        max_in_flight_bytes: NonZeroUsize::new(10 * 1024).unwrap(),
        ..McpLimits::default()
    });
    let watch = server.clone();
    let serving = tokio::spawn(async move {
        let mut output = Vec::new();
        server
            .serve(input.as_bytes(), &mut output)
            .await
            .map(|()| output)
    });
    let running = settled(
        &holds.running,
        Duration::from_millis(500),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(running, 2);
    let stats = watch.stats();
    assert_eq!(
        (stats.calls_running, stats.call_argument_bytes),
        (2, 2 * argument_bytes)
    );
    holds.release.send_replace(true);
    let output = serving.await.unwrap().unwrap();
    assert_eq!(String::from_utf8(output).unwrap().lines().count(), 4);
    assert_eq!(holds.peak.load(Ordering::SeqCst), 2);
    let stats = watch.stats();
    assert_eq!((stats.calls_running, stats.call_argument_bytes), (0, 0));
}

/// A call keeps its slot until its answer is queued: with one slot, a client that never
/// reads and room for one answer, the first answer sits in the writer, the second call
/// runs and waits for room, and no third call starts (they would pile up behind the full
/// queue, and with one slot their answers could overtake each other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_call_keeps_its_slot_until_its_answer_is_queued() {
    let started = Arc::new(AtomicUsize::new(0));
    let registry = Registry::new();
    let counter = Arc::clone(&started);
    registry
        .register(
            ToolDefinition::new("count", "Count the calls.", json!({"type": "object"})),
            move |_ctx: CallContext, _args: Arguments, _env: Environment| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move { Ok(ToolResult::new("counted")) }
            },
        )
        .unwrap();
    let input: String = (0..6)
        .map(|id| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"count"}}}}"#
            ) + "\n"
        })
        .collect();
    let (output, _client_end) = tokio::io::duplex(16);
    let server = McpServer::new(Arc::new(registry)).with_limits(McpLimits {
        max_in_flight: NonZeroUsize::new(1).unwrap(),
        ..limits(1)
    });
    let serving = tokio::spawn(async move { server.serve(input.as_bytes(), output).await });
    let ran = settled(
        &started,
        Duration::from_millis(500),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(ran, 2, "calls run while an earlier answer waits for room");
    serving.abort();
}
