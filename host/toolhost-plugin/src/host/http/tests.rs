//! Tests of the HTTP hooks: checks before sending, request counts and body caps,
//! forbidden addresses.

use super::*;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use wasmtime_wasi_http::{Error, WasiBody, WasiHttpHooks};

use super::transport::Capped;
use crate::host::quota::PluginMeter;
use crate::http_policy::{HttpLimits, HttpPolicy};
use http_body_util::{Empty, Full};

fn hooks(allow: &[&str], limits: HttpLimits) -> HttpHooks {
    let grant = HttpGrant {
        allow: allow.iter().map(|p| p.parse().unwrap()).collect(),
        policy: HttpPolicy::default(),
        limits,
    };
    let meter = Arc::new(PluginMeter::new(
        Arc::from("p"),
        crate::limits::ImportLimits::default(),
    ));
    let mut hooks = HttpHooks::new(Arc::from("p"), Arc::new(grant), meter, Arc::default());
    hooks.begin_call("t", Instant::now() + Duration::from_secs(5), None, None);
    hooks
}

fn request(uri: &str, length: Option<u64>) -> http::Request<WasiBody> {
    let mut builder = http::Request::builder().uri(uri);
    if let Some(length) = length {
        builder = builder.header(http::header::CONTENT_LENGTH, length);
    }
    builder
        .body(
            Empty::<Bytes>::new()
                .map_err(|never| match never {})
                .boxed_unsync(),
        )
        .unwrap()
}

fn checked(hooks: &mut HttpHooks, uri: &str, length: Option<u64>) -> Result<String, String> {
    hooks
        .check(&request(uri, length))
        .map(|target| target.to_string())
        .map_err(|err| format!("{err:?}"))
}

#[test]
fn requests_are_checked_against_the_grant_before_anything_is_sent() {
    let mut hooks = hooks(
        &["api.test", "http://*.local.test:8080"],
        HttpLimits::default(),
    );
    assert_eq!(
        checked(&mut hooks, "https://api.test/x?y", None),
        Ok("https://api.test:443".into())
    );
    assert_eq!(
        checked(&mut hooks, "http://a.local.test:8080/", None),
        Ok("http://a.local.test:8080".into())
    );
    for denied in [
        "http://api.test/",
        "https://api.test:8443/",
        "https://evil.test/",
        "https://api.test.evil.test/",
        "http://local.test:8080/",
    ] {
        assert_eq!(
            checked(&mut hooks, denied, None),
            Err("HttpRequestDenied".into()),
            "{denied}"
        );
    }
    assert_eq!(
        checked(&mut hooks, "https://user:pw@api.test/", None),
        Err("HttpRequestUriInvalid".into())
    );
    assert_eq!(
        checked(&mut hooks, "/relative", None),
        Err("HttpRequestUriInvalid".into())
    );
}

#[test]
fn the_request_count_and_declared_body_size_are_limited() {
    let limits = HttpLimits {
        max_requests: 2,
        max_request_bytes: 100,
        ..HttpLimits::default()
    };
    let mut hooks = hooks(&["api.test"], limits);
    assert!(checked(&mut hooks, "https://api.test/", Some(100)).is_ok());
    assert_eq!(
        checked(&mut hooks, "https://api.test/", Some(101)),
        Err("HttpRequestBodySize(Some(100))".into())
    );
    assert_eq!(
        checked(&mut hooks, "https://api.test/", None),
        Err("ConnectionLimitReached".into())
    );
    // Denied requests count too, so a loop of them stops early.
    hooks.begin_call("t", Instant::now() + Duration::from_secs(5), None, None);
    assert!(checked(&mut hooks, "https://evil.test/", None).is_err());
    assert!(checked(&mut hooks, "https://api.test/", None).is_ok());
    assert_eq!(
        checked(&mut hooks, "https://api.test/", None),
        Err("ConnectionLimitReached".into())
    );
}

