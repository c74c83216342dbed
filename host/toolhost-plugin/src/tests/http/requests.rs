//! Requests against the local server: what the grant and the operator allow, addresses
//! checked at connect time, redirects, limits, TLS and time-outs.

use super::*;

#[test]
fn a_manifest_asking_for_a_host_the_operator_does_not_allow_is_not_loaded() {
    let manifest = "[grants]\nhttp = [\"api.example.org\", \"http://127.0.0.1:8080\"]\n";
    let operator = Operator {
        allow: vec!["*.example.org"],
        ..Operator::default()
    };
    let (dir, loaded) = load("hostile_http", manifest, &operator);
    let err = loaded.expect_err("refused");
    let path = dir.path().join("hostile_http.toml");
    assert_eq!(
        err.to_string(),
        format!("{}: the manifest asks for HTTP access to http://127.0.0.1:8080, which the host does not allow; the plugin was not loaded. To allow it, start the host with `--plugin-http http://127.0.0.1:8080` (PluginHostConfig::http), or remove it from [grants] http", path.display())
    );
    assert_eq!(err.name(), "http_denied");
    // Deny by default: with no operator pattern, the first host is named.
    let (_dir, loaded) = load("hostile_http", manifest, &Operator::default());
    assert!(
        matches!(loaded.as_ref().map_err(PluginError::kind), Err(PluginErrorKind::HttpDenied { host }) if host == "api.example.org"),
        "{loaded:?}"
    );
    let (_dir, loaded) = load(
        "hostile_http",
        "[grants]\nhttp = [\"ftp://x.test\"]\n",
        &operator,
    );
    let err = loaded.expect_err("refused");
    assert!(matches!(err.kind(), PluginErrorKind::Manifest { .. }));
    assert!(
        err.to_string().contains("grants.http: \"ftp://x.test\" is not a host pattern: only the http and https schemes exist"),
        "{err}"
    );
}

#[tokio::test]
async fn without_a_grant_every_request_is_denied_before_anything_is_sent() {
    let server = Server::start();
    let operator = Operator {
        allow: vec!["http://127.0.0.1:1"],
        allow_nets: vec!["127.0.0.1"],
        ..Operator::default()
    };
    let (_dir, registry) = load("hostile_http", "", &operator);
    let registry = registry.unwrap();
    let message =
        failed_message(call(&registry, "send", json!({"url": server.url("/hello")})).await);
    assert_eq!(
        message,
        format!("the request to http://127.0.0.1:{} was refused: this tool may only reach the hosts its plugin was granted; use a URL on one of those hosts", server.port())
    );
    assert!(server.seen().is_empty(), "{:?}", server.seen());
}

#[tokio::test]
async fn a_granted_loopback_host_is_refused_unless_the_operator_allows_its_network() {
    let server = Server::start();
    let pattern = server.origin();
    let manifest = format!("[grants]\nhttp = [\"{pattern}\"]\n");

    let refused = Operator {
        allow: vec![pattern],
        ..Operator::default()
    };
    let (_dir, registry) = load("hostile_http", &manifest, &refused);
    let registry = registry.unwrap();
    let message =
        failed_message(call(&registry, "send", json!({"url": server.url("/hello")})).await);
    assert_eq!(
        message,
        format!("the request to {pattern} was refused: its address is on a private or local network, which this tool may not reach")
    );
    assert!(server.seen().is_empty());

    let allowed = Operator {
        allow: vec![pattern],
        allow_nets: vec!["127.0.0.1"],
        ..Operator::default()
    };
    let (_dir, registry) = load("hostile_http", &manifest, &allowed);
    let registry = registry.unwrap();
    let answer = call(&registry, "send", json!({"url": server.url("/hello")}))
        .await
        .unwrap();
    assert_eq!(
        answer,
        json!({"status": 200, "body_bytes": 5, "url": server.url("/hello")})
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("GET", "/hello")
    );
    assert_eq!(
        seen[0].headers["host"],
        format!("127.0.0.1:{}", server.port())
    );
    // Another port of the same address is outside the grant.
    let message =
        failed_message(call(&registry, "send", json!({"url": "http://127.0.0.1:1/"})).await);
    assert!(
        message
            .starts_with("the request to http://127.0.0.1:1 was refused: this tool may only reach"),
        "{message}"
    );
}

