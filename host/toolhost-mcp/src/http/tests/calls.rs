//! Tool calls under load and going away: the global and per-connection limits, clients
//! that leave or cancel, and shutdown.

use super::*;

#[tokio::test]
async fn calls_over_the_global_limit_get_503_and_the_rest_go_on() {
    let probe: Arc<Probe> = Arc::default();
    let mut config = HttpConfig::new(None);
    config.limits.max_in_flight = NonZeroUsize::new(2).unwrap();
    let server = start(config, &probe).await;
    let addr = server.addr;
    let held: Vec<_> = (0..2)
        .map(|i| tokio::spawn(async move { post(addr, &[], &call(i, "hold")).await }))
        .collect();
    until("two calls hold", || {
        probe.running.load(Ordering::SeqCst) == 2
    })
    .await;
    let reply = post(addr, &[], &call(9, "greet")).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.header("retry-after"), Some("1"));
    assert_eq!(reply.json()["id"], 9);
    assert_eq!(
        reply.json()["error"]["message"],
        "Service Unavailable: 2 tool calls are running, the most allowed at once; retry when one ends"
    );
    // Methods that run no tool are still answered.
    assert_eq!(post(addr, &[], LIST).await.status, StatusCode::OK);
    probe.release.notify_waiters();
    for held in held {
        let reply = held.await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.json()["result"]["content"][0]["text"], "held");
    }
    assert_eq!(
        post(addr, &[], &call(9, "greet")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        server
            .app
            .counters
            .peak_calls_running
            .load(Ordering::SeqCst),
        2
    );
    server.stop().await;
}

#[tokio::test]
async fn one_http2_connection_runs_at_most_its_share() {
    let probe: Arc<Probe> = Arc::default();
    let mut config = HttpConfig::new(None);
    config.max_in_flight_per_connection = 2;
    let server = start(config, &probe).await;
    let stream = TcpStream::connect(server.addr).await.unwrap();
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let authority = format!("127.0.0.1:{}", server.addr.port());
    let request = |body: String| {
        hyper::Request::post(format!("http://{authority}{MCP_PATH}"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap()
    };
    // A first exchange settles the connection's settings (its stream limit).
    let mut first = sender.clone();
    let status = first
        .send_request(request(LIST.into()))
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::OK);
    let calls: Vec<_> = (0..5)
        .map(|i| {
            let mut sender = sender.clone();
            let request = request(call(i, "hold"));
            tokio::spawn(async move {
                // A stream over the limit may be refused by HTTP/2 itself (REFUSED_STREAM).
                sender.send_request(request).await.map(|r| r.status())
            })
        })
        .collect();
    until("two calls hold", || {
        probe.running.load(Ordering::SeqCst) == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(probe.running.load(Ordering::SeqCst), 2, "the others wait");
    let mut answered = 0;
    while answered < 5 {
        probe.release.notify_waiters();
        tokio::time::sleep(Duration::from_millis(50)).await;
        answered = calls.iter().filter(|c| c.is_finished()).count();
    }
    let mut ok = 0;
    for call in calls {
        match call.await.unwrap() {
            Ok(StatusCode::OK) => ok += 1,
            Ok(status) => assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE),
            Err(err) => assert!(err.to_string().contains("refused"), "{err}"),
        }
    }
    assert!(ok >= 2, "{ok}");
    assert_eq!(probe.peak.load(Ordering::SeqCst), 2);
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_its_call() {
    let probe: Arc<Probe> = Arc::default();
    let server = start(HttpConfig::new(None), &probe).await;
    let request = server.running_call(None, 1, "wait").await;
    request.abort();
    until("the call is cancelled", || {
        probe.cancelled.load(Ordering::SeqCst) == 1
    })
    .await;
    until("its slot is free", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 0
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn a_cancelled_call_is_not_answered() {
    let probe: Arc<Probe> = Arc::default();
    let server = start(stateful(), &probe).await;
    let addr = server.addr;
    let id = post(addr, &[], INIT).await.session();
    let request = server.running_call(Some(&id), 7, "wait").await;
    let reply = post(
        addr,
        &[(SESSION_HEADER, &id)],
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#,
    )
    .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    let reply = request.await.unwrap();
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::NO_CONTENT, "")
    );
    server.stop().await;
}

#[tokio::test]
async fn shutdown_lets_running_calls_finish() {
    let probe: Arc<Probe> = Arc::default();
    let server = start(HttpConfig::new(None), &probe).await;
    let addr = server.addr;
    let napping = server.running_call(None, 1, "nap").await;
    let took = server.stop().await;
    let reply = napping.await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["result"]["content"][0]["text"], "rested");
    assert!(took < Duration::from_secs(5), "{took:?}");
    // No new connection is taken.
    assert!(TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn shutdown_cancels_what_outlives_the_grace_period() {
    let probe: Arc<Probe> = Arc::default();
    let mut config = stateful();
    config.shutdown_grace = Duration::from_millis(300);
    let server = start(config, &probe).await;
    let addr = server.addr;
    let id = post(addr, &[], INIT).await.session();
    let waiting = server.running_call(Some(&id), 1, "wait").await;
    let took = server.stop().await;
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(probe.cancelled.load(Ordering::SeqCst), 1);
    // Its client got no answer (the call was cancelled, or the connection closed).
    if let Ok(reply) = waiting.await {
        assert_ne!(reply.status, StatusCode::OK);
    }
}

/// One HTTP/2 client whose calls fill its connection's share (2): a ping, its
/// cancellations and the next call still get through on the same connection (HTTP/2
/// gives streams beyond the calls for them), the cancelled calls stop, free their
/// slots and are answered `204`, and the next call is answered at once.
#[tokio::test]
async fn cancellations_get_through_a_connection_full_of_calls() {
    let probe: Arc<Probe> = Arc::default();
    let mut config = stateful();
    config.max_in_flight_per_connection = 2;
    let server = start(config, &probe).await;
    let stream = TcpStream::connect(server.addr).await.unwrap();
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let authority = format!("127.0.0.1:{}", server.addr.port());
    let request = |body: String, session: Option<&str>| {
        let mut request = hyper::Request::post(format!("http://{authority}{MCP_PATH}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(session) = session {
            request = request.header(SESSION_HEADER, session);
        }
        request.body(Full::new(Bytes::from(body))).unwrap()
    };
    let send = |request: hyper::Request<Full<Bytes>>| {
        let mut sender = sender.clone();
        async move {
            let response =
                tokio::time::timeout(Duration::from_secs(5), sender.send_request(request))
                    .await
                    .expect("an answer within 5 s")
                    .unwrap();
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            Reply {
                status,
                headers,
                body: String::from_utf8(body.to_vec()).unwrap(),
            }
        }
    };
    let session = send(request(INIT.into(), None)).await.session();
    let calls: Vec<_> = (10..12)
        .map(|id| tokio::spawn(send(request(call(id, "wait"), Some(&session)))))
        .collect();
    until("two calls run", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 2
    })
    .await;

    let ping = send(request(
        r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#.into(),
        Some(&session),
    ))
    .await;
    assert_eq!(
        (ping.status, ping.body.as_str()),
        (StatusCode::OK, r#"{"id":"p","jsonrpc":"2.0","result":{}}"#)
    );
    for id in 10..12 {
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "user"}});
        let reply = send(request(cancel.to_string(), Some(&session))).await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (StatusCode::ACCEPTED, "")
        );
    }
    for call in calls {
        let reply = call.await.unwrap();
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (StatusCode::NO_CONTENT, "")
        );
    }
    assert_eq!(probe.cancelled.load(Ordering::SeqCst), 2);
    until("the cancelled calls free their slots", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 0
    })
    .await;
    let greet = send(request(call(20, "greet"), Some(&session))).await;
    assert_eq!(greet.status, StatusCode::OK);
    assert_eq!(
        greet.body,
        r#"{"id":20,"jsonrpc":"2.0","result":{"content":[{"text":"Hello, you!","type":"text"}],"isError":false}}"#
    );
    server.stop().await;
}

