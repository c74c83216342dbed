//! Token services and bodies that never end: a bearer token fetched and used, endless
//! and slow-drip token responses, endless error bodies, and the whole pull's deadline.

use super::*;

/// A registry that wants a bearer token from the token service at `token_service`
/// (`HOST:PORT`) for everything, and serves the plugin `bytes` to `Bearer t0k`.
fn token_protected(
    token_service: String,
    bytes: Vec<u8>,
) -> impl Fn(&Request) -> Reply + Send + Sync + 'static {
    let inner = registry(
        {
            let (d, n) = (digest(&bytes), bytes.len() as u64);
            move || Reply::json(200, &wasm_manifest(d.clone(), n))
        },
        move |_| Reply::bytes(&bytes),
    );
    move |request: &Request| {
        if request.header("authorization") != Some("Bearer t0k") {
            return Reply::Full {
                status: 401,
                headers: vec![(
                    "WWW-Authenticate".into(),
                    format!(r#"Bearer realm="http://{token_service}/token",service="fake""#),
                )],
                body: br#"{"errors":[{"code":"UNAUTHORIZED","message":"token needed"}]}"#.to_vec(),
            };
        }
        inner(request)
    }
}

/// Runs `pull` against `fake`, failing the test (instead of hanging it) after 30 s.
async fn bounded_pull(
    fake: &Fake,
    options: ClientOptions,
) -> (
    tempfile::TempDir,
    Result<toolhost_oci::Pulled, OciError>,
    Duration,
) {
    let started = Instant::now();
    let (dir, result) = tokio::time::timeout(Duration::from_secs(30), pull(fake, options))
        .await
        .expect("the pull was still running after 30 s");
    (dir, result, started.elapsed())
}

#[tokio::test]
async fn a_bearer_token_is_fetched_with_the_credentials_and_used() {
    let tokens = Fake::start(|_: &Request| Reply::status(200, r#"{"token":"t0k"}"#)).await;
    let bytes = component();
    let fake = Fake::start(token_protected(tokens.address.clone(), bytes.clone())).await;
    let with_credentials = options().with_credentials(Credentials::Basic {
        user: "ada".into(),
        password: "s3cret".into(),
    });
    let (_dir, result, _) = bounded_pull(&fake, with_credentials).await;
    assert_eq!(result.unwrap().component.digest, digest(&bytes));
    // One token, asked for this repository's pull scope, with the basic credentials.
    let asked = tokens.seen();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        asked[0].path,
        "/token?scope=repository%3Atools%2Fgreet%3Apull&service=fake"
    );
    assert_eq!(
        asked[0].header("authorization"),
        Some("Basic YWRhOnMzY3JldA==")
    );
    // The registry got the token on the manifest and the blob.
    for prefix in ["/v2/tools/greet/manifests/", "/v2/tools/greet/blobs/"] {
        let seen = fake.seen_at(prefix);
        assert!(!seen.is_empty(), "{prefix}");
        assert!(
            seen.iter()
                .all(|r| r.header("authorization") == Some("Bearer t0k")),
            "{seen:?}"
        );
    }
}

/// The token service's 401 names a token address that streams forever: the pull ends at
/// the token cap (64 KiB), quickly, having read a few MiB at most. (It read the whole
/// stream into memory, 2 GiB in 7 s, before the token exchange was capped.)
#[tokio::test]
async fn an_endless_token_response_stops_at_its_cap() {
    let tokens = Fake::start(|_: &Request| Reply::Endless {
        status: 200,
        headers: vec![("Content-Type".into(), "application/json".into())],
        chunk: vec![b' '; 64 * 1024],
        pause: Duration::ZERO,
        // Enough to tell a cap from none, little enough not to hurt when there is none.
        up_to: 256 << 20,
    })
    .await;
    let fake = Fake::start(token_protected(tokens.address.clone(), component())).await;
    let (dir, result, took) = bounded_pull(&fake, options()).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind(), "body_too_large", "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "the registry {} sent a token response longer than 64 KiB, the most this host reads for one; reading stopped there. No registry needs that much: it is misconfigured or hostile; do not pull from it, and tell its operator",
            fake.address
        )
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    let sent = tokens
        .endless_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(sent < 32 << 20, "{sent} bytes were sent");
    // Not retried (too large is not a hiccup), nothing fetched, nothing left.
    assert_eq!(tokens.seen().len(), 1);
    assert!(fake.seen_at("/v2/tools/greet/blobs/").is_empty());
    assert!(listing(dir.path()).is_empty());
}