#[tokio::test]
async fn a_redirect_to_a_host_outside_the_grant_is_refused_without_a_lookup() {
    let server = Server::start();
    let pattern = server.origin();
    let operator = Operator {
        allow: vec![pattern, "http://denied.test"],
        allow_nets: vec!["127.0.0.1"],
        ..Operator::default()
    };
    let manifest = format!("[grants]\nhttp = [\"{pattern}\"]\n");
    let (_dir, registry) = load("hostile_http", &manifest, &operator);
    let registry = registry.unwrap();
    let url = server.url("/redirect?to=http://denied.test/steal");
    let message = failed_message(call(&registry, "send", json!({ "url": url })).await);
    assert_eq!(
        message,
        "the request to http://denied.test was refused: this tool may only reach the hosts its plugin was granted; use a URL on one of those hosts"
    );
    assert_eq!(server.seen().len(), 1, "only the first request was sent");
    assert!(
        operator.resolver.asked().is_empty(),
        "denied.test was never looked up"
    );
    // A redirect within the grant is followed.
    let url = server.url(&format!("/redirect?to={}", server.url("/hello")));
    let answer = call(&registry, "send", json!({ "url": url }))
        .await
        .unwrap();
    assert_eq!(answer["status"], 200);
    assert_eq!(answer["url"], server.url("/hello"));
}

#[tokio::test]
async fn a_name_resolving_to_a_private_address_is_refused_at_connect_time() {
    let server = Server::start();
    let pattern: &'static str =
        Box::leak(format!("http://internal.test:{}", server.port()).into_boxed_str());
    let manifest = format!("[grants]\nhttp = [\"{pattern}\"]\n");
    let url = format!("{pattern}/hello");

    let operator = Operator {
        allow: vec![pattern],
        resolver: FakeResolver::with("internal.test", "127.0.0.1"),
        ..Operator::default()
    };
    let (_dir, registry) = load("hostile_http", &manifest, &operator);
    let registry = registry.unwrap();
    let message = failed_message(call(&registry, "send", json!({ "url": url })).await);
    assert_eq!(
        message,
        format!("the request to {pattern} was refused: its address is on a private or local network, which this tool may not reach")
    );
    assert_eq!(operator.resolver.asked(), ["internal.test"]);
    assert!(server.seen().is_empty(), "nothing reached the server");

    // The operator allows the network: the connection goes to the address checked.
    let operator = Operator {
        allow: vec![pattern],
        allow_nets: vec!["127.0.0.0/8"],
        resolver: FakeResolver::with("internal.test", "127.0.0.1"),
        ..Operator::default()
    };
    let (_dir, registry) = load("hostile_http", &manifest, &operator);
    let registry = registry.unwrap();
    let answer = call(&registry, "send", json!({ "url": url }))
        .await
        .unwrap();
    assert_eq!(answer["status"], 200);
    assert_eq!(
        server.seen()[0].headers["host"],
        format!("internal.test:{}", server.port())
    );
}

#[tokio::test]
async fn requests_per_call_and_body_sizes_are_limited() {
    let server = Server::start();
    let pattern = server.origin();
    let operator = Operator {
        allow: vec![pattern],
        allow_nets: vec!["127.0.0.1"],
        ..Operator::default()
    };
    let manifest = format!(
        "[grants]\nhttp = [\"{pattern}\"]\n[limits]\nmax_http_requests = 3\nmax_http_request_bytes = 1024\nmax_http_response_bytes = 65536\n"
    );
    let (_dir, registry) = load("hostile_http", &manifest, &operator);
    let registry = registry.unwrap();

    let flood = call(
        &registry,
        "flood",
        json!({"url": server.url("/hello"), "count": 10}),
    )
    .await
    .unwrap();
    assert_eq!(
        flood,
        json!({"answered": 3, "errors": ["this tool call reached the host's limit of HTTP requests per call; ask for less at once (one page, one item)"]})
    );
    assert_eq!(server.seen().len(), 3);
    // The count is per call: the next call may send again.
    let again = call(
        &registry,
        "flood",
        json!({"url": server.url("/hello"), "count": 1}),
    )
    .await
    .unwrap();
    assert_eq!(again["answered"], 1);

    // A body too big to sit in the pipe (4 MB) is still being written when the host
    // refuses the request and closes it: the plugin must get the reason all the same,
    // not a broken pipe.
    for body_bytes in [4096, 4_000_000] {
        let message = failed_message(
            call(
                &registry,
                "send",
                json!({"url": server.url("/hello"), "method": "POST", "body_bytes": body_bytes}),
            )
            .await,
        );
        assert_eq!(
            message, "the request body is larger than the host allows (at most 1024 bytes)",
            "{body_bytes} bytes"
        );
    }
    let small = call(
        &registry,
        "send",
        json!({"url": server.url("/hello"), "method": "POST", "body_bytes": 1000}),
    )
    .await
    .unwrap();
    assert_eq!(small["status"], 200);
    assert_eq!(server.seen().last().unwrap().body_bytes, 1000);

    let message = failed_message(call(&registry, "send", json!({"url": server.url("/big")})).await);
    assert_eq!(
        message,
        "the response is larger than the host allows (at most 65536 bytes); ask for less (a smaller page, a narrower query)"
    );
    // Without a content-length the body is cut off where it passes the cap.
    let message =
        failed_message(call(&registry, "send", json!({"url": server.url("/stream")})).await);
    assert_eq!(
        message,
        format!("the request to {pattern} failed: reading the response body failed (the connection broke, or the body is larger than the host allows)")
    );
}

