//! Hostile registries: a fake registry on 127.0.0.1 serves wrong digests,
//! endless layers and manifests, redirects to another host, alternate layer URLs, core
//! modules, and never answers. Each pull must end with a clear error, in bounded time and
//! memory, with nothing left in the plugin directory (and a good one must still work).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test, with its location"
)]

mod fake;
mod signatures;
mod tokens;

use std::path::Path;
use std::time::{Duration, Instant};

use fake::{digest, manifest, Fake, Reply, Request};
use toolhost_oci::{ClientOptions, Credentials, OciError, OciReference, RegistryClient};

/// A component: the header, then some bytes.
fn component() -> Vec<u8> {
    let mut bytes = b"\0asm\x0d\0\x01\0".to_vec();
    bytes.extend((0..4000_u32).map(|i| (i % 251) as u8));
    bytes
}

const CONFIG: &[u8] = b"{}";

fn options() -> ClientOptions {
    ClientOptions::default().with_timeout(Duration::from_secs(5))
}

/// Serves `/v2/` (200), the config, and the given manifest and blob answers.
fn registry(
    manifest_reply: impl Fn() -> Reply + Send + Sync + 'static,
    blob_reply: impl Fn(&Request) -> Reply + Send + Sync + 'static,
) -> impl Fn(&Request) -> Reply + Send + Sync + 'static {
    move |request: &Request| {
        if request.path == "/v2/" {
            Reply::status(200, "{}")
        } else if request.path.contains("/manifests/") {
            manifest_reply()
        } else if request.path.ends_with(&digest(CONFIG)) {
            Reply::bytes(CONFIG)
        } else if request.path.contains("/blobs/") {
            blob_reply(request)
        } else {
            Reply::status(404, "{}")
        }
    }
}

/// The manifest of one application/wasm layer of `size` bytes and digest `digest`.
fn wasm_manifest(digest: String, size: u64) -> serde_json::Value {
    manifest(CONFIG, &[("application/wasm", digest, size, None)])
}

/// Resolves and downloads `oci://ADDRESS/tools/greet:1` into a new directory.
async fn pull(
    fake: &Fake,
    options: ClientOptions,
) -> (tempfile::TempDir, Result<toolhost_oci::Pulled, OciError>) {
    pull_reference(&format!("oci://{}/tools/greet:1", fake.address), options).await
}

async fn pull_reference(
    reference: &str,
    options: ClientOptions,
) -> (tempfile::TempDir, Result<toolhost_oci::Pulled, OciError>) {
    let dir = tempfile::tempdir().unwrap();
    let reference: OciReference = reference.parse().unwrap();
    let client = RegistryClient::new(&reference, options).unwrap();
    let result = match client.resolve().await {
        Ok(resolved) => client.download(&resolved, dir.path(), "greet").await,
        Err(err) => Err(err),
    };
    (dir, result)
}

/// The names in `dir`.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_good_artifact_downloads_verified() {
    let bytes = component();
    let (d, n) = (digest(&bytes), bytes.len() as u64);
    let served = bytes.clone();
    let fake = Fake::start(registry(
        move || Reply::json(200, &wasm_manifest(d.clone(), n)),
        move |_| Reply::bytes(&served),
    ))
    .await;
    let (dir, pulled) = pull(&fake, options()).await;
    let pulled = pulled.unwrap();
    assert_eq!(pulled.component.digest, digest(&bytes));
    assert_eq!(pulled.component.size, bytes.len() as u64);
    assert_eq!(std::fs::read(pulled.component.file.path()).unwrap(), bytes);
    assert!(pulled.manifest.is_none());
    drop(pulled);
    assert!(listing(dir.path()).is_empty(), "{:?}", listing(dir.path()));
}

#[tokio::test]
async fn a_blob_with_the_wrong_digest_is_discarded() {
    let bytes = component();
    let (d, n) = (digest(&bytes), bytes.len() as u64);
    let mut other = bytes.clone();
    other[100] ^= 1;
    let served = other.clone();
    let fake = Fake::start(registry(
        move || Reply::json(200, &wasm_manifest(d.clone(), n)),
        move |_| Reply::bytes(&served),
    ))
    .await;
    let (dir, result) = pull(&fake, options()).await;
    match result.unwrap_err() {
        OciError::DigestMismatch {
            what,
            expected,
            actual,
            ..
        } => {
            assert_eq!(what, "greet.wasm");
            assert_eq!(expected, digest(&bytes));
            assert_eq!(actual, digest(&other));
        }
        other => panic!("not DigestMismatch: {other}"),
    }
    assert!(listing(dir.path()).is_empty(), "{:?}", listing(dir.path()));
    // Not retried: a wrong digest is not a network hiccup.
    let blobs = fake.seen_at("/v2/tools/greet/blobs/");
    assert_eq!(blobs.len(), 1);
    assert_eq!(blobs[0].method, "GET");
}

