//! The endpoint mounted by an application: [`McpService`] on a route of an axum app,
//! next to the app's own route, keeps every protection that is not the connections'.

use super::*;

use axum::routing::get;

const MOUNT: &str = "/agents/mcp";

struct Mounted {
    addr: SocketAddr,
    service: McpService,
    stop: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Mounted {
    /// Stops as an application would: the server stops taking connections while the
    /// service ends its event streams and lets its calls finish.
    async fn stop(self) {
        let _ = self.stop.send(());
        let (served, ()) = tokio::time::timeout(Duration::from_secs(20), async {
            tokio::join!(self.done, self.service.shutdown())
        })
        .await
        .expect("the app and the service stop");
        served.unwrap().unwrap();
    }
}

/// An axum app with `/health` and the service at [`MOUNT`].
async fn mount(config: HttpConfig, probe: &Arc<Probe>) -> Mounted {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = McpService::new(config, Registries::shared(registry(probe)), addr).unwrap();
    let app = axum::Router::new()
        .route("/health", get(|| async { "ok" }))
        .route_service(MOUNT, service.clone());
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async {
            let _ = stopped.await;
        })
        .await
    });
    Mounted {
        addr,
        service,
        stop,
        done,
    }
}

async fn post_to(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    send_to(
        addr,
        path,
        Method::POST,
        headers,
        Full::new(Bytes::from(body.to_owned())),
    )
    .await
}

/// A session opened through the mount is served there, beside the app's own route;
/// the service answers nowhere else.
#[tokio::test]
async fn a_mounted_service_serves_its_route_beside_the_apps_own() {
    let probe = Arc::default();
    let app = mount(stateful(), &probe).await;
    let health = send_to(
        app.addr,
        "/health",
        Method::GET,
        &[],
        Full::new(Bytes::new()),
    )
    .await;
    assert_eq!(
        (health.status, health.body.as_str()),
        (StatusCode::OK, "ok")
    );

    let init = post_to(app.addr, MOUNT, &[], INIT).await;
    assert_eq!(init.status, StatusCode::OK, "{}", init.body);
    assert_eq!(init.json()["result"]["serverInfo"]["name"], "wasm-toolhost");
    let session = init.session();
    let greeted = post_to(
        app.addr,
        MOUNT,
        &[(SESSION_HEADER, &session)],
        &json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}).to_string(),
    )
    .await;
    assert_eq!(
        greeted.json()["result"]["content"][0]["text"],
        "Hello, Ada!",
        "{}",
        greeted.body
    );
    assert_eq!(app.service.stats_handle().sessions(), 1);
    assert_eq!(app.service.stats_handle().connections(), 0, "the app's");

    // Not at the server's own path, nor at the app's root.
    for path in [MCP_PATH, "/", "/agents"] {
        let reply = post_to(app.addr, path, &[], INIT).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{path}");
    }
    // DELETE ends the session there, as on the server's own listener.
    let deleted = send_to(
        app.addr,
        MOUNT,
        Method::DELETE,
        &[(SESSION_HEADER, &session)],
        Full::new(Bytes::new()),
    )
    .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let after = post_to(app.addr, MOUNT, &[(SESSION_HEADER, &session)], LIST).await;
    assert_eq!(after.status, StatusCode::NOT_FOUND);
    let put = send_to(app.addr, MOUNT, Method::PUT, &[], Full::new(Bytes::new())).await;
    assert_eq!(put.status, StatusCode::METHOD_NOT_ALLOWED);
    app.stop().await;
}

/// A hostile page or client gets through the mount no further than through the
/// server's own listener: a DNS-rebinding Host, a foreign Origin, a missing or wrong
/// token, an oversized body and a session past the limit are each refused, and no tool
/// runs.
#[tokio::test]
async fn a_mounted_service_keeps_the_request_checks() {
    let probe = Arc::default();
    let mut config = stateful();
    config.tokens = Some(tokens());
    config.max_body_bytes = 1024;
    config.sessions.max_sessions = 1;
    let app = mount(config, &probe).await;
    let bearer = format!("Bearer {TOKEN_A}");
    let auth = ("authorization", bearer.as_str());

    let rebinding = post_to(app.addr, MOUNT, &[auth, ("host", "evil.example:80")], INIT).await;
    assert_eq!(
        rebinding.status,
        StatusCode::FORBIDDEN,
        "{}",
        rebinding.body
    );
    assert!(
        rebinding.body.contains("is not one this server answers to"),
        "{}",
        rebinding.body
    );
    let origin = post_to(
        app.addr,
        MOUNT,
        &[auth, ("origin", "https://evil.example")],
        INIT,
    )
    .await;
    assert_eq!(origin.status, StatusCode::FORBIDDEN, "{}", origin.body);
    let anonymous = post_to(app.addr, MOUNT, &[], INIT).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert!(anonymous
        .header("www-authenticate")
        .unwrap()
        .starts_with("Bearer"));
    let wrong = post_to(
        app.addr,
        MOUNT,
        &[("authorization", "Bearer token-cccccccccccccccc")],
        INIT,
    )
    .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    let big = call(3, &"x".repeat(2048));
    let oversized = post_to(app.addr, MOUNT, &[auth], &big).await;
    assert_eq!(
        oversized.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        oversized.body
    );

    // One session held, busy with its GET stream: a second is refused.
    let first = post_to(app.addr, MOUNT, &[auth], INIT).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let session = first.session();
    let stream_addr = app.addr;
    let (opened, wait) = oneshot::channel();
    let stream = tokio::spawn(async move {
        let stream = TcpStream::connect(stream_addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        let request = hyper::Request::builder()
            .method(Method::GET)
            .uri(MOUNT)
            .header("host", format!("127.0.0.1:{}", stream_addr.port()))
            .header("accept", "text/event-stream")
            .header("authorization", format!("Bearer {TOKEN_A}"))
            .header(SESSION_HEADER, session)
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        let _ = opened.send(response.status());
        // Held open until the test ends.
        let _body = response.into_body();
        std::future::pending::<()>().await;
    });
    assert_eq!(wait.await.unwrap(), StatusCode::OK);
    let second = post_to(app.addr, MOUNT, &[auth], INIT).await;
    assert_eq!(
        second.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        second.body
    );
    assert_eq!(probe.running.load(Ordering::SeqCst), 0);
    assert_eq!(
        app.service.stats_handle().stats().peak_calls_running,
        0,
        "no tool ran"
    );
    stream.abort();
    app.stop().await;
}

/// A mounted service on an address that is not loopback needs tokens, as the server's
/// own listener does; its limits are checked as [`HttpServer::bind`] checks them.
#[test]
fn a_mounted_service_on_a_public_address_needs_tokens() {
    let registries = || Registries::shared(Arc::new(Registry::new()));
    let public: SocketAddr = "192.0.2.1:8080".parse().unwrap();
    let err = McpService::new(stateful(), registries(), public).unwrap_err();
    assert!(matches!(err, HttpError::PublicWithoutAuth { .. }), "{err}");
    assert!(McpService::new(stateful().with_tokens(Some(tokens())), registries(), public).is_ok());
    let err = McpService::new(
        stateful().with_max_sessions(0),
        registries(),
        "127.0.0.1:1".parse().unwrap(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the session limit is 0, which would serve nothing; give at least 1"
    );
}