#[tokio::test]
async fn a_slow_server_is_cut_off_at_the_call_deadline() {
    let server = Server::start();
    let pattern = server.origin();
    let operator = Operator {
        allow: vec![pattern],
        allow_nets: vec!["127.0.0.1"],
        ..Operator::default()
    };
    let manifest = format!("[grants]\nhttp = [\"{pattern}\"]\n[limits]\ntimeout_ms = 1000\n");
    let (_dir, registry) = load("hostile_http", &manifest, &operator);
    let registry = registry.unwrap();
    let started = Instant::now();
    let result = call(&registry, "send", json!({"url": server.url("/slow")})).await;
    let elapsed = started.elapsed();
    assert!(
        matches!(result, Err(ToolError::TimedOut { limit, .. }) if limit == Duration::from_secs(1)),
        "{result:?}"
    );
    assert!(elapsed < Duration::from_secs(4), "took {elapsed:?}");
}
/// A self-signed certificate for `localhost.test` (made with openssl for this test; no
/// public root signs it).
const SELF_SIGNED_CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBpDCCAUqgAwIBAgIUILLPBVi9DyOjrwRoZZX/gD9zxscwCgYIKoZIzj0EAwIw
GTEXMBUGA1UEAwwObG9jYWxob3N0LnRlc3QwIBcNMjYxMjAzMDk0NzI4WhgPMjEy
NjExMDkwOTQ3MjhaMBkxFzAVBgNVBAMMDmxvY2FsaG9zdC50ZXN0MFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAEo/fY4lpGehZHxbrvnMuQ4jLfjFzvbwZFK6WcwEI5
cpKDvHdavatPQ6Sca688MSUSdpeNKENiKe6ySSfNydOBJqNuMGwwHQYDVR0OBBYE
FO63vV91o50PVuIDZYiQ2iY/5jm7MB8GA1UdIwQYMBaAFO63vV91o50PVuIDZYiQ
2iY/5jm7MA8GA1UdEwEB/wQFMAMBAf8wGQYDVR0RBBIwEIIObG9jYWxob3N0LnRl
c3QwCgYIKoZIzj0EAwIDSAAwRQIgY9GMRmfbyEeImqGzRfscj0F9LKKP5VTJojRW
Ve6eliYCIQClmACx1IzM/XjLnhBbmQtuFLi6qDXrL4ERtFWufA9Sgg==
-----END CERTIFICATE-----
";
const SELF_SIGNED_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgaCQvqboZlXaB1f91
N7gBn47NMPIL2A7zpykNiyBOcumhRANCAASj99jiWkZ6FkfFuu+cy5DiMt+MXO9v
BkUrpZzAQjlykoO8d1q9q09DpJxrrzwxJRJ2l40oQ2Ip7rJJJ83J04Em
-----END PRIVATE KEY-----
";

/// HTTPS is TLS with certificate checks: a server whose certificate no trusted root
/// signs is refused during the handshake, before any HTTP is sent.
#[tokio::test]
async fn https_refuses_a_certificate_no_trusted_root_signed() {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let certs = vec![CertificateDer::from_pem_slice(SELF_SIGNED_CERT.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(SELF_SIGNED_KEY.as_bytes()).unwrap();
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let handshakes: Arc<Mutex<Vec<bool>>> = Arc::default();
    let seen = Arc::clone(&handshakes);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let ok = acceptor.accept(stream).await.is_ok();
            seen.lock().unwrap().push(ok);
        }
    });

    let pattern: &'static str = Box::leak(format!("localhost.test:{port}").into_boxed_str());
    let operator = Operator {
        allow: vec![pattern],
        allow_nets: vec!["127.0.0.1"],
        resolver: FakeResolver::with("localhost.test", "127.0.0.1"),
        ..Operator::default()
    };
    let manifest = format!("[grants]\nhttp = [\"{pattern}\"]\n");
    let (_dir, registry) = load("hostile_http", &manifest, &operator);
    let registry = registry.unwrap();
    let message = failed_message(
        call(
            &registry,
            "send",
            json!({"url": format!("https://{pattern}/")}),
        )
        .await,
    );
    assert_eq!(
        message,
        format!("the request to https://{pattern} failed: its TLS certificate is not valid for that host")
    );
    // The server's side of the refused handshake may land just after the call returns.
    let deadline = Instant::now() + Duration::from_secs(5);
    while handshakes.lock().unwrap().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        *handshakes.lock().unwrap(),
        [false],
        "one handshake, refused"
    );
}

