//! The Redis backend against hostile servers (never answering, answering garbage, a
//! huge answer, stopping mid-operation): bounded time, clear errors; and against a real
//! server (`TOOLHOST_TEST_REDIS`, ignored otherwise: scripts/state-check runs them) the
//! cases every backend must pass.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::state::tests::{exercise, exercise_counter, inside_one_minute, record};
use crate::state::{now_ms, Counted, QuotaCounter, TaskBackend, TaskStatus};

/// A server on 127.0.0.1 handing each connection it accepts to `answer`, each in its
/// own task; bounded: it stops with the test.
pub(super) async fn serve<F, Fut>(answer: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(answer(socket));
        }
    });
    addr
}

/// Answers each read of `socket` with the next of `answers` (nothing once they run
/// out), until the client goes.
async fn answer_reads<A: AsRef<[u8]>>(mut socket: TcpStream, mut answers: impl Iterator<Item = A>) {
    let mut buf = [0u8; 4096];
    loop {
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if let Some(answer) = answers.next() {
                    if socket.write_all(answer.as_ref()).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// A server on 127.0.0.1 answering each connection with `answer` (after reading
/// what it is sent), or never when `None`; bounded: it stops with the test.
async fn hostile(answer: Option<Vec<u8>>) -> SocketAddr {
    serve(move |socket| answer_reads(socket, answer.clone().into_iter().cycle())).await
}

async fn connect(addr: SocketAddr) -> (Result<RedisBackend, StateError>, Duration) {
    let url = StateUrl::parse(&format!("redis://{addr}/0")).unwrap();
    let start = std::time::Instant::now();
    let backend =
        RedisBackend::connect_with_timeout(&url, None, None, 64, Duration::from_millis(500)).await;
    (backend, start.elapsed())
}

#[tokio::test]
async fn a_server_that_never_answers_fails_within_the_time_limit() {
    let (backend, took) = connect(hostile(None).await).await;
    assert!(
        matches!(backend, Err(StateError::Timeout(limit)) if limit == Duration::from_millis(500)),
        "{backend:?}"
    );
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn a_server_answering_garbage_is_refused_clearly() {
    let (backend, took) =
        connect(hostile(Some(b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec())).await).await;
    let err = backend.unwrap_err();
    assert!(
        matches!(&err, StateError::Garbage(why) if why.contains("Parse error")),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("the task state server answered something unexpected (")
            && err
                .to_string()
                .ends_with("is --state pointing at a Redis server?"),
        "{err}"
    );
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn a_server_announcing_a_huge_answer_fails_within_the_time_limit() {
    // A bulk string of 1 GB announced, never sent: refused at its header, at once.
    let (backend, took) = connect(hostile(Some(b"$1000000000\r\nxx".to_vec())).await).await;
    let err = backend.unwrap_err();
    assert!(
        matches!(&err, StateError::Garbage(why) if why.contains("a reply announces 1000000000 bytes, more than the 2097216 allowed")),
        "{err:?}"
    );
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

/// A server answering every read with `head`, then `filler` again and again, as
/// fast as the client takes it; its count of the bytes it got out is returned.
async fn streaming(
    head: &'static [u8],
    filler: &'static [u8],
) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = std::sync::Arc::clone(&sent);
    let addr = serve(move |mut socket| {
        let counted = std::sync::Arc::clone(&counted);
        async move {
            let mut buf = [0u8; 4096];
            if !matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {
                return;
            }
            if socket.write_all(head).await.is_err() {
                return;
            }
            // At most 1 GiB: the test ends long before.
            for _ in 0..(1u64 << 30) / filler.len() as u64 {
                if socket.write_all(filler).await.is_err() {
                    return;
                }
                counted.fetch_add(filler.len() as u64, std::sync::atomic::Ordering::SeqCst);
            }
        }
    })
    .await;
    (addr, sent)
}

#[tokio::test]
async fn a_huge_answer_streamed_is_cut_at_the_memory_bound_not_the_time_limit() {
    static FILLER: [u8; 64 * 1024] = [b'x'; 64 * 1024];
    // A 1 GiB bulk string's header is refused at once; a line that never ends, and
    // an array of bulk strings each small, are cut once past the bound (64 B of
    // result + 2 MiB), long before the time limit, having read a few MiB at most.
    const BULKS: &[u8] = b"$60\r\n012345678901234567890123456789012345678901234567890123456789\r\n";
    let cases: [(&'static [u8], &'static [u8]); 2] = [(b"+", &FILLER), (b"*60000\r\n", BULKS)];
    for (head, filler) in cases {
        let (addr, sent) = streaming(head, filler).await;
        let url = StateUrl::parse(&format!("redis://{addr}/0")).unwrap();
        let started = std::time::Instant::now();
        let backend =
            RedisBackend::connect_with_timeout(&url, None, None, 64, Duration::from_secs(10)).await;
        let took = started.elapsed();
        let err = backend.unwrap_err();
        assert!(
            matches!(&err, StateError::Garbage(why) if why.contains("a reply is larger than the 2097216 bytes allowed")),
            "{err:?}"
        );
        assert!(
            took < Duration::from_secs(5),
            "took {took:?}: cut by time, not size"
        );
        let sent = sent.load(std::sync::atomic::Ordering::SeqCst);
        assert!(sent < 32 << 20, "{sent} bytes sent before the cut");
    }
}

#[tokio::test]
async fn a_huge_wrong_answer_is_refused_without_echoing_it() {
    // One MiB where PONG belongs: refused, the error short (not the answer again).
    // Three per read: the client's set-up sends two commands at once before PING.
    let mut one = b"+".to_vec();
    one.extend(std::iter::repeat_n(b'A', 1 << 20));
    one.extend(b"\r\n");
    let (backend, _) = connect(hostile(Some(one.repeat(3))).await).await;
    let err = backend.unwrap_err();
    assert!(matches!(err, StateError::Garbage(_)), "{err:?}");
    let message = err.to_string();
    assert!(
        message.len() < 400,
        "{} bytes: {}",
        message.len(),
        &message[..200]
    );
    assert!(message.contains("PING answered \"AAAA"), "{message}");
}

/// A server that answers its first reads as `script` says (one entry per read; the
/// client's set-up sends two commands at once, then PING), then nothing.
async fn scripted(script: Vec<&'static [u8]>) -> SocketAddr {
    serve(move |socket| answer_reads(socket, script.clone().into_iter())).await
}

const SET_UP: &[u8] = b"+OK\r\n+OK\r\n";

#[tokio::test]
async fn a_server_that_stops_answering_mid_operation_fails_within_the_time_limit() {
    let addr = scripted(vec![SET_UP, b"+PONG\r\n"]).await;
    let (backend, _) = connect(addr).await;
    let backend = backend.unwrap();
    let started = std::time::Instant::now();
    let got = backend.get("alice", "some-task").await;
    assert!(
        matches!(got, Err(StateError::Timeout(limit)) if limit == Duration::from_millis(500)),
        "{got:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_record_that_is_not_a_task_is_refused() {
    // The GET script's answer: fields without a status.
    let addr = scripted(vec![
        SET_UP,
        b"+PONG\r\n",
        b"*2\r\n$5\r\nowner\r\n$5\r\nalice\r\n",
    ])
    .await;
    let (backend, _) = connect(addr).await;
    let got = backend.unwrap().get("alice", "some-task").await;
    assert!(
        matches!(&got, Err(StateError::Garbage(why)) if why == "task some-task: no status"),
        "{got:?}"
    );
}

#[tokio::test]
async fn nothing_listening_is_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let (backend, _) = connect(addr).await;
    let err = backend.unwrap_err();
    assert!(matches!(err, StateError::Unreachable(_)), "{err:?}");
    assert!(err.to_string().contains("unreachable"), "{err}");
}

#[test]
fn state_urls_carry_no_password() {
    assert_eq!(
        StateUrl::parse("redis://:hunter2@127.0.0.1:6379/0"),
        Err(StateUrlError::PasswordInUrl)
    );
    assert_eq!(
        StateUrl::parse("rediss://user:hunter2@127.0.0.1:6379/0"),
        Err(StateUrlError::PasswordInUrl)
    );
    let refused = StateUrl::parse("redis://:hunter2@127.0.0.1/0").unwrap_err();
    assert!(!refused.to_string().contains("hunter2"), "{refused}");
    assert!(
        refused.to_string().contains("--state-password-file"),
        "{refused}"
    );
    assert_eq!(
        StateUrl::parse("http://127.0.0.1:6379/0"),
        Err(StateUrlError::NotRedis("http://127.0.0.1:6379/0".into()))
    );
    assert!(matches!(
        StateUrl::parse("redis+unix:///tmp/redis.sock"),
        Err(StateUrlError::NotRedis(_))
    ));
    assert!(StateUrl::parse("redis://127.0.0.1:6379/2").is_ok());
    assert!(StateUrl::parse("rediss://user@cache.internal:6380/0").is_ok());
}

#[tokio::test]
async fn a_quota_count_answered_with_garbage_is_refused() {
    // Where the count script answers -1 or the ms left in the window: a bulk string,
    // then a number past the window.
    for answer in [&b"$2\r\nok\r\n"[..], b":999999999\r\n"] {
        let addr = scripted(vec![SET_UP, b"+PONG\r\n", answer]).await;
        let (backend, _) = connect(addr).await;
        let got = backend
            .unwrap()
            .count("k", 1, 3, Duration::from_secs(60))
            .await;
        assert!(matches!(got, Err(StateError::Garbage(_))), "{got:?}");
    }
}

/// The real server of `TOOLHOST_TEST_REDIS` (scripts/state-check starts one) and the
/// password it wants, if any ([`PASSWORD_ENV`]).
struct RealServer {
    url: StateUrl,
    password: Option<String>,
}

impl RealServer {
    fn from_env() -> Self {
        let url = std::env::var("TOOLHOST_TEST_REDIS").expect("TOOLHOST_TEST_REDIS");
        RealServer {
            url: StateUrl::parse(&url).unwrap(),
            password: std::env::var(PASSWORD_ENV).ok(),
        }
    }

    /// A backend on it (another process), refusing results past `max_result_bytes`.
    async fn backend(&self, max_result_bytes: usize) -> RedisBackend {
        RedisBackend::connect(&self.url, self.password.as_deref(), max_result_bytes)
            .await
            .unwrap()
    }
}

/// Against a real server: `TOOLHOST_TEST_REDIS=redis://127.0.0.1:PORT/0`
/// (scripts/state-check starts one and runs this).
#[tokio::test]
#[ignore = "needs a Redis server: scripts/state-check runs it"]
async fn redis_backend_keeps_owners_leases_and_results() {
    let server = RealServer::from_env();
    // The server scripts/state-check starts wants a password: without one, or with a
    // wrong one, the connection is refused saying so.
    if server.password.is_some() {
        for wrong in [None, Some("not-the-password")] {
            let refused = RedisBackend::connect(&server.url, wrong, 64)
                .await
                .unwrap_err();
            assert!(matches!(refused, StateError::Auth(_)), "{refused:?}");
            assert!(
                refused.to_string().contains("--state-password-file"),
                "{refused}"
            );
        }
    }
    let backend = server.backend(64).await;
    let prefix = format!("t{}", now_ms());
    exercise(&backend, &prefix).await;
    // A record whose result is past the reader's cap is refused by the server's script
    // before it is sent.
    let writer = server.backend(1024).await;
    let big = record(&format!("{prefix}-big"), &format!("{prefix}-alice"));
    writer.create(&big, Duration::from_secs(30)).await.unwrap();
    let result = "y".repeat(100);
    assert!(writer
        .finish(&big.id, TaskStatus::Completed, None, Some(&result))
        .await
        .unwrap());
    let read = backend.get(&big.owner, &big.id).await;
    assert!(
        matches!(read, Err(StateError::TooLarge(100, 64))),
        "{read:?}"
    );
    // A second backend (another process) sees the same tasks.
    let other = server.backend(64).await;
    let seen = other
        .get(&format!("{prefix}-alice"), &format!("{prefix}-2"))
        .await;
    assert_eq!(seen.unwrap().unwrap().status, TaskStatus::Completed);
}

/// Quota counts against a real server (`TOOLHOST_TEST_REDIS`): the same cases as
/// in memory, two backends (two processes) sharing one count, and every key with
/// a time to live.
#[tokio::test]
#[ignore = "needs a Redis server: scripts/state-check runs it"]
async fn redis_backend_counts_quotas_across_backends() {
    let server = RealServer::from_env();
    let one = server.backend(64).await;
    let two = server.backend(64).await;
    let prefix = format!("t{}", now_ms());
    inside_one_minute().await;
    exercise_counter(&one, &prefix).await;
    // Shared: the second backend finds "a" used up.
    assert!(matches!(
        two.count(&format!("{prefix}-a"), 1, 3, Duration::from_secs(60))
            .await
            .unwrap(),
        Counted::Refused { .. }
    ));
    let client = ::redis::Client::open(server.url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    if let Some(password) = &server.password {
        let _: () = ::redis::cmd("AUTH")
            .arg(password)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let keys: Vec<String> = ::redis::cmd("KEYS")
        .arg(format!("toolhost:quota:{prefix}-*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys.len(), 3, "{keys:?}");
    for key in keys {
        let ttl: i64 = ::redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!((1..=120_000).contains(&ttl), "{key}: {ttl}");
    }
}
