//! OAuth access tokens over HTTP: the challenges of 401 and 403, the protected resource
//! metadata, static tokens beside them, and sessions bound to the principal (issuer and
//! subject) that opened them.

use super::*;
use crate::http::oauth::testkit::{claims, Issuers, Signer, ISSUER, OTHER_ISSUER};

const METADATA_URL: &str = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";

/// A stateful server taking ISSUER's and OTHER_ISSUER's tokens (each publishing `key`
/// as `k0`) beside the static tokens of alice and bob.
async fn oauth_server(key: &Signer) -> (Running, Arc<Issuers>) {
    let issuers = Arc::new(Issuers::default());
    issuers.publish(ISSUER, vec![key.jwk("k0")]);
    issuers.publish(OTHER_ISSUER, vec![key.jwk("k0")]);
    let mut config = stateful();
    config.tokens = Some(tokens());
    let config = config.with_oauth(Some(issuers.config()));
    (start(config, &Arc::default()).await, issuers)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test]
async fn refusals_carry_the_challenge_and_the_metadata_url() {
    let key = Signer::ec();
    let (server, _) = oauth_server(&key).await;
    let reply = post(server.addr, &[], INIT).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        reply.header("www-authenticate"),
        Some(
            format!(r#"Bearer realm="wasm-toolhost", resource_metadata="{METADATA_URL}""#).as_str()
        )
    );
    let mut expired = claims("svc");
    expired["exp"] = json!(1);
    for (token, message) in [
        (
            key.sign(json!({"kid": "k0"}), &expired),
            "Unauthorized: the bearer token is not valid: the token has expired (`exp`)",
        ),
        (
            "not-a-jwt-at-all-here".to_owned(),
            "Unauthorized: the bearer token is not valid: the token is not a JWT (InvalidToken)",
        ),
    ] {
        let reply = post(server.addr, &[("authorization", &bearer(&token))], INIT).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            reply.header("www-authenticate"),
            Some(format!(r#"Bearer realm="wasm-toolhost", resource_metadata="{METADATA_URL}", error="invalid_token""#).as_str())
        );
        assert_eq!(reply.json()["error"]["message"], message);
    }
    // Without the required scope: 403 naming it.
    let mut narrow = claims("svc");
    narrow["scope"] = json!("mcp:read");
    let token = key.sign(json!({"kid": "k0"}), &narrow);
    let reply = post(server.addr, &[("authorization", &bearer(&token))], INIT).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(
        reply.header("www-authenticate"),
        Some(format!(r#"Bearer error="insufficient_scope", scope="mcp:tools", resource_metadata="{METADATA_URL}""#).as_str())
    );
    assert_eq!(
        reply.json()["error"]["message"],
        "Forbidden: the bearer token does not grant the scope this server requires (mcp:tools); ask the authorization server for a token with it"
    );
    server.stop().await;
}

#[tokio::test]
async fn the_protected_resource_metadata_is_served() {
    let key = Signer::ec();
    let (server, _) = oauth_server(&key).await;
    let expected = json!({
        "resource": "https://mcp.example.com/mcp",
        "authorization_servers": [ISSUER, OTHER_ISSUER],
        "scopes_supported": ["mcp:tools"],
        "bearer_methods_supported": ["header"],
    });
    for path in [
        RESOURCE_METADATA_PATH,
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let reply = send_to(server.addr, path, Method::GET, &[], Full::new(Bytes::new())).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert_eq!(reply.header("content-type"), Some("application/json"));
        assert_eq!(reply.json(), expected, "{path}");
        let reply = send_to(
            server.addr,
            path,
            Method::POST,
            &[],
            Full::new(Bytes::new()),
        )
        .await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{path}");
    }
    let reply = send_to(
        server.addr,
        "/.well-known/oauth-protected-resource/other",
        Method::GET,
        &[],
        Full::new(Bytes::new()),
    )
    .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    server.stop().await;
    // Without OAuth there is no such document.
    let server = start(stateful(), &Arc::default()).await;
    let reply = send_to(
        server.addr,
        RESOURCE_METADATA_PATH,
        Method::GET,
        &[],
        Full::new(Bytes::new()),
    )
    .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    server.stop().await;
}

#[tokio::test]
async fn a_session_stays_with_the_principal_that_opened_it() {
    let key = Signer::ec();
    let (server, _) = oauth_server(&key).await;
    let token = |issuer: &str, sub: &str| {
        let mut claims = claims(sub);
        claims["iss"] = json!(issuer);
        bearer(&key.sign(json!({"kid": "k0"}), &claims))
    };
    let carol = token(ISSUER, "carol");
    let reply = post(server.addr, &[("authorization", &carol)], INIT).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let id = reply.session();
    // Another token of the same principal continues it.
    let again = token(ISSUER, "carol");
    let reply = post(
        server.addr,
        &[("authorization", &again), (SESSION_HEADER, &id)],
        LIST,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    // Another subject, the same subject from another issuer, and static tokens
    // (alice's, and an OAuth `sub` that cannot be a static name): 404.
    for other in [
        token(ISSUER, "dave"),
        token(OTHER_ISSUER, "carol"),
        bearer(TOKEN_A),
        bearer(TOKEN_B),
    ] {
        let reply = post(
            server.addr,
            &[("authorization", &other), (SESSION_HEADER, &id)],
            LIST,
        )
        .await;
        assert_eq!(
            reply.status,
            StatusCode::NOT_FOUND,
            "{other}: {}",
            reply.body
        );
    }
    // A static token's session is not an OAuth principal's either.
    let reply = post(server.addr, &[("authorization", &bearer(TOKEN_A))], INIT).await;
    assert_eq!(reply.status, StatusCode::OK);
    let alices = reply.session();
    let reply = post(
        server.addr,
        &[("authorization", &carol), (SESSION_HEADER, &alices)],
        LIST,
    )
    .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    // An OAuth token naming alice (a static token's client) is refused outright.
    let reply = post(
        server.addr,
        &[("authorization", &token(ISSUER, "alice"))],
        INIT,
    )
    .await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    server.stop().await;
}

#[tokio::test]
async fn keys_that_cannot_be_fetched_answer_503() {
    let key = Signer::ec();
    let issuers = Arc::new(Issuers::default());
    let config = stateful().with_oauth(Some(issuers.config()));
    let server = start(config, &Arc::default()).await;
    let token = key.sign(json!({"kid": "k0"}), &claims("svc"));
    let reply = post(server.addr, &[("authorization", &bearer(&token))], INIT).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.header("retry-after"), Some("30"));
    let message = reply.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.starts_with("Service Unavailable: the bearer token cannot be checked now: cannot get the signing keys of the OAuth issuer https://auth.example.com: "),
        "{message}"
    );
    server.stop().await;
}

#[tokio::test]
async fn the_session_is_built_for_the_subject_and_its_scopes() {
    let key = Signer::rsa();
    let issuers = Arc::new(Issuers::default());
    issuers.publish(ISSUER, vec![key.jwk("k0")]);
    let seen: Arc<std::sync::Mutex<Vec<SessionInfo>>> = Arc::default();
    let record = Arc::clone(&seen);
    let registries = Registries::per_session(Arc::new(move |info: &SessionInfo| {
        record.lock().unwrap().push(info.clone());
        Ok(Arc::new(Registry::new()))
    }));
    let mut config = stateful().with_oauth(Some(issuers.config()));
    config.tokens = Some(tokens());
    let server = HttpServer::bind("127.0.0.1:0".parse().unwrap(), config, registries)
        .await
        .unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    let mut wide = claims("svc-7");
    wide["scope"] = json!("mcp:tools files:write");
    let token = key.sign(json!({"kid": "k0"}), &wide);
    let reply = post(addr, &[("authorization", &bearer(&token))], INIT).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let id = reply.session();
    let reply = post(addr, &[("authorization", &bearer(TOKEN_B))], INIT).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let bobs = reply.session();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            SessionInfo {
                id: Some(id),
                client: Some("svc-7".into()),
                scopes: vec!["files:write".into(), "mcp:tools".into()],
                issuer: Some(ISSUER.into()),
            },
            SessionInfo {
                id: Some(bobs),
                client: Some("bob".into()),
                scopes: vec![],
                issuer: None,
            },
        ]
    );
    let _ = stop.send(());
    done.await.unwrap().unwrap();
}