/// Calls fill the whole server's limit (4, one connection each): a ping and the
/// cancellations, on connections of their own, are answered; the slots come free and
/// the next call runs.
#[tokio::test]
async fn cancellations_get_through_a_server_full_of_calls() {
    let probe: Arc<Probe> = Arc::default();
    let mut config = stateful();
    config.limits.max_in_flight = NonZeroUsize::new(4).unwrap();
    let server = start(config, &probe).await;
    let addr = server.addr;
    let session = post(addr, &[], INIT).await.session();
    let calls: Vec<_> = (10..14)
        .map(|id| {
            let session = session.clone();
            tokio::spawn(async move {
                post(addr, &[(SESSION_HEADER, &session)], &call(id, "wait")).await
            })
        })
        .collect();
    until("four calls run", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 4
    })
    .await;
    let headers = [(SESSION_HEADER, session.as_str())];
    let busy = post(addr, &headers, &call(15, "greet")).await;
    assert_eq!(busy.status, StatusCode::SERVICE_UNAVAILABLE);
    let ping = post(
        addr,
        &headers,
        r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#,
    )
    .await;
    assert_eq!(
        (ping.status, ping.body.as_str()),
        (StatusCode::OK, r#"{"id":"p","jsonrpc":"2.0","result":{}}"#)
    );
    for id in 10..14 {
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id}});
        let reply = post(addr, &headers, &cancel.to_string()).await;
        assert_eq!(reply.status, StatusCode::ACCEPTED);
    }
    for call in calls {
        let reply = call.await.unwrap();
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (StatusCode::NO_CONTENT, "")
        );
    }
    until("the cancelled calls free their slots", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 0
    })
    .await;
    let greet = post(addr, &headers, &call(16, "greet")).await;
    assert_eq!(greet.status, StatusCode::OK);
    assert_eq!(greet.json()["result"]["content"][0]["text"], "Hello, you!");
    server.stop().await;
}
