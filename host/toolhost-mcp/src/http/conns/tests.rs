//! The connection table's choices: victims, per-peer caps, clocks.

use super::*;

#[test]
fn peers() {
    let peer = |text: &str| Peer::of(text.parse().unwrap());
    assert_eq!(peer("127.0.0.2"), Peer("127.0.0.2".parse().unwrap()));
    assert_ne!(peer("127.0.0.2"), peer("127.0.0.3"));
    assert_eq!(peer("::ffff:127.0.0.2"), peer("127.0.0.2"));
    assert_eq!(peer("2001:db8:1:2:3:4:5:6"), peer("2001:db8:1:2::ffff"));
    assert_eq!(
        peer("2001:db8:1:2::1"),
        Peer("2001:db8:1:2::".parse().unwrap())
    );
    assert_ne!(peer("2001:db8:1:2::1"), peer("2001:db8:1:3::1"));
}

fn settings() -> Settings {
    Settings {
        max_connections: 3,
        max_pending_per_peer: 2,
        header_timeout: Duration::from_secs(2),
        min_receive_rate: 100,
    }
}

#[tokio::test]
async fn victims_come_from_the_crowd_and_never_hold_a_token() {
    let table = Table::new(settings());
    let (a, b, c) = (
        Peer::of("127.0.0.2".parse().unwrap()),
        Peer::of("127.0.0.3".parse().unwrap()),
        Peer::of("127.0.0.4".parse().unwrap()),
    );
    let lone = table.open(b).unwrap();
    let first = table.open(a).unwrap();
    let second = table.open(a).unwrap();
    // The per-peer cap counts pending connections only.
    assert_eq!(table.open(a).err(), Some(Refused::PeerPending));
    // Full: the newcomer pushes out the crowd's oldest, not the lone (older) one.
    let _third = table.open(c).unwrap();
    assert!(first.handle.evicted.is_cancelled());
    assert!(!lone.handle.evicted.is_cancelled());
    assert_eq!(table.len(), 3);
    // Authenticated connections, and answering ones, stay.
    lone.handle.admitted(true);
    second.handle.admitted(false);
    let (_answering, _) = second.handle.request(false, false);
    let fourth = table.open(a).unwrap();
    assert!(!lone.handle.evicted.is_cancelled());
    assert!(!second.handle.evicted.is_cancelled());
    fourth.handle.admitted(true);
    // Nothing left to push out: refused, and `room` waits until a slot frees.
    assert_eq!(table.open(c).err(), Some(Refused::Full));
    let room = tokio::spawn({
        let table = Arc::clone(&table);
        async move { table.room().await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!room.is_finished());
    fourth.handle.close();
    tokio::time::timeout(Duration::from_secs(5), room)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(table.len(), 2);
}

#[test]
fn the_header_clock_runs_on_bytes() {
    let table = Table::new(settings());
    let slot = table.open(Peer::of("127.0.0.2".parse().unwrap())).unwrap();
    let deadline = || {
        let inner = table.lock();
        inner.entries[&slot.handle.id].deadline(&table.settings)
    };
    let (at, slow) = deadline().unwrap();
    assert_eq!(slow, Slow::Headers);
    let opened = slot.received.opened;
    assert_eq!(at, opened + Duration::from_secs(2));
    // 150 bytes at 100 B/s buy 1.5 s more.
    slot.received.add(150);
    assert_eq!(deadline().unwrap().0, opened + Duration::from_millis(3500));
    // Never past the limit.
    slot.received.add(100_000);
    assert_eq!(deadline().unwrap().0, opened + HEADER_TIME_LIMIT);
    // Answering: no clock; a body: its own.
    let (answering, receiving) = slot.handle.request(false, true);
    let (at, slow) = deadline().unwrap();
    assert_eq!(slow, Slow::Body);
    assert!(at >= opened + Duration::from_secs(2));
    drop(receiving);
    assert_eq!(deadline(), None);
    drop(answering);
    assert_eq!(deadline().unwrap().1, Slow::Idle);
}

/// Whether the connection's clock has been woken (a permit waits), taking the permit.
async fn clock_woken(slot: &Slot) -> bool {
    tokio::time::timeout(Duration::ZERO, slot.handle.wake.notified())
        .await
        .is_ok()
}

/// What the clock does when it looks (`none_before`: the last look found no deadline):
/// the time it sleeps until.
fn look(table: &Table, slot: &Slot, none_before: bool) -> Option<Instant> {
    let mut inner = table.lock();
    let entry = inner.entries.get_mut(&slot.handle.id).unwrap();
    entry.look(&table.settings, none_before, Instant::now());
    entry.armed
}

#[tokio::test]
async fn the_clock_is_woken_only_when_the_deadline_comes_nearer() {
    let table = Table::new(settings());
    let slot = table.open(Peer::of("127.0.0.2".parse().unwrap())).unwrap();
    // Not looked yet (nothing armed): any deadline wakes it.
    let (answering, receiving) = slot.handle.request(false, true);
    assert!(clock_woken(&slot).await);
    let body_deadline = look(&table, &slot, false).unwrap();
    // The body in (no deadline) and the answer sent (the idle timeout, later than the
    // body's): it sleeps on, towards the body's deadline, and looks again then.
    drop(receiving);
    assert!(!clock_woken(&slot).await);
    drop(answering);
    assert!(!clock_woken(&slot).await);
    let idle_deadline = look(&table, &slot, false).unwrap();
    assert!(idle_deadline > body_deadline);
    // Asleep towards the idle timeout: a new request's body clock is nearer, so it wakes.
    let (answering, receiving) = slot.handle.request(false, true);
    assert!(clock_woken(&slot).await);
    assert!(look(&table, &slot, false).unwrap() < idle_deadline);
    // Looking while the request is answered (no deadline): again in one header timeout,
    // and the next request, its body and its answer bring nothing nearer.
    drop(receiving);
    let before = Instant::now();
    let again = look(&table, &slot, false).unwrap();
    assert!(again >= before + Duration::from_secs(2));
    assert!(again <= Instant::now() + Duration::from_secs(2));
    drop(answering);
    let (answering, receiving) = slot.handle.request(false, true);
    drop(receiving);
    drop(answering);
    assert!(!clock_woken(&slot).await);
    // A second look with no deadline (a long answer) waits to be woken; HTTP/2 always.
    let (_answering, _) = slot.handle.request(false, false);
    assert_eq!(look(&table, &slot, true), None);
    assert!(look(&table, &slot, false).is_some());
    let (_h2, _) = slot.handle.request(true, false);
    assert_eq!(look(&table, &slot, false), None);
}
