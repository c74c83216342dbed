//! The task backends against the same cases ([`MemoryBackend`] always; Redis when
//! `TOOLHOST_TEST_REDIS` names a server: scripts/state-check starts one), and the Redis
//! backend against hostile servers (never answering, answering garbage, a huge
//! answer): bounded time, clear errors.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::time::Duration;

use super::*;

fn record(id: &str, owner: &str) -> TaskRecord {
    let now = now_ms();
    TaskRecord {
        id: id.into(),
        owner: owner.into(),
        status: TaskStatus::Working,
        status_message: None,
        created_ms: now,
        updated_ms: now,
        ttl_ms: 60_000,
        result: None,
    }
}

/// The cases every backend must pass; `prefix` keeps runs apart on a shared server.
async fn exercise(backend: &dyn TaskBackend, prefix: &str) {
    let id = |n: &str| format!("{prefix}-{n}");
    let (alice, bob) = (format!("{prefix}-alice"), format!("{prefix}-bob"));
    let lease = Duration::from_secs(30);

    // Created, read back by its owner only.
    let first = record(&id("1"), &alice);
    backend.create(&first, lease).await.unwrap();
    assert_eq!(
        backend.get(&alice, &id("1")).await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(backend.get(&bob, &id("1")).await.unwrap(), None);
    assert_eq!(backend.get(&alice, &id("nope")).await.unwrap(), None);
    assert!(matches!(
        backend.create(&first, lease).await,
        Err(StateError::Exists)
    ));

    // Heartbeat renews; another owner cannot cancel; the owner can, once.
    assert_eq!(
        backend.heartbeat(&id("1"), lease).await.unwrap(),
        Heartbeat::Running
    );
    assert!(matches!(
        backend.cancel(&bob, &id("1"), "by bob").await,
        Err(CancelRefusal::NotFound)
    ));
    let cancelled = backend
        .cancel(&alice, &id("1"), "the client cancelled it")
        .await
        .unwrap();
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    assert_eq!(
        cancelled.status_message.as_deref(),
        Some("the client cancelled it")
    );
    assert!(matches!(
        backend.cancel(&alice, &id("1"), "again").await,
        Err(CancelRefusal::Ended(TaskStatus::Cancelled))
    ));
    // The runner learns it from its heartbeat, and its late result does not overwrite it.
    assert_eq!(
        backend.heartbeat(&id("1"), lease).await.unwrap(),
        Heartbeat::Ended(TaskStatus::Cancelled)
    );
    assert!(!backend
        .finish(&id("1"), TaskStatus::Completed, None, Some("{}"))
        .await
        .unwrap());
    assert_eq!(
        backend.get(&alice, &id("1")).await.unwrap().unwrap().status,
        TaskStatus::Cancelled
    );

    // Finished with a result, read back whole.
    let second = record(&id("2"), &alice);
    backend.create(&second, lease).await.unwrap();
    let result = r#"{"content":[{"type":"text","text":"hello"}],"isError":false}"#;
    assert!(backend
        .finish(&id("2"), TaskStatus::Completed, None, Some(result))
        .await
        .unwrap());
    let done = backend.get(&alice, &id("2")).await.unwrap().unwrap();
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.result.as_deref(), Some(result));
    assert_eq!(
        backend.heartbeat(&id("2"), lease).await.unwrap(),
        Heartbeat::Ended(TaskStatus::Completed)
    );

    // A result past the cap (64 bytes here) is refused, the task stays running.
    let third = record(&id("3"), &alice);
    backend.create(&third, lease).await.unwrap();
    let big = "x".repeat(65);
    assert!(matches!(
        backend
            .finish(&id("3"), TaskStatus::Completed, None, Some(&big))
            .await,
        Err(StateError::TooLarge(65, 64))
    ));
    assert_eq!(
        backend.get(&alice, &id("3")).await.unwrap().unwrap().status,
        TaskStatus::Working
    );

    // The owner's list: its three tasks, oldest first; none of them for bob.
    let listed: Vec<String> = backend
        .list(&alice)
        .await
        .unwrap()
        .into_iter()
        .map(|record| record.id)
        .collect();
    let mut expected = vec![id("1"), id("2"), id("3")];
    expected.sort_by_key(|task| {
        [&first, &second, &third]
            .iter()
            .find(|record| &record.id == task)
            .map(|record| (record.created_ms, record.id.clone()))
    });
    assert_eq!(listed, expected);
    assert!(backend.list(&bob).await.unwrap().is_empty());

    // A lease not renewed: the task is failed, said so, and stays so.
    let orphan = record(&id("4"), &alice);
    backend
        .create(&orphan, Duration::from_millis(100))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let failed = backend.get(&alice, &id("4")).await.unwrap().unwrap();
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(failed.status_message.as_deref(), Some(LEASE_EXPIRED));
    assert_eq!(
        backend.heartbeat(&id("4"), lease).await.unwrap(),
        Heartbeat::Ended(TaskStatus::Failed)
    );

    // Forgotten after its time to live.
    let mut brief = record(&id("5"), &alice);
    brief.ttl_ms = 200;
    backend.create(&brief, lease).await.unwrap();
    assert!(backend.get(&alice, &id("5")).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(backend.get(&alice, &id("5")).await.unwrap(), None);
    assert_eq!(
        backend.heartbeat(&id("5"), lease).await.unwrap(),
        Heartbeat::Gone
    );
}

#[tokio::test]
async fn memory_backend_keeps_owners_leases_and_results() {
    exercise(&MemoryBackend::new(64), "mem").await;
}

/// The counting cases every [`QuotaCounter`] must pass (the window is the current
/// minute of the counter's clock: the caller makes sure it does not end mid-test).
async fn exercise_counter(counter: &dyn QuotaCounter, prefix: &str) {
    let minute = Duration::from_secs(60);
    let key = |n: &str| format!("{prefix}-{n}");
    for _ in 0..3 {
        assert_eq!(
            counter.count(&key("a"), 1, 3, minute).await.unwrap(),
            Counted::Taken
        );
    }
    let Counted::Refused { retry_after } = counter.count(&key("a"), 1, 3, minute).await.unwrap()
    else {
        panic!("a fourth within the minute")
    };
    assert!(
        retry_after > Duration::ZERO && retry_after <= minute,
        "{retry_after:?}"
    );
    // Another key is counted apart.
    assert_eq!(
        counter.count(&key("b"), 3, 3, minute).await.unwrap(),
        Counted::Taken
    );
    // All or nothing: 5 of 6 taken, 2 more refused and not counted, 1 still fits.
    assert_eq!(
        counter.count(&key("bytes"), 5, 6, minute).await.unwrap(),
        Counted::Taken
    );
    assert!(matches!(
        counter.count(&key("bytes"), 2, 6, minute).await.unwrap(),
        Counted::Refused { .. }
    ));
    assert_eq!(
        counter.count(&key("bytes"), 1, 6, minute).await.unwrap(),
        Counted::Taken
    );
}

/// Waits until the current minute has at least 10 s left, so a test's counts fall in
/// one window.
async fn inside_one_minute() {
    let into = now_ms() % 60_000;
    if into > 50_000 {
        tokio::time::sleep(Duration::from_millis(60_000 - into + 100)).await;
    }
}

#[tokio::test]
async fn memory_backend_counts_quotas_in_fixed_windows() {
    inside_one_minute().await;
    exercise_counter(&MemoryBackend::new(64), "mem").await;
    // At a fixed time: the window's end is exact, and the next window starts afresh.
    let counter = MemoryBackend::new(64);
    let minute = Duration::from_secs(60);
    let start = 1_000 * 60_000;
    assert_eq!(
        counter.count_at("k", 2, 2, minute, start + 15_000),
        Counted::Taken
    );
    assert_eq!(
        counter.count_at("k", 1, 2, minute, start + 59_999),
        Counted::Refused {
            retry_after: Duration::from_millis(1)
        }
    );
    assert_eq!(
        counter.count_at("k", 2, 2, minute, start + 60_000),
        Counted::Taken
    );
    // A day's window ends at midnight UTC.
    assert_eq!(
        counter.count_at("d", 7, 5, MAX_WINDOW, 86_400_000 * 3 + 3_600_000),
        Counted::Refused {
            retry_after: Duration::from_secs(23 * 3600)
        }
    );
}

#[test]
fn ended_windows_are_swept_so_the_memory_counter_stays_bounded() {
    let counter = MemoryBackend::new(64);
    let minute = Duration::from_secs(60);
    for n in 0..5_000u64 {
        // Each principal counted once, one minute after the other.
        counter.count_at(&format!("p{n}"), 1, 1, minute, n * 60_000);
    }
    let kept = counter.lock_counts().0.len();
    assert!(kept <= 1_025, "{kept} windows kept");
}

#[cfg(feature = "redis-state")]
mod redis {
    use std::net::SocketAddr;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A server on 127.0.0.1 answering each connection with `answer` (after reading
    /// what it is sent), or never when `None`; bounded: it stops with the test.
    async fn hostile(answer: Option<Vec<u8>>) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let answer = answer.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    loop {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {
                                if let Some(answer) = &answer {
                                    if socket.write_all(answer).await.is_err() {
                                        return;
                                    }
                                }
                            }
                        }
                    }
                });
            }
        });
        addr
    }

    async fn connect(addr: SocketAddr) -> (Result<RedisBackend, StateError>, Duration) {
        let url = StateUrl::parse(&format!("redis://{addr}/0")).unwrap();
        let start = std::time::Instant::now();
        let backend =
            RedisBackend::connect_with_timeout(&url, None, None, 64, Duration::from_millis(500))
                .await;
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
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = std::sync::Arc::clone(&sent);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let counted = std::sync::Arc::clone(&counted);
                tokio::spawn(async move {
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
                });
            }
        });
        (addr, sent)
    }

    #[tokio::test]
    async fn a_huge_answer_streamed_is_cut_at_the_memory_bound_not_the_time_limit() {
        static FILLER: [u8; 64 * 1024] = [b'x'; 64 * 1024];
        // A 1 GiB bulk string's header is refused at once; a line that never ends, and
        // an array of bulk strings each small, are cut once past the bound (64 B of
        // result + 2 MiB), long before the time limit, having read a few MiB at most.
        const BULKS: &[u8] =
            b"$60\r\n012345678901234567890123456789012345678901234567890123456789\r\n";
        let cases: [(&'static [u8], &'static [u8]); 2] = [(b"+", &FILLER), (b"*60000\r\n", BULKS)];
        for (head, filler) in cases {
            let (addr, sent) = streaming(head, filler).await;
            let url = StateUrl::parse(&format!("redis://{addr}/0")).unwrap();
            let started = std::time::Instant::now();
            let backend =
                RedisBackend::connect_with_timeout(&url, None, None, 64, Duration::from_secs(10))
                    .await;
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
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let script = script.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let mut answers = script.into_iter();
                    loop {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {
                                if let Some(answer) = answers.next() {
                                    if socket.write_all(answer).await.is_err() {
                                        return;
                                    }
                                }
                            }
                        }
                    }
                });
            }
        });
        addr
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

    /// Against a real server: `TOOLHOST_TEST_REDIS=redis://127.0.0.1:PORT/0`
    /// (scripts/state-check starts one and runs this).
    #[tokio::test]
    #[ignore = "needs a Redis server: scripts/state-check runs it"]
    async fn redis_backend_keeps_owners_leases_and_results() {
        let url = std::env::var("TOOLHOST_TEST_REDIS").expect("TOOLHOST_TEST_REDIS");
        let url = StateUrl::parse(&url).unwrap();
        // The server scripts/state-check starts wants a password: without one, or with a
        // wrong one, the connection is refused saying so.
        let password = std::env::var(PASSWORD_ENV).ok();
        if password.is_some() {
            for wrong in [None, Some("not-the-password")] {
                let refused = RedisBackend::connect(&url, wrong, 64).await.unwrap_err();
                assert!(matches!(refused, StateError::Auth(_)), "{refused:?}");
                assert!(
                    refused.to_string().contains("--state-password-file"),
                    "{refused}"
                );
            }
        }
        let backend = RedisBackend::connect(&url, password.as_deref(), 64)
            .await
            .unwrap();
        let prefix = format!("t{}", now_ms());
        exercise(&backend, &prefix).await;
        // A record whose result is past the reader's cap is refused by the server's script
        // before it is sent.
        let writer = RedisBackend::connect(&url, password.as_deref(), 1024)
            .await
            .unwrap();
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
        let other = RedisBackend::connect(&url, password.as_deref(), 64)
            .await
            .unwrap();
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
        let url = std::env::var("TOOLHOST_TEST_REDIS").expect("TOOLHOST_TEST_REDIS");
        let url = StateUrl::parse(&url).unwrap();
        let password = std::env::var(PASSWORD_ENV).ok();
        let one = RedisBackend::connect(&url, password.as_deref(), 64)
            .await
            .unwrap();
        let two = RedisBackend::connect(&url, password.as_deref(), 64)
            .await
            .unwrap();
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
        let client = ::redis::Client::open(url.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        if let Some(password) = &password {
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
}

/// rediss:// against TLS servers on 127.0.0.1 with the certificates of `testdata/`
/// (made by tests/deploy/make_certs.py: a private CA, a server certificate it signs for
/// 127.0.0.1 and localhost, one for another name, another CA's server certificate).
#[cfg(feature = "redis-state")]
mod tls {
    use std::net::SocketAddr;
    use std::sync::Arc;

    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::state::{StateCa, StateCaError};

    const CA: &[u8] = include_bytes!("testdata/ca.pem");
    const OTHER_CA: &[u8] = include_bytes!("testdata/other-ca.pem");
    const SERVER: (&[u8], &[u8]) = (
        include_bytes!("testdata/server.pem"),
        include_bytes!("testdata/server.key"),
    );
    const WRONG_NAME: (&[u8], &[u8]) = (
        include_bytes!("testdata/wrong-name.pem"),
        include_bytes!("testdata/wrong-name.key"),
    );
    const OTHER_SERVER: (&[u8], &[u8]) = (
        include_bytes!("testdata/other-server.pem"),
        include_bytes!("testdata/other-server.key"),
    );

    /// The number of commands whole in `buf` (RESP arrays of bulk strings), and the
    /// bytes they take.
    fn commands(buf: &[u8]) -> (usize, usize) {
        fn line(buf: &[u8], at: usize) -> Option<(i64, usize)> {
            let end = buf[at..].windows(2).position(|w| w == b"\r\n")? + at;
            let n = std::str::from_utf8(&buf[at + 1..end]).ok()?.parse().ok()?;
            Some((n, end + 2))
        }
        let (mut count, mut used) = (0, 0);
        'next: while used < buf.len() {
            let Some((items, mut at)) = line(buf, used) else {
                break;
            };
            for _ in 0..items {
                let Some((len, body)) = line(buf, at) else {
                    break 'next;
                };
                at = body + usize::try_from(len).unwrap() + 2;
                if at > buf.len() {
                    break 'next;
                }
            }
            count += 1;
            used = at;
        }
        (count, used)
    }

    /// A TLS server on 127.0.0.1 with `cert`, answering every command `+PONG` (set-up
    /// commands take any simple answer); bounded: it stops with the test.
    async fn tls_server((cert, key): (&[u8], &[u8])) -> SocketAddr {
        let chain = vec![CertificateDer::from_pem_slice(cert).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(key).unwrap();
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(socket).await else {
                        return;
                    };
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        match tls.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        let (count, used) = commands(&buf);
                        buf.drain(..used);
                        if tls.write_all(&b"+PONG\r\n".repeat(count)).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn connect(
        addr: SocketAddr,
        host: &str,
        ca: Option<&StateCa>,
    ) -> (Result<RedisBackend, StateError>, Duration) {
        let url = StateUrl::parse(&format!("rediss://{host}:{}/0", addr.port())).unwrap();
        let start = std::time::Instant::now();
        let backend =
            RedisBackend::connect_with_timeout(&url, None, ca, 64, Duration::from_secs(2)).await;
        (backend, start.elapsed())
    }

    fn ca() -> StateCa {
        StateCa::from_pem(CA, "ca.pem").unwrap()
    }

    fn refused_for(err: &StateError, why: &str) {
        assert!(
            matches!(err, StateError::Tls(text) if text.contains(why)),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.starts_with("the TLS connection to the task state server failed (")
                && message.contains("--state-ca-file FILE"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_server_certificate_signed_by_the_given_ca_is_accepted() {
        let addr = tls_server(SERVER).await;
        for host in ["127.0.0.1", "localhost"] {
            let (backend, _) = connect(addr, host, Some(&ca())).await;
            let backend = backend.unwrap();
            backend.ping().await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_server_certificate_signed_by_another_ca_is_refused() {
        let addr = tls_server(OTHER_SERVER).await;
        let (backend, took) = connect(addr, "127.0.0.1", Some(&ca())).await;
        refused_for(
            &backend.unwrap_err(),
            "invalid peer certificate: UnknownIssuer",
        );
        assert!(took < Duration::from_secs(2), "took {took:?}");
    }

    #[tokio::test]
    async fn a_private_ca_certificate_is_refused_without_the_ca_file() {
        // The public webpki roots do not hold the private CA.
        let addr = tls_server(SERVER).await;
        let (backend, _) = connect(addr, "127.0.0.1", None).await;
        refused_for(
            &backend.unwrap_err(),
            "invalid peer certificate: UnknownIssuer",
        );
    }

    #[tokio::test]
    async fn the_ca_file_replaces_the_public_roots_and_may_hold_several_cas() {
        // The other CA alone: the server's certificate does not chain to it.
        let addr = tls_server(SERVER).await;
        let other = StateCa::from_pem(OTHER_CA, "other-ca.pem").unwrap();
        let (backend, _) = connect(addr, "127.0.0.1", Some(&other)).await;
        refused_for(&backend.unwrap_err(), "UnknownIssuer");
        // Both in one file: accepted.
        let both = StateCa::from_pem(&[OTHER_CA, CA].concat(), "both.pem").unwrap();
        assert_eq!(both.certificates(), 2);
        let (backend, _) = connect(addr, "127.0.0.1", Some(&both)).await;
        backend.unwrap();
    }

    #[tokio::test]
    async fn a_certificate_for_another_name_is_refused() {
        let addr = tls_server(WRONG_NAME).await;
        let (backend, _) = connect(addr, "127.0.0.1", Some(&ca())).await;
        refused_for(&backend.unwrap_err(), "certificate not valid for name");
    }

    #[tokio::test]
    async fn a_plain_server_behind_rediss_is_refused_clearly_and_quickly() {
        // A plain Redis answers the TLS hello as a (wrong) command.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    if matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {
                        let _ = socket
                            .write_all(b"-ERR Protocol error: unbalanced quotes in request\r\n")
                            .await;
                    }
                });
            }
        });
        let (backend, took) = connect(addr, "127.0.0.1", Some(&ca())).await;
        refused_for(
            &backend.unwrap_err(),
            "does the server speak TLS on this port?",
        );
        assert!(took < Duration::from_secs(2), "took {took:?}");
    }

    #[tokio::test]
    async fn a_silent_server_behind_rediss_is_refused_as_not_tls_within_the_bound() {
        // A plain Redis waits for a newline the TLS hello may not hold: no answer.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let (backend, took) = connect(addr, "127.0.0.1", Some(&ca())).await;
        refused_for(
            &backend.unwrap_err(),
            "no TLS handshake answer within 1500 ms: does the server speak TLS on this port?",
        );
        assert!(took < Duration::from_secs(2), "took {took:?}");
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, b"not a certificate\n").unwrap();
        let err = StateCa::from_pem_file(&empty).unwrap_err();
        assert_eq!(
            err,
            StateCaError::NoCertificate(empty.display().to_string())
        );
        assert!(
            err.to_string().contains("holds no PEM certificate"),
            "{err}"
        );
        // A key is not a certificate.
        let key = dir.path().join("key.pem");
        std::fs::write(&key, SERVER.1).unwrap();
        assert!(matches!(
            StateCa::from_pem_file(&key),
            Err(StateCaError::NoCertificate(_))
        ));
        let missing = dir.path().join("missing.pem");
        let err = StateCa::from_pem_file(&missing).unwrap_err();
        assert!(
            matches!(&err, StateCaError::Unreadable { path, .. } if *path == missing.display().to_string()),
            "{err:?}"
        );
        // A certificate block holding garbage.
        let broken = dir.path().join("broken.pem");
        std::fs::write(
            &broken,
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let err = StateCa::from_pem_file(&broken).unwrap_err();
        assert!(
            matches!(&err, StateCaError::BadCertificate { reason, .. } if reason.contains("not usable as a CA")),
            "{err:?}"
        );
    }
}
