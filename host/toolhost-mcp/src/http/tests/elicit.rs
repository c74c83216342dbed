//! Elicitation and approval over Streamable HTTP: the question goes out on the call's
//! own event stream, the answer comes back as a POST (202); forged ids and another
//! session's ids are ignored; a request that cannot carry a question is refused. The
//! same for sampling (`sampling/createMessage`).

use super::*;
use crate::tests::elicit::{asking_registry, call_line, initialize};
use crate::ApprovalPolicy;

/// A stateful server over [`asking_registry`] with `config`.
async fn start_asking(config: HttpConfig) -> (Running, Arc<crate::tests::elicit::Ran>) {
    let (registry, ran) = asking_registry();
    (start_with(registry, config).await, ran)
}

/// A stateful server over `registry` with `config`.
async fn start_with(registry: Arc<Registry>, config: HttpConfig) -> Running {
    let server = HttpServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        config,
        Registries::shared(registry),
    )
    .await
    .unwrap();
    let (addr, app) = (server.local_addr(), Arc::clone(&server.service.app));
    let connections = Arc::clone(&server.table);
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        app,
        connections,
        stop: Some(stop),
        done,
    }
}

/// A session opened with (or without) the elicitation capability.
async fn session(addr: SocketAddr, elicitation: bool) -> String {
    let reply = post(addr, &[], &initialize(elicitation)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.session()
}

/// A call posted on a connection of its own, its event stream read as it comes.
struct Stream {
    body: hyper::body::Incoming,
    pending: String,
}

impl Stream {
    async fn open(addr: SocketAddr, session: &str, body: String) -> Self {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        let request = hyper::Request::post(MCP_PATH)
            .header("host", format!("127.0.0.1:{}", addr.port()))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header(SESSION_HEADER, session)
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Self {
            body: response.into_body(),
            pending: String::new(),
        }
    }

    /// The next message on the stream.
    async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let event: String = self.pending.drain(..end + 2).collect();
                if let Some(data) = event.lines().find_map(|line| line.strip_prefix("data: ")) {
                    return serde_json::from_str(data).unwrap();
                }
                continue;
            }
            let frame = tokio::time::timeout(Duration::from_secs(10), self.body.frame())
                .await
                .expect("a message in time")
                .expect("the stream is open")
                .unwrap();
            if let Ok(data) = frame.into_data() {
                self.pending.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
    }
}

fn answer(id: &Value, result: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

fn text(message: &Value) -> (String, bool) {
    (
        message["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned(),
        message["result"]["isError"].as_bool().unwrap(),
    )
}

#[tokio::test]
async fn a_question_goes_out_on_the_calls_stream_and_forged_or_foreign_answers_are_ignored() {
    let (server, ran) =
        start_asking(stateful().with_approval(ApprovalPolicy::new().confirm_tool("erase"))).await;
    let addr = server.addr;
    let alice = session(addr, true).await;
    let mallory = session(addr, true).await;
    let mut call = Stream::open(addr, &alice, call_line(7, "erase", &json!({"path": "/"}))).await;
    let question = call.next().await;
    assert_eq!(question["method"], "elicitation/create");
    let id = question["id"].clone();
    // Another session answers with alice's question id: not its question, ignored (202,
    // as any response is).
    let forged = post(
        addr,
        &[(SESSION_HEADER, &mallory)],
        &answer(&id, &json!({"action": "accept"})),
    )
    .await;
    assert_eq!(forged.status, StatusCode::ACCEPTED);
    // Forged ids in alice's own session: ignored too.
    for forged_id in [json!("toolhost-ask-0-0"), json!(7), json!(1)] {
        let reply = post(
            addr,
            &[(SESSION_HEADER, &alice)],
            &answer(&forged_id, &json!({"action": "accept"})),
        )
        .await;
        assert_eq!(reply.status, StatusCode::ACCEPTED);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !ran.0.load(Ordering::SeqCst),
        "a forged answer must not run the tool"
    );
    let session = server
        .app
        .sessions
        .find(&alice, &crate::http::caller::Caller::default(), None)
        .await
        .unwrap();
    assert_eq!(session.questions().open_count(), 1);
    assert_eq!(session.questions().ignored(), 3);
    // Alice declines: the call ends, unrun, on its stream.
    let reply = post(
        addr,
        &[(SESSION_HEADER, &alice)],
        &answer(&id, &json!({"action": "decline"})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    let result = call.next().await;
    assert_eq!(result["id"], 7);
    let (message, error) = text(&result);
    assert!(error && message.contains("the user declined"), "{message}");
    assert!(!ran.0.load(Ordering::SeqCst));
    assert_eq!(session.questions().open_count(), 0);

    // Accepted in its own session: it runs.
    let mut call = Stream::open(addr, &alice, call_line(8, "erase", &json!({}))).await;
    let id = call.next().await["id"].clone();
    post(
        addr,
        &[(SESSION_HEADER, &alice)],
        &answer(&id, &json!({"action": "accept"})),
    )
    .await;
    assert_eq!(text(&call.next().await), ("erased".to_owned(), false));
    assert!(ran.0.load(Ordering::SeqCst));
    server.stop().await;
}

#[tokio::test]
async fn a_request_that_cannot_carry_a_question_or_a_client_without_the_capability_is_refused() {
    let (server, ran) =
        start_asking(stateful().with_approval(ApprovalPolicy::new().confirm_destructive())).await;
    let addr = server.addr;
    // The capability, but a request that takes JSON only: no stream to ask on.
    let asks = session(addr, true).await;
    let reply = post(
        addr,
        &[(SESSION_HEADER, &asks), ("accept", "application/json")],
        &call_line(1, "erase", &json!({})),
    )
    .await;
    let (message, error) = text(&reply.json());
    assert!(error, "{message}");
    assert!(
        message.contains("this request cannot carry a question"),
        "{message}"
    );
    // No capability: refused, never asked, never run.
    let silent = session(addr, false).await;
    let reply = post(
        addr,
        &[(SESSION_HEADER, &silent)],
        &call_line(2, "erase", &json!({})),
    )
    .await;
    let (message, error) = text(&reply.json());
    assert!(error, "{message}");
    assert!(
        message.contains("this client cannot ask its user"),
        "{message}"
    );
    assert!(!ran.0.load(Ordering::SeqCst));
    server.stop().await;
}

#[tokio::test]
async fn a_question_nobody_answers_times_out_and_frees_the_call() {
    let (server, ran) = start_asking(
        stateful()
            .with_approval(ApprovalPolicy::new().confirm_tool("erase"))
            .with_confirm_timeout(Duration::from_millis(300)),
    )
    .await;
    let addr = server.addr;
    let alice = session(addr, true).await;
    let mut call = Stream::open(addr, &alice, call_line(3, "erase", &json!({}))).await;
    assert_eq!(call.next().await["method"], "elicitation/create");
    assert_eq!(call.next().await["method"], "notifications/cancelled");
    let (message, error) = text(&call.next().await);
    assert!(
        error && message.contains("no answer within 0.3 s"),
        "{message}"
    );
    assert!(!ran.0.load(Ordering::SeqCst));
    until("the call's place is free", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 0
    })
    .await;
    server.stop().await;
}

/// A session of `revision` opened with `capabilities`.
async fn session_with(addr: SocketAddr, revision: &str, capabilities: Value) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": revision, "capabilities": capabilities,
        "clientInfo": {"name": "t", "version": "1"}}});
    let reply = post(addr, &[], &init.to_string()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.session()
}

