//! Event streams: the session's GET stream and calls answered as a stream.

use super::*;

#[tokio::test]
async fn the_session_stream_carries_the_servers_own_messages() {
    let probe: Arc<Probe> = Arc::default();
    let server = start(stateful(), &probe).await;
    let addr = server.addr;
    let id = post(addr, &[], INIT).await.session();
    let reply = send(
        addr,
        Method::GET,
        &[(SESSION_HEADER, &id), ("accept", "application/json")],
        "",
    )
    .await;
    assert_eq!(reply.status, StatusCode::NOT_ACCEPTABLE);
    let reply = send(addr, Method::GET, &[("accept", "text/event-stream")], "").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);

    // Open the stream by hand, to read it while it is open.
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::get(MCP_PATH)
        .header("host", format!("127.0.0.1:{}", addr.port()))
        .header("accept", "text/event-stream")
        .header(SESSION_HEADER, &id)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    // One stream per session.
    let reply = send(
        addr,
        Method::GET,
        &[(SESSION_HEADER, &id), ("accept", "text/event-stream")],
        "",
    )
    .await;
    assert_eq!(reply.status, StatusCode::CONFLICT);

    let session = server
        .app
        .sessions
        .find(&id, &crate::http::caller::Caller::default(), None)
        .await
        .unwrap();
    until("the stream is attached", || {
        session.notifier().is_connected()
    })
    .await;
    session
        .notifier()
        .notify("notifications/tools/list_changed", None)
        .await;
    let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        frame.into_data().unwrap(),
        Bytes::from_static(
            b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"
        )
    );
    // Ending the session ends its stream.
    assert_eq!(
        send(addr, Method::DELETE, &[(SESSION_HEADER, &id)], "")
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let end = tokio::time::timeout(Duration::from_secs(10), body.collect()).await;
    assert!(end.is_ok(), "the stream ended");
    server.stop().await;
}

#[tokio::test]
async fn a_call_with_messages_of_its_own_is_answered_as_an_event_stream() {
    let (messages_in, messages) = mpsc::channel(8);
    let (release, released) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = released.await;
        Some(Message::response(
            &RequestId::from(3),
            Bytes::from_static(b"{\"done\":true}"),
        ))
    });
    let token = CancellationToken::new();
    let response = event_stream(
        Message::notification("notifications/progress", Some(&json!({"progress": 1}))),
        messages,
        task,
        token.clone().drop_guard(),
    );
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    messages_in
        .send(Message::notification(
            "notifications/progress",
            Some(&json!({"progress": 2})),
        ))
        .await
        .unwrap();
    drop(messages_in);
    let _ = release.send(());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        std::str::from_utf8(&body).unwrap(),
        concat!(
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n",
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":2}}\n\n",
            "event: message\ndata: {\"id\":3,\"jsonrpc\":\"2.0\",\"result\":{\"done\":true}}\n\n",
        )
    );
    assert!(token.is_cancelled(), "the guard is dropped with the stream");
}
