//! Who and what is refused before a message is served: hosts, origins, tokens, public
//! addresses, bodies, malformed requests and headers that disagree with the body.

use super::*;

#[tokio::test]
async fn foreign_hosts_and_origins_are_refused() {
    let probe = Arc::default();
    let server = start(stateful(), &probe).await;
    let port = server.addr.port();
    // DNS rebinding: the attacker's name in Host, with or without its Origin.
    for headers in [
        vec![("host", "evil.example.com")],
        vec![
            ("host", "evil.example.com:1"),
            ("origin", "http://evil.example.com"),
        ],
        vec![("host", "")],
        vec![("host", "127.0.0.1.evil.example.com")],
    ] {
        let reply = post(server.addr, &headers, INIT).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{headers:?}");
        assert!(
            reply.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--allow-host"),
            "{}",
            reply.body
        );
    }
    // A Host that is not text does not fall back to the request line's authority.
    let stream = TcpStream::connect(server.addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::post(format!("http://127.0.0.1:{port}{MCP_PATH}"))
        .header(
            "host",
            axum::http::HeaderValue::from_bytes(b"evil\xff.example").unwrap(),
        )
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(INIT)))
        .unwrap();
    let status = sender.send_request(request).await.unwrap().status();
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A page on another local port (another app's, or an attacker's) is refused.
    let reply = post(server.addr, &[("origin", "http://localhost:3000")], INIT).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert!(reply.body.contains("--allow-origin http://localhost:3000"));
    let reply = post(server.addr, &[("origin", "null")], INIT).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    // The server's own origin, by any loopback name, and no Origin at all, pass.
    for origin in [
        format!("http://127.0.0.1:{port}"),
        format!("http://LOCALHOST:{port}/"),
    ] {
        let reply = post(server.addr, &[("origin", &origin)], INIT).await;
        assert_eq!(reply.status, StatusCode::OK, "{origin}: {}", reply.body);
    }
    for host in ["localhost", &format!("[::1]:{port}")] {
        let reply = post(server.addr, &[("host", host)], INIT).await;
        assert_eq!(reply.status, StatusCode::OK, "{host}");
    }
    server.stop().await;
}

#[tokio::test]
async fn allowed_hosts_and_origins_can_be_added() {
    let probe = Arc::default();
    let mut config = stateful();
    config.allowed_hosts = vec!["mcp.example.org".into()];
    config.allowed_origins = vec!["https://app.example.org/".into()];
    let server = start(config, &probe).await;
    let reply = post(
        server.addr,
        &[
            ("host", "MCP.example.org:443"),
            ("origin", "https://app.example.org"),
        ],
        INIT,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let reply = post(server.addr, &[("host", "other.example.org")], INIT).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    server.stop().await;
}

#[tokio::test]
async fn bearer_tokens_are_required_and_checked() {
    let probe = Arc::default();
    let mut config = stateful();
    config.tokens = Some(tokens());
    let server = start(config, &probe).await;
    let reply = post(server.addr, &[], INIT).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        reply.header("www-authenticate"),
        Some(r#"Bearer realm="wasm-toolhost""#)
    );
    assert_eq!(reply.json()["error"]["code"], -32000);
    for wrong in [
        "Bearer token-aaaaaaaaaaaaaaab",
        "Bearer token-aaaaaaaaaaaaaaa",
        "Bearer ",
        &format!("Basic {TOKEN_A}"),
        TOKEN_A,
    ] {
        let reply = post(server.addr, &[("authorization", wrong)], INIT).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{wrong}");
        assert!(!reply.body.contains(TOKEN_A), "no token echoed");
    }
    let reply = post(
        server.addr,
        &[("authorization", "Bearer token-wrongwrongwrong")],
        INIT,
    )
    .await;
    assert_eq!(
        reply.header("www-authenticate"),
        Some(r#"Bearer realm="wasm-toolhost", error="invalid_token""#)
    );
    let auth_a = format!("Bearer {TOKEN_A}");
    let reply = post(server.addr, &[("authorization", &auth_a)], INIT).await;
    assert_eq!(reply.status, StatusCode::OK);
    let session = reply.session();
    // Alice's session is not Bob's: his token with her session id finds nothing.
    let auth_b = format!("bearer {TOKEN_B}");
    let reply = post(
        server.addr,
        &[("authorization", &auth_b), (SESSION_HEADER, &session)],
        LIST,
    )
    .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    let reply = post(
        server.addr,
        &[("authorization", &auth_a), (SESSION_HEADER, &session)],
        LIST,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    // Every method is guarded.
    for method in [Method::GET, Method::DELETE] {
        let reply = send(
            server.addr,
            method.clone(),
            &[(SESSION_HEADER, &session)],
            "",
        )
        .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{method}");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_public_address_needs_tokens_or_the_explicit_flag() {
    let registries = || Registries::shared(Arc::new(Registry::new()));
    let public: SocketAddr = "0.0.0.0:0".parse().unwrap();
    let err = HttpServer::bind(public, stateful(), registries())
        .await
        .unwrap_err();
    assert!(matches!(err, HttpError::PublicWithoutAuth { .. }), "{err}");
    assert!(err.to_string().contains("--auth-token-file"), "{err}");
    let mut config = stateful();
    config.tokens = Some(tokens());
    assert!(HttpServer::bind(public, config, registries()).await.is_ok());
    let mut config = stateful();
    config.insecure_public = true;
    assert!(HttpServer::bind(public, config, registries()).await.is_ok());
    let mut config = stateful();
    config.max_body_bytes = 0;
    let err = HttpServer::bind("127.0.0.1:0".parse().unwrap(), config, registries())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the request body limit is 0, which would serve nothing; give at least 1"
    );
}

#[tokio::test]
async fn bodies_over_the_limit_are_refused_declared_or_streamed() {
    let probe = Arc::default();
    let mut config = HttpConfig::new(None);
    config.max_body_bytes = 1000;
    let server = start(config, &probe).await;
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"greet","arguments":{{"name":"{}"}}}}}}"#,
        "x".repeat(2000)
    );
    let reply = post(server.addr, &[], &big).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(reply.body.contains("over 1000 bytes"), "{}", reply.body);
    // Chunked, no declared length: cut off while reading.
    let chunks = futures_util::stream::iter(
        (0..100)
            .map(|_| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(vec![b' '; 100])))),
    );
    let reply = send_body(server.addr, Method::POST, &[], StreamBody::new(chunks)).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    // Just under it is served.
    let reply = post(server.addr, &[], &call(1, "greet")).await;
    assert_eq!(reply.status, StatusCode::OK);
    server.stop().await;
}