#[tokio::test]
async fn a_sampling_request_goes_out_on_the_calls_stream_and_only_its_own_answer_counts() {
    let server = start_with(crate::tests::sampling::sampling_registry(), stateful()).await;
    let addr = server.addr;
    for revision in ["2024-11-05", "2025-11-25"] {
        let alice = session_with(addr, revision, json!({"sampling": {}})).await;
        let mallory = session_with(addr, revision, json!({"sampling": {}})).await;
        let mut call = Stream::open(
            addr,
            &alice,
            call_line(7, "summarise", &json!({"text": "Hi"})),
        )
        .await;
        let request = call.next().await;
        assert_eq!(request["method"], "sampling/createMessage");
        assert_eq!(request["params"]["maxTokens"], 50);
        let id = request["id"].clone();
        let forged = json!({"role": "assistant", "content": {"type": "text", "text": "Mallory says"}, "model": "evil"});
        // Another session's answer to alice's id, and forged ids in her own: ignored.
        for (session, forged_id) in [
            (&mallory, &id),
            (&alice, &json!("toolhost-ask-0-0")),
            (&alice, &json!(7)),
        ] {
            let reply = post(
                addr,
                &[(SESSION_HEADER, session)],
                &answer(forged_id, &forged),
            )
            .await;
            assert_eq!(reply.status, StatusCode::ACCEPTED);
        }
        let good = json!({"role": "assistant", "content": {"type": "text", "text": "Short."}, "model": "test-model", "stopReason": "endTurn"});
        let reply = post(addr, &[(SESSION_HEADER, &alice)], &answer(&id, &good)).await;
        assert_eq!(reply.status, StatusCode::ACCEPTED);
        let result = call.next().await;
        assert_eq!(result["id"], 7);
        assert_eq!(
            text(&result),
            (
                r#"test-model (Assistant, Some("endTurn")): {"type":"text","text":"Short."}"#
                    .to_owned(),
                false
            ),
            "{revision}"
        );
    }
    // A request that takes JSON only cannot carry the request: unsupported.
    let alice = session_with(addr, "2025-11-25", json!({"sampling": {}})).await;
    let reply = post(
        addr,
        &[(SESSION_HEADER, &alice), ("accept", "application/json")],
        &call_line(8, "summarise", &json!({})),
    )
    .await;
    assert_eq!(
        text(&reply.json()),
        ("summarise: unsupported: this request cannot carry a question to the user: over Streamable HTTP, send the call alone (not in a batch) with Accept: text/event-stream".to_owned(), true)
    );
    // A session without the capability is never sent one.
    let silent = session_with(addr, "2025-11-25", json!({"elicitation": {}})).await;
    let reply = post(
        addr,
        &[(SESSION_HEADER, &silent)],
        &call_line(9, "summarise", &json!({})),
    )
    .await;
    assert_eq!(
        text(&reply.json()),
        ("summarise: unsupported: the client's model cannot be asked: this client did not declare the sampling capability".to_owned(), true)
    );
    server.stop().await;
}