/// DNS rebinding: a name first resolves to an allowed address, then to a forbidden one
/// (127.0.0.2 here, standing for an internal service). Each request is looked up once
/// and the connection goes to the address that was checked, so the second answer is
/// refused and never reached, and an answer mixing both reaches only the allowed one.
#[tokio::test]
async fn dns_rebinding_cannot_reach_an_address_that_was_not_checked() {
    let public = Server::start();
    let port = public.port();
    let Ok(internal) = Server::bind(&format!("127.0.0.2:{port}")) else {
        panic!("cannot listen on 127.0.0.2:{port}; this test needs Linux's 127/8 loopback");
    };
    let pattern: &'static str = Box::leak(format!("http://rebind.test:{port}").into_boxed_str());
    let manifest = format!("[grants]\nhttp = [\"{pattern}\"]\n");
    let allowed: IpAddr = "127.0.0.1".parse().unwrap();
    let forbidden: IpAddr = "127.0.0.2".parse().unwrap();
    let resolver = Arc::new(Rebinding {
        answers: vec![vec![allowed], vec![forbidden], vec![forbidden, allowed]],
        asked: Mutex::new(0),
    });
    let operator = Operator {
        allow: vec![pattern],
        // Only 127.0.0.1 is opened; 127.0.0.2 stays a forbidden loopback address.
        allow_nets: vec!["127.0.0.1/32"],
        ..Operator::default()
    };
    let mut config = operator.config();
    config.http.resolver = Arc::<Rebinding>::clone(&resolver);
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(dir.path(), &["hostile_http"]).unwrap();
    std::fs::write(dir.path().join("hostile_http.toml"), manifest).unwrap();
    let registry = Registry::new();
    PluginHost::new(config)
        .unwrap()
        .load_file(&dir.path().join("hostile_http.wasm"), &registry)
        .unwrap();
    let url = format!("{pattern}/hello");

    let answer = call(&registry, "send", json!({ "url": url }))
        .await
        .unwrap();
    assert_eq!(answer["status"], 200);
    assert_eq!(*resolver.asked.lock().unwrap(), 1, "one lookup per request");
    assert_eq!(public.seen().len(), 1);

    let message = failed_message(call(&registry, "send", json!({ "url": url })).await);
    assert_eq!(
        message,
        format!("the request to {pattern} was refused: its address is on a private or local network, which this tool may not reach")
    );
    assert_eq!(*resolver.asked.lock().unwrap(), 2);

    let answer = call(&registry, "send", json!({ "url": url }))
        .await
        .unwrap();
    assert_eq!(answer["status"], 200);
    assert_eq!(*resolver.asked.lock().unwrap(), 3);
    assert_eq!(public.seen().len(), 2);
    assert!(
        internal.seen().is_empty(),
        "the rebound address was reached: {:?}",
        internal.seen()
    );
}

/// The connect limit (`http_connect_timeout_ms`, lowered to 300 ms here) bounds resolve,
/// connect and TLS handshake: a server that accepts the connection and never answers the
/// handshake is given up on after it, long before the call's deadline (10 s).
#[tokio::test]
async fn a_silent_server_is_given_up_on_at_the_connect_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    let keep = Arc::clone(&held);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            keep.lock().unwrap().push(stream); // accepted, never read or written
        }
    });
    let pattern: &'static str = Box::leak(format!("silent.test:{port}").into_boxed_str());
    let operator = Operator {
        allow: vec![pattern],
        allow_nets: vec!["127.0.0.1"],
        resolver: FakeResolver::with("silent.test", "127.0.0.1"),
        ..Operator::default()
    };
    let manifest = format!(
        "[grants]\nhttp = [\"{pattern}\"]\n[limits]\ntimeout_ms = 10000\nhttp_connect_timeout_ms = 300\n"
    );
    let (_dir, registry) = load("hostile_http", &manifest, &operator);
    let registry = registry.unwrap();
    let started = Instant::now();
    let message = failed_message(
        call(
            &registry,
            "send",
            json!({"url": format!("https://{pattern}/")}),
        )
        .await,
    );
    let elapsed = started.elapsed();
    assert_eq!(
        message,
        format!("the request to https://{pattern} timed out; the service may be slow or down, try again later or ask for less")
    );
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(5),
        "took {elapsed:?}"
    );
    assert_eq!(held.lock().unwrap().len(), 1, "one connection was made");
}