#[tokio::test]
async fn malformed_requests_get_clear_errors() {
    let probe = Arc::default();
    let server = start(stateful(), &probe).await;
    let reply = post(server.addr, &[("content-type", "text/plain")], INIT).await;
    assert_eq!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let reply = post(server.addr, &[("accept", "text/html")], INIT).await;
    assert_eq!(reply.status, StatusCode::NOT_ACCEPTABLE);
    // A client that takes only event streams gets its answer as one event.
    let reply = post(server.addr, &[("accept", "text/event-stream")], INIT).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    assert!(
        reply.body.starts_with("event: message\ndata: {\"id\":1,") && reply.body.ends_with("}\n\n"),
        "{}",
        reply.body
    );
    let reply = post(server.addr, &[(PROTOCOL_HEADER, "1999-01-01")], INIT).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.json()["error"]["code"], -32022);
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Bad Request: unsupported MCP-Protocol-Version \"1999-01-01\"; this server speaks 2026-07-28, 2025-11-25"),
        "{}",
        reply.body
    );
    let reply = post(server.addr, &[], "not json").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.json()["error"]["code"], -32700);
    assert_eq!(reply.json()["id"], Value::Null);
    let reply = post(server.addr, &[], "").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let reply = post(server.addr, &[], r#"{"jsonrpc":"2.0","id":3}"#).await;
    assert_eq!(
        (reply.status, reply.json()["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!(-32600))
    );
    // Only /mcp, and only its methods.
    let reply = send(server.addr, Method::PUT, &[], INIT).await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    server.stop().await;
}

/// A hostile client (or a proxy routing on headers) cannot make the server act on a
/// tool or method other than the one its headers name: 2026-07-28 requests whose
/// mirrored headers are missing or differ from the body are refused with HeaderMismatch,
/// and nothing runs.
#[tokio::test]
async fn modern_requests_must_match_their_headers() {
    let probe = Arc::default();
    let server = start(stateful(), &probe).await;
    let v = (PROTOCOL_HEADER, "2026-07-28");
    let mismatch = |reply: &Reply, what: &str| {
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let body = reply.json();
        assert_eq!(body["error"]["code"], -32020, "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(what),
            "{body}"
        );
    };
    // The header names a harmless tool, the body a long-running one.
    let hold = modern(1, "tools/call", Some("hold"));
    let reply = post(
        server.addr,
        &[v, ("mcp-method", "tools/call"), ("mcp-name", "greet")],
        &hold,
    )
    .await;
    mismatch(
        &reply,
        "Mcp-Name header value \"greet\" does not match body value \"hold\"",
    );
    let reply = post(server.addr, &[v, ("mcp-method", "tools/call")], &hold).await;
    mismatch(&reply, "no Mcp-Name header");
    let reply = post(server.addr, &[v, ("mcp-name", "hold")], &hold).await;
    mismatch(&reply, "no Mcp-Method header");
    let reply = post(
        server.addr,
        &[v, ("mcp-method", "tools/list"), ("mcp-name", "hold")],
        &hold,
    )
    .await;
    mismatch(&reply, "Mcp-Method header value 'tools/list'");
    let reply = post(
        server.addr,
        &[("mcp-method", "tools/call"), ("mcp-name", "hold")],
        &hold,
    )
    .await;
    mismatch(&reply, "no MCP-Protocol-Version header");
    let reply = post(
        server.addr,
        &[
            (PROTOCOL_HEADER, "2025-11-25"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "hold"),
        ],
        &hold,
    )
    .await;
    mismatch(
        &reply,
        "'2025-11-25' does not match body value '2026-07-28'",
    );
    let reply = post(
        server.addr,
        &[
            v,
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?!!?="),
        ],
        &hold,
    )
    .await;
    mismatch(&reply, "not valid =?base64?...?=");
    assert_eq!(probe.peak.load(Ordering::SeqCst), 0, "nothing ran");

    // Matching headers (the name in its Base64 form too) are served, without a session.
    let greet = modern(2, "tools/call", Some("greet"));
    let reply = post(
        server.addr,
        &[
            v,
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?Z3JlZXQ=?="),
        ],
        &greet,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.json()["result"]["resultType"], "complete");
    assert!(reply.headers.get(SESSION_HEADER).is_none());
    // An unknown method is 404 with its JSON-RPC error; an unknown version 400 -32022.
    let reply = post(
        server.addr,
        &[v, ("mcp-method", "nope")],
        &modern(3, "nope", None),
    )
    .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);
    assert_eq!(reply.json()["error"]["code"], -32601);
    let reply = post(server.addr, &[(PROTOCOL_HEADER, "2099-01-01")], &greet).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let body = reply.json();
    assert_eq!(body["error"]["code"], -32022);
    assert_eq!(body["error"]["data"]["requested"], "2099-01-01");
    assert!(body.get("id").is_none(), "{body}");
    server.stop().await;
}

/// A client that sends its body with a request that is refused before the body is read
/// (no token: an OAuth client's first request) either reuses the connection for the next
/// request or is told to close it: never a connection the server drops under a request
/// the client thought it could send.
#[tokio::test]
async fn a_refusal_before_the_body_is_read_keeps_or_closes_the_connection_cleanly() {
    let probe = Arc::default();
    let mut config = stateful();
    config.tokens = Some(tokens());
    let server = start(config, &probe).await;
    let port = server.addr.port();
    // Small bodies (every real first request) and one bigger than any refusal drains.
    for size in [INIT.len(), 200_000] {
        let stream = TcpStream::connect(server.addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        let connection = tokio::spawn(connection);
        let body = if size == INIT.len() {
            INIT.to_owned()
        } else {
            format!("{INIT}{}", " ".repeat(size - INIT.len()))
        };
        let request = hyper::Request::post(format!("http://127.0.0.1:{port}{MCP_PATH}"))
            .header("host", format!("127.0.0.1:{port}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        let closes = response
            .headers()
            .get("connection")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        let _ = response.into_body().collect().await.unwrap();
        if closes {
            assert!(
                size > INIT.len(),
                "a small refused body is drained, not a reason to close"
            );
            continue;
        }
        // Kept alive: the next request on the same connection is answered.
        sender.ready().await.unwrap();
        let auth = format!("Bearer {TOKEN_A}");
        let request = hyper::Request::post(format!("http://127.0.0.1:{port}{MCP_PATH}"))
            .header("host", format!("127.0.0.1:{port}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", auth)
            .body(Full::new(Bytes::from(INIT)))
            .unwrap();
        let response = sender.send_request(request).await;
        assert!(
            response
                .as_ref()
                .is_ok_and(|r| r.status() == StatusCode::OK),
            "size {size}: the kept-alive connection was dropped: {response:?}"
        );
        drop(sender);
        let _ = connection.await;
    }
    server.stop().await;
}

/// Refusals before a session are counted by status, for the operator's metrics: a
/// missing or wrong token (401) and a foreign host (403); an admitted request is not.
#[tokio::test]
async fn refusals_are_counted_by_status() {
    let probe = Arc::default();
    let mut config = stateful();
    config.tokens = Some(tokens());
    let server = start(config, &probe).await;
    let refusals = |server: &Running| server.app.counters.stats().http_refusals;
    assert_eq!(refusals(&server), [0, 0, 0, 0]);
    assert_eq!(
        post(server.addr, &[], INIT).await.status,
        StatusCode::UNAUTHORIZED
    );
    let wrong = post(
        server.addr,
        &[("authorization", "Bearer token-wrongwrongwrong")],
        INIT,
    )
    .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    let foreign = post(server.addr, &[("host", "evil.example.com")], INIT).await;
    assert_eq!(foreign.status, StatusCode::FORBIDDEN);
    let auth = format!("Bearer {TOKEN_A}");
    assert_eq!(
        post(server.addr, &[("authorization", &auth)], INIT)
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(refusals(&server), [2, 1, 0, 0], "401, 403, 429, 503");
    server.stop().await;
}