#[tokio::test]
async fn an_endless_layer_stops_at_its_declared_size() {
    let fake = Fake::start(registry(
        || Reply::json(200, &wasm_manifest(digest(b"x"), 4096)),
        |_| Reply::endless(vec![7_u8; 64 * 1024]),
    ))
    .await;
    let started = Instant::now();
    let (dir, result) = pull(&fake, options()).await;
    let err = result.unwrap_err();
    assert!(
        matches!(
            err,
            OciError::TooLarge {
                size: 4096,
                limit: 4096,
                endless: true,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("reading stopped there"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // What the fake got out before the client hung up: socket buffers, not the stream.
    let sent = fake
        .endless_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(sent < 32 << 20, "{sent} bytes were sent");
    assert!(listing(dir.path()).is_empty(), "{:?}", listing(dir.path()));
}

#[tokio::test]
async fn a_layer_declared_over_the_limit_is_not_fetched() {
    let fake = Fake::start(registry(
        || Reply::json(200, &wasm_manifest(digest(b"x"), 65 << 20)),
        |_| Reply::bytes(b"never asked"),
    ))
    .await;
    let (dir, result) = pull(&fake, options()).await;
    let err = result.unwrap_err();
    assert!(
        matches!(
            err,
            OciError::TooLarge {
                size,
                limit,
                endless: false,
                ..
            } if size == 65 << 20 && limit == 64 << 20
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains(
            "the component is 65 MiB, over the limit of 64 MiB; raise --max-plugin-bytes"
        ),
        "{err}"
    );
    assert!(fake.seen_at("/v2/tools/greet/blobs/").is_empty());
    assert!(listing(dir.path()).is_empty());
    // A lower limit applies the same way.
    let small = options().with_max_component_bytes(1000);
    let bytes = component();
    let (d, n) = (digest(&bytes), bytes.len() as u64);
    let fake = Fake::start(registry(
        move || Reply::json(200, &wasm_manifest(d.clone(), n)),
        |_| Reply::bytes(b"never asked"),
    ))
    .await;
    let (_dir, result) = pull(&fake, small).await;
    assert!(matches!(
        result.unwrap_err(),
        OciError::TooLarge { limit: 1000, .. }
    ));
}

#[tokio::test]
async fn an_endless_manifest_stops_at_4_mib() {
    let fake = Fake::start(|request: &Request| {
        if request.path == "/v2/" {
            Reply::status(200, "{}")
        } else {
            Reply::endless(b"{\"schemaVersion\":2,".repeat(4096))
        }
    })
    .await;
    let (_dir, result) = pull(&fake, options()).await;
    let err = result.unwrap_err();
    assert!(
        matches!(&err, OciError::TooLarge { what, endless: true, limit, .. } if what == "OCI manifest" && *limit == 4 << 20),
        "{err}"
    );
    let sent = fake
        .endless_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(sent < 64 << 20, "{sent} bytes were sent");
}

/// A registry that asks for basic auth and redirects blob GETs to `target`.
fn redirecting(target: String, layer: (String, u64)) -> impl Fn(&Request) -> Reply + Send + Sync {
    move |request: &Request| {
        if request.header("authorization").is_none() {
            return Reply::Full {
                status: 401,
                headers: vec![("WWW-Authenticate".into(), "Basic realm=\"fake\"".into())],
                body: Vec::new(),
            };
        }
        if request.path == "/v2/" {
            Reply::status(200, "{}")
        } else if request.path.contains("/manifests/") {
            Reply::json(200, &wasm_manifest(layer.0.clone(), layer.1))
        } else {
            Reply::redirect(&format!("http://{target}/elsewhere{}", request.path))
        }
    }
}

#[tokio::test]
async fn a_redirect_to_another_host_gets_no_credentials_and_is_still_verified() {
    let bytes = component();
    let served = bytes.clone();
    let other = Fake::start(move |_: &Request| Reply::bytes(&served)).await;
    let fake = Fake::start(redirecting(
        other.address.clone(),
        (digest(&bytes), bytes.len() as u64),
    ))
    .await;
    let with_credentials = options().with_credentials(Credentials::Basic {
        user: "ada".into(),
        password: "s3cret".into(),
    });
    let (_dir, result) = pull(&fake, with_credentials.clone()).await;
    let pulled = result.unwrap();
    assert_eq!(pulled.component.digest, digest(&bytes));
    // The registry got the credentials; the other host never did.
    let blob_requests = fake.seen_at("/v2/tools/greet/blobs/");
    assert!(!blob_requests.is_empty());
    assert!(blob_requests.iter().all(|r| r
        .header("authorization")
        .is_some_and(|a| a.starts_with("Basic "))));
    let elsewhere = other.seen();
    assert_eq!(elsewhere.len(), 1, "{elsewhere:?}");
    assert_eq!(elsewhere[0].header("authorization"), None, "{elsewhere:?}");

    // The other host serving something else: refused by digest.
    let evil = Fake::start(|_: &Request| {
        let mut bytes = component();
        bytes[50] ^= 0xff;
        Reply::bytes(&bytes)
    })
    .await;
    let fake = Fake::start(redirecting(
        evil.address.clone(),
        (digest(&bytes), bytes.len() as u64),
    ))
    .await;
    let (dir, result) = pull(&fake, with_credentials).await;
    assert!(matches!(
        result.unwrap_err(),
        OciError::DigestMismatch { .. }
    ));
    assert!(listing(dir.path()).is_empty());
    assert_eq!(evil.seen()[0].header("authorization"), None);
}

#[tokio::test]
async fn alternate_layer_urls_are_never_fetched() {
    let elsewhere = Fake::start(|_: &Request| Reply::bytes(&component())).await;
    let bytes = component();
    let layer = (digest(&bytes), bytes.len() as u64);
    let url = format!("http://{}/internal/secret", elsewhere.address);
    let fake = Fake::start(registry(
        move || {
            Reply::json(
                200,
                &manifest(
                    CONFIG,
                    &[(
                        "application/wasm",
                        layer.0.clone(),
                        layer.1,
                        Some(vec![url.clone()]),
                    )],
                ),
            )
        },
        |_| {
            Reply::status(
                404,
                r#"{"errors":[{"code":"BLOB_UNKNOWN","message":"blob unknown to registry"}]}"#,
            )
        },
    ))
    .await;
    let (dir, result) = pull(&fake, options()).await;
    let err = result.unwrap_err();
    assert!(matches!(err, OciError::NotFound { .. }), "{err}");
    assert!(elsewhere.seen().is_empty(), "{:?}", elsewhere.seen());
    assert!(listing(dir.path()).is_empty());
}

#[tokio::test]
async fn a_registry_that_never_answers_times_out_after_one_retry() {
    let fake = Fake::start(|_: &Request| Reply::Hang).await;
    let started = Instant::now();
    let quick = options().with_timeout(Duration::from_millis(300));
    let (_dir, result) = pull(&fake, quick).await;
    let err = result.unwrap_err();
    assert!(matches!(err, OciError::TimedOut { .. }), "{err}");
    assert!(
        err.to_string().contains("raise --registry-timeout"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(fake.seen().len(), 2, "{:?}", fake.seen());
}

#[tokio::test]
async fn nobody_listening_is_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let (_dir, result) = pull_reference(&format!("oci://{address}/tools/greet:1"), options()).await;
    let err = result.unwrap_err();
    assert!(matches!(err, OciError::Unreachable { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("cannot reach the registry {address}")),
        "{err}"
    );
    assert!(err.to_string().contains("is it running"), "{err}");
}

#[tokio::test]
async fn status_codes_say_which_and_what_to_do() {
    for (status, kind, words) in [
        (401, "unauthorized", "log in with `docker login`"),
        (
            403,
            "forbidden",
            "(403 Forbidden) (denied here); these credentials may not pull from it",
        ),
        (404, "not_found", "was not found in the registry"),
        (500, "status", "answered 500"),
    ] {
        let body = match status {
            403 => r#"{"errors":[{"code":"DENIED","message":"denied here"}]}"#,
            _ => "{}",
        };
        let fake = Fake::start(registry(
            move || Reply::status(status, body),
            |_| Reply::bytes(b""),
        ))
        .await;
        let (_dir, result) = pull(&fake, options()).await;
        let err = result.unwrap_err();
        assert_eq!(err.kind(), kind, "{status}: {err}");
        assert!(err.to_string().contains(words), "{status}: {err}");
        let tries = fake.seen_at("/v2/tools/greet/manifests/").len();
        assert_eq!(tries, if status == 500 { 2 } else { 1 }, "{status}");
    }
}

#[tokio::test]
async fn a_manifest_that_does_not_match_its_digest_is_refused() {
    let bytes = component();
    let body = wasm_manifest(digest(&bytes), bytes.len() as u64);
    let text = serde_json::to_vec(&body).unwrap();
    let asked = digest(b"another manifest");
    let served = body.clone();
    let fake = Fake::start(registry(
        move || Reply::json(200, &served),
        |_| Reply::bytes(b""),
    ))
    .await;
    let (_dir, result) = pull_reference(
        &format!("oci://{}/tools/greet@{asked}", fake.address),
        options(),
    )
    .await;
    match result.unwrap_err() {
        OciError::DigestMismatch {
            what,
            expected,
            actual,
            ..
        } => {
            assert_eq!((what.as_str(), expected), ("manifest", asked));
            assert_eq!(actual, digest(&text));
        }
        other => panic!("not DigestMismatch: {other}"),
    }
    // A Docker-Content-Digest header that does not match the body.
    let fake = Fake::start(registry(
        move || Reply::Full {
            status: 200,
            headers: vec![("Docker-Content-Digest".into(), digest(b"other"))],
            body: serde_json::to_vec(&body).unwrap(),
        },
        |_| Reply::bytes(b""),
    ))
    .await;
    let (_dir, result) = pull(&fake, options()).await;
    let err = result.unwrap_err();
    assert!(
        err.to_string()
            .contains("a manifest (against its Docker-Content-Digest header)"),
        "{err}"
    );
}

#[tokio::test]
async fn a_core_module_is_refused_after_download_and_nothing_is_left() {
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    module.extend([0_u8; 100]);
    let (d, n) = (digest(&module), module.len() as u64);
    let fake = Fake::start(registry(
        move || Reply::json(200, &wasm_manifest(d.clone(), n)),
        move |_| Reply::bytes(&module),
    ))
    .await;
    let (dir, result) = pull(&fake, options()).await;
    let err = result.unwrap_err();
    assert!(matches!(err, OciError::NotAComponent { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("is a core WebAssembly module, not a component; plugins are components: build for wasm32-wasip2"),
        "{err}"
    );
    assert!(listing(dir.path()).is_empty(), "{:?}", listing(dir.path()));
}

#[tokio::test]
async fn a_container_image_is_not_a_plugin() {
    let fake = Fake::start(registry(
        || {
            Reply::json(
                200,
                &manifest(
                    CONFIG,
                    &[(
                        "application/vnd.oci.image.layer.v1.tar+gzip",
                        digest(b"layer"),
                        5,
                        None,
                    )],
                ),
            )
        },
        |_| Reply::bytes(b"layer"),
    ))
    .await;
    let (_dir, result) = pull(&fake, options()).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind(), "not_a_plugin");
    assert!(
        err.to_string()
            .contains("it has no application/wasm layer (its layers: application/vnd.oci.image.layer.v1.tar+gzip)"),
        "{err}"
    );
    assert!(fake.seen_at("/v2/tools/greet/blobs/").is_empty());
    // An index with no wasm entry either.
    let fake = Fake::start(registry(
        || {
            Reply::json(
                200,
                &serde_json::json!({
                    "schemaVersion": 2,
                    "mediaType": "application/vnd.oci.image.index.v1+json",
                    "manifests": [
                        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest(b"a"), "size": 1, "platform": {"architecture": "amd64", "os": "linux"}},
                        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest(b"b"), "size": 1, "platform": {"architecture": "arm64", "os": "linux"}}
                    ]
                }),
            )
        },
        |_| Reply::bytes(b""),
    ))
    .await;
    let (_dir, result) = pull(&fake, options()).await;
    let err = result.unwrap_err().to_string();
    assert!(err.contains("none for architecture wasm"), "{err}");
}

#[tokio::test]
async fn a_blob_shorter_than_declared_is_refused() {
    let bytes = component();
    let (d, n) = (digest(&bytes), bytes.len() as u64 + 10);
    let served = bytes.clone();
    let fake = Fake::start(registry(
        move || Reply::json(200, &wasm_manifest(d.clone(), n)),
        move |_| Reply::bytes(&served),
    ))
    .await;
    let (dir, result) = pull(&fake, options()).await;
    let err = result.unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "it ended after {} of its {} bytes",
            bytes.len(),
            bytes.len() + 10
        )),
        "{err}"
    );
    assert!(listing(dir.path()).is_empty());
}

#[test]
fn https_unless_loopback_or_named_insecure() {
    let client = |text: &str, insecure: &[&str]| {
        let reference: OciReference = text.parse().unwrap();
        RegistryClient::new(
            &reference,
            ClientOptions::default()
                .with_insecure_registries(insecure.iter().map(|s| s.to_string()).collect()),
        )
        .unwrap()
        .is_insecure()
    };
    assert!(!client("oci://ghcr.io/a/b:1", &[]));
    assert!(!client(
        "oci://reg.lan:5000/a/b:1",
        &["reg.lan:5001", "other.lan"]
    ));
    assert!(client("oci://reg.lan:5000/a/b:1", &["reg.lan:5000"]));
    assert!(client("oci://reg.lan:5000/a/b:1", &["reg.lan"]));
    assert!(client("oci://127.0.0.1:5000/a/b:1", &[]));
    assert!(client("oci://localhost:5000/a/b:1", &[]));
    assert!(client("oci://[::1]:5000/a/b:1", &[]));
    // A name that merely starts like loopback is not loopback.
    assert!(!client("oci://127.0.0.1.example.com/a/b:1", &[]));
}
