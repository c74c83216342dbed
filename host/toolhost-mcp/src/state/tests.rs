//! The task backends against the same cases: [`MemoryBackend`] here; the Redis backend
//! runs them too (`redis_backend/tests.rs`, against a real server when
//! `TOOLHOST_TEST_REDIS` names one: scripts/state-check starts one).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::time::Duration;

use super::*;

pub(super) fn record(id: &str, owner: &str) -> TaskRecord {
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
pub(super) async fn exercise(backend: &dyn TaskBackend, prefix: &str) {
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
pub(super) async fn exercise_counter(counter: &dyn QuotaCounter, prefix: &str) {
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
pub(super) async fn inside_one_minute() {
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