#[tokio::test]
async fn forbidden_addresses_are_refused_before_connecting() {
    let mut hooks = hooks(
        &["http://169.254.169.254", "http://[::1]:9"],
        HttpLimits::default(),
    );
    for uri in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:9/",
    ] {
        let future = hooks.send_request(request(uri, None), None, Box::new(async { Ok(()) }));
        let result = Pin::from(future).await;
        assert!(
            matches!(result, Err(Error::DestinationIpProhibited)),
            "{uri}: {:?}",
            result.err()
        );
    }
}

#[tokio::test]
async fn a_capped_body_fails_past_its_limit_and_says_so() {
    let over = Arc::new(AtomicBool::new(false));
    let body = Capped {
        inner: Full::new(Bytes::from(vec![0u8; 11])).map_err(|never| match never {}),
        seen: 0,
        limit: 10,
        over: Arc::clone(&over),
        response: true,
        counted: None,
    };
    let err = body.collect().await.expect_err("over the cap");
    assert!(
        matches!(err, Error::HttpResponseBodySize(Some(10))),
        "{err:?}"
    );
    assert!(over.load(Ordering::Relaxed));
    let body = Capped {
        inner: Full::new(Bytes::from(vec![0u8; 10])).map_err(|never| match never {}),
        seen: 0,
        limit: 10,
        over: Arc::new(AtomicBool::new(false)),
        response: false,
        counted: None,
    };
    assert_eq!(body.collect().await.ok().unwrap().to_bytes().len(), 10);
}

/// Collects what an [`HttpObserver`](crate::http_policy::HttpObserver) is told.
#[derive(Default)]
struct Seen(std::sync::Mutex<Vec<(String, crate::http_policy::HttpOutcome)>>);

impl crate::http_policy::HttpObserver for Seen {
    fn request(&self, plugin: &str, outcome: crate::http_policy::HttpOutcome) {
        self.0.lock().unwrap().push((plugin.to_owned(), outcome));
    }
}

/// A loopback server that reads one request's head and answers it with `response`: its
/// port, and the task to await once the request was sent.
async fn answer_once(response: &'static [u8]) -> (u16, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        stream.write_all(response).await.unwrap();
    });
    (port, server)
}