/// A token response that drips a byte every 100 ms and never ends (each wait for data
/// is short, so the per-read time limit alone never fires): it ends at the body's
/// deadline (the timeout plus 64 KiB at 64 KiB/s), tried twice.
#[tokio::test]
async fn a_slow_drip_token_response_ends_at_its_deadline() {
    let tokens = Fake::start(|_: &Request| Reply::Endless {
        status: 200,
        headers: vec![],
        chunk: b" ".to_vec(),
        pause: Duration::from_millis(100),
        up_to: 1 << 20,
    })
    .await;
    let fake = Fake::start(token_protected(tokens.address.clone(), component())).await;
    let quick = options().with_timeout(Duration::from_millis(500));
    let (_dir, result, took) = bounded_pull(&fake, quick).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind(), "timed_out", "{err}");
    assert!(
        err.to_string().contains(&format!(
            "the registry {} did not answer within 1500ms while fetching the token response",
            fake.address
        )),
        "{err}"
    );
    assert!(took < Duration::from_secs(8), "{took:?}");
    assert_eq!(tokens.seen().len(), 2, "tried twice");
}

/// Error answers whose body never ends: the token service's 401, the manifest's 404,
/// the blob's 403. Each is cut (at 64 KiB) and the status is the error.
#[tokio::test]
async fn endless_error_bodies_are_cut_and_the_status_reported() {
    let endless_error = |status: u16| Reply::Endless {
        status,
        headers: vec![],
        chunk: br#"{"errors":[{"code":"X","message":"no"}]}"#.repeat(1000),
        pause: Duration::ZERO,
        up_to: 256 << 20,
    };
    // The token service refuses, endlessly.
    let tokens = Fake::start(move |_: &Request| endless_error(401)).await;
    let fake = Fake::start(token_protected(tokens.address.clone(), component())).await;
    let (_dir, result, took) = bounded_pull(&fake, options()).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind(), "unauthorized", "{err}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let sent = tokens
        .endless_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(sent < 32 << 20, "{sent} bytes were sent");

    // The manifest is not found, endlessly.
    let fake = Fake::start(registry(move || endless_error(404), |_| Reply::bytes(b""))).await;
    let (_dir, result, took) = bounded_pull(&fake, options()).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind(), "not_found", "{err}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let sent = fake
        .endless_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(sent < 32 << 20, "{sent} bytes were sent");

    // The blob is forbidden, endlessly.
    let bytes = component();
    let (d, n) = (digest(&bytes), bytes.len() as u64);
    let fake = Fake::start(registry(
        move || Reply::json(200, &wasm_manifest(d.clone(), n)),
        move |_| endless_error(403),
    ))
    .await;
    let (dir, result, took) = bounded_pull(&fake, options()).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind(), "forbidden", "{err}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let sent = fake
        .endless_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(sent < 32 << 20, "{sent} bytes were sent");
    assert!(listing(dir.path()).is_empty());
}

/// A manifest that drips a byte every 50 ms: its own deadline is long (the timeout plus
/// 4 MiB at 64 KiB/s, 65 s here), the whole pull's is 2 s, and that one ends it.
#[tokio::test]
async fn the_whole_pull_has_a_deadline() {
    let fake = Fake::start(registry(
        || Reply::Endless {
            status: 200,
            headers: vec![],
            chunk: b" ".to_vec(),
            pause: Duration::from_millis(50),
            up_to: 1 << 20,
        },
        |_| Reply::bytes(b""),
    ))
    .await;
    let short = options()
        .with_timeout(Duration::from_secs(1))
        .with_deadline(Duration::from_secs(2));
    let (_dir, result, took) = bounded_pull(&fake, short).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind(), "deadline_passed", "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "the pull from {} did not finish within 2s (the time limit of a whole pull or push); the registry is too slow or holds the connection open: try again later, or raise --registry-deadline",
            fake.address
        )
    );
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(5),
        "{took:?}"
    );
}
