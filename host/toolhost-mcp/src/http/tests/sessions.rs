//! Sessions: from initialize to DELETE, across processes, stateless, and batches per
//! revision.

use super::*;

#[tokio::test]
async fn sessions_from_initialize_to_delete() {
    let probe = Arc::default();
    let server = start(stateful(), &probe).await;
    let addr = server.addr;
    let reply = post(addr, &[], INIT).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.json()["result"]["protocolVersion"], "2025-06-18");
    let id = reply.session();
    assert_eq!(id.len(), SESSION_ID_LEN);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
    // Each initialize opens a new session.
    assert_ne!(post(addr, &[], INIT).await.session(), id);

    let reply = post(addr, &[], LIST).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(
        reply.body.contains("no Mcp-Session-Id header"),
        "{}",
        reply.body
    );
    let forged = format!("{}{}", &id[..32], "0".repeat(32));
    for bad in [forged.as_str(), "x", "../../etc"] {
        let reply = post(addr, &[(SESSION_HEADER, bad)], LIST).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{bad}");
    }
    let session = [
        (SESSION_HEADER, id.as_str()),
        (PROTOCOL_HEADER, "2025-06-18"),
    ];
    let reply = post(
        addr,
        &session,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::ACCEPTED, "")
    );
    let reply = post(addr, &session, LIST).await;
    assert_eq!(reply.status, StatusCode::OK);
    let list = reply.json();
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["greet", "hold", "wait", "nap"]);
    let reply = post(addr, &session, &call(5, "greet")).await;
    assert_eq!(
        reply.json(),
        json!({"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"Hello, you!"}],"isError":false}})
    );
    // The calls run in the session: its id is the environment's session id.
    assert_eq!(
        server
            .app
            .sessions
            .find(&id, &crate::http::caller::Caller::default(), None)
            .await
            .unwrap()
            .environment()
            .session_id,
        id
    );

    let reply = send(addr, Method::DELETE, &session, "").await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT);
    let reply = post(addr, &session, LIST).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert!(reply.body.contains("send initialize"), "{}", reply.body);
    let reply = send(addr, Method::DELETE, &session, "").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    server.stop().await;
}

#[tokio::test]
async fn another_process_with_the_same_key_serves_the_session() {
    let probe = Arc::default();
    let secret = b"a secret shared by both processes, 32+ bytes";
    let config = || HttpConfig::new(Some(SessionKey::from_secret(secret).unwrap()));
    let (one, two) = (start(config(), &probe).await, start(config(), &probe).await);
    let other = start(stateful(), &probe).await;
    let id = post(one.addr, &[], INIT).await.session();
    let reply = post(two.addr, &[(SESSION_HEADER, &id)], &call(1, "greet")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let reply = post(other.addr, &[(SESSION_HEADER, &id)], LIST).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "a key of its own");
    for server in [one, two, other] {
        server.stop().await;
    }
}

/// A policy or plugin reload on one process reaches a session that process resumed
/// (its `initialize` answered by another): the process tells the session's event
/// stream `notifications/tools/list_changed`, as the process that opened it would.
#[tokio::test]
async fn a_session_resumed_by_another_process_hears_of_its_list_changes() {
    let probe = Arc::default();
    let secret = b"a secret shared by both processes, 32+ bytes";
    let config =
        || HttpConfig::new(Some(SessionKey::from_secret(secret).unwrap())).with_list_changed(true);
    let one = start(config(), &probe).await;
    let registry = registry(&probe);
    let server = HttpServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        config(),
        Registries::shared(Arc::clone(&registry)),
    )
    .await
    .unwrap();
    let two = server.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    let id = post(one.addr, &[], INIT).await.session();
    // The event stream on the other process, as a client sends it: the session id and
    // the revision it negotiated.
    let stream = TcpStream::connect(two).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::get(MCP_PATH)
        .header("host", format!("127.0.0.1:{}", two.port()))
        .header("accept", "text/event-stream")
        .header(SESSION_HEADER, &id)
        .header(PROTOCOL_HEADER, "2025-06-18")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A reload on that process: a tool more.
    registry
        .register(
            ToolDefinition::new("later", "Later.", json!({"type": "object"})),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new("later"))
            },
        )
        .unwrap();
    let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .expect("tools/list_changed on the resumed session's stream")
        .unwrap()
        .unwrap();
    assert_eq!(
        frame.into_data().unwrap(),
        Bytes::from_static(
            b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"
        )
    );
    let _ = stop.send(());
    one.stop().await;
}

#[tokio::test]
async fn stateless_serves_every_request_alone() {
    let probe = Arc::default();
    let server = start(HttpConfig::new(None), &probe).await;
    let reply = post(server.addr, &[], INIT).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header(SESSION_HEADER), None);
    let reply = post(server.addr, &[], &call(1, "greet")).await;
    assert_eq!(reply.status, StatusCode::OK);
    for method in [Method::GET, Method::DELETE] {
        let reply = send(server.addr, method.clone(), &[], "").await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
        assert_eq!(reply.header("allow"), Some("POST"));
    }
    server.stop().await;
}

/// Batches over HTTP follow the session's revision: served after a 2025-03-26
/// `initialize` (one JSON array back), refused after any other.
#[tokio::test]
async fn batches_only_in_a_2025_03_26_session() {
    let probe = Arc::default();
    let server = start(stateful(), &probe).await;
    let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}]"#;
    for (version, served) in [("2025-03-26", true), ("2025-06-18", false)] {
        let init = INIT.replace("2025-06-18", version);
        let reply = post(server.addr, &[], &init).await;
        let id = reply.headers[SESSION_HEADER].to_str().unwrap().to_owned();
        let reply = post(server.addr, &[(SESSION_HEADER, id.as_str())], batch).await;
        if served {
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
            let answers = reply.json();
            assert_eq!(answers[0], json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
            assert_eq!(answers[1]["id"], 2);
            assert_eq!(answers[1]["result"]["content"][0]["text"], "Hello, Ada!");
            assert_eq!(answers.as_array().unwrap().len(), 2);
        } else {
            assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
            assert_eq!(reply.json()["error"]["code"], -32600, "{}", reply.body);
        }
    }
    server.stop().await;
}