#[tokio::test]
async fn the_observer_is_told_each_request_and_how_it_ended() {
    use crate::http_policy::HttpOutcome;
    let (port, server) =
        answer_once(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await;
    let seen = Arc::new(Seen::default());
    let grant = HttpGrant {
        allow: vec![format!("http://127.0.0.1:{port}").parse().unwrap()],
        policy: HttpPolicy::default()
            .with_allow_nets(vec!["127.0.0.0/8".parse().unwrap()])
            .with_observer(Arc::clone(&seen) as Arc<dyn crate::http_policy::HttpObserver>),
        limits: HttpLimits::default(),
    };
    let meter = Arc::new(PluginMeter::new(
        Arc::from("fetcher"),
        crate::limits::ImportLimits::default(),
    ));
    let mut hooks = HttpHooks::new(Arc::from("fetcher"), Arc::new(grant), meter, Arc::default());
    hooks.begin_call("t", Instant::now() + Duration::from_secs(5), None, None);
    let uri = format!("http://127.0.0.1:{port}/missing");
    let answered =
        Pin::from(hooks.send_request(request(&uri, None), None, Box::new(async { Ok(()) }))).await;
    assert_eq!(answered.ok().unwrap().0.status(), 404);
    server.await.unwrap();
    // Outside the grant: refused before anything is sent.
    let refused = Pin::from(hooks.send_request(
        request("http://127.0.0.2:9/", None),
        None,
        Box::new(async { Ok(()) }),
    ))
    .await;
    assert!(refused.is_err());
    // In the grant, but nothing listens there any more: no answer.
    let failed =
        Pin::from(hooks.send_request(request(&uri, None), None, Box::new(async { Ok(()) }))).await;
    assert!(failed.is_err());
    assert_eq!(
        *seen.0.lock().unwrap(),
        [
            ("fetcher".to_owned(), HttpOutcome::Status(404)),
            ("fetcher".to_owned(), HttpOutcome::Refused),
            ("fetcher".to_owned(), HttpOutcome::Failed),
        ]
    );
}

/// A request of a traced or audited call is recorded with its method, host, port,
/// status and response bytes, and a URL without its query or fragment and with the
/// plugin's secrets redacted from its path; a request refused by the grant reached no
/// host and is not recorded; one that got no answer is, without a status.
#[tokio::test]
async fn a_recorded_request_keeps_no_query_and_no_secret() {
    use toolhost::registry::{CallRecord, StepKind};
    let (port, server) =
        answer_once(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
            .await;
    let grant = HttpGrant {
        allow: vec![format!("http://127.0.0.1:{port}").parse().unwrap()],
        policy: HttpPolicy::default().with_allow_nets(vec!["127.0.0.0/8".parse().unwrap()]),
        limits: HttpLimits::default(),
    };
    let meter = Arc::new(PluginMeter::new(
        Arc::from("fetcher"),
        crate::limits::ImportLimits::default(),
    ));
    // Secrets in the path, and (as a plugin with a wildcard grant could put one in a
    // subdomain) in the host name: here the loopback address's first three bytes.
    let redactor = Arc::new(crate::plugin_config::Redactor::new([
        "k3y-s3cret".to_owned(),
        "127.0.0".to_owned(),
    ]));
    let mut hooks = HttpHooks::new(Arc::from("fetcher"), Arc::new(grant), meter, redactor);
    let record = Arc::new(CallRecord::new());
    hooks.begin_call(
        "t",
        Instant::now() + Duration::from_secs(5),
        None,
        Some(Arc::clone(&record)),
    );
    let uri = format!("http://127.0.0.1:{port}/v1/k3y-s3cret/items?token=abc123&q=1#frag");
    let answered =
        Pin::from(hooks.send_request(request(&uri, None), None, Box::new(async { Ok(()) }))).await;
    let (response, _io) = answered.ok().unwrap();
    assert_eq!(
        response
            .into_body()
            .collect()
            .await
            .ok()
            .unwrap()
            .to_bytes(),
        "hello"
    );
    server.await.unwrap();
    let refused = Pin::from(hooks.send_request(
        request("http://127.0.0.2:9/", None),
        None,
        Box::new(async { Ok(()) }),
    ))
    .await;
    assert!(refused.is_err());
    let failed = Pin::from(hooks.send_request(
        request(&format!("http://127.0.0.1:{port}/again?x=1"), None),
        None,
        Box::new(async { Ok(()) }),
    ))
    .await;
    assert!(failed.is_err());
    hooks.end_call();

    let touched = record.touched();
    assert_eq!(touched.hosts, [format!("[REDACTED].1:{port}")]);
    let steps: Vec<_> = touched
        .steps
        .iter()
        .map(|s| (s.kind.clone(), s.failed))
        .collect();
    assert_eq!(
        steps,
        [
            (
                StepKind::Http {
                    method: "GET".to_owned(),
                    host: "[REDACTED].1".to_owned(),
                    port,
                    url: format!("http://[REDACTED].1:{port}/v1/[REDACTED]/items"),
                    status: Some(200),
                    bytes: 5,
                    span_id: None,
                },
                false
            ),
            (
                StepKind::Http {
                    method: "GET".to_owned(),
                    host: "[REDACTED].1".to_owned(),
                    port,
                    url: format!("http://[REDACTED].1:{port}/again"),
                    status: None,
                    bytes: 0,
                    span_id: None,
                },
                true
            ),
        ]
    );
    assert!(touched.steps[0].start <= touched.steps[0].end);
}
