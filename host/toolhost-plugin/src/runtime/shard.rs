//! Shard picking: which engine shard ([`crate::engine::engine_shards`]) a new instance
//! is made on. Each shard counts the calls running on it; a new instance goes to the
//! least busy one, and a thread keeps to the shard it used last while that one is no
//! busier than another (its pool's slots stay in this core's cache).

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

/// Calls running on one engine shard, alone on its cache line (every call on that shard
/// changes it; the other cores only read it).
#[derive(Debug, Default)]
#[repr(align(128))]
struct ShardLoad(AtomicU32);

thread_local! {
    /// The shard this thread's last call ran on: calls on one thread keep to one shard
    /// (its pool's slots stay in this core's cache) while it is no busier than another.
    static LAST_SHARD: Cell<usize> = const { Cell::new(0) };
}

/// The calls running on each engine shard of one host.
#[derive(Debug)]
pub(crate) struct ShardLoads(Box<[ShardLoad]>);

impl ShardLoads {
    /// No call running on any of `shards` shards (at least one).
    pub(crate) fn new(shards: usize) -> Self {
        Self((0..shards.max(1)).map(|_| ShardLoad::default()).collect())
    }

    /// The shard a new instance should be made on: the one with the fewest calls
    /// running, this thread's last one when it is among them.
    pub(crate) fn pick(&self) -> usize {
        let shards = self.0.len();
        if shards == 1 {
            return 0;
        }
        let load = |shard: usize| self.0[shard].0.load(Ordering::Relaxed);
        let last = LAST_SHARD.get().min(shards - 1);
        let (mut best, mut best_load) = (last, load(last));
        for shard in 0..shards {
            let shard_load = load(shard);
            if shard_load < best_load {
                (best, best_load) = (shard, shard_load);
            }
        }
        LAST_SHARD.set(best);
        best
    }

    /// Counts a call running on `shard` until the guard is dropped.
    pub(crate) fn enter(&self, shard: usize) -> ShardGuard<'_> {
        let load = &self.0[shard].0;
        load.fetch_add(1, Ordering::Relaxed);
        ShardGuard(load)
    }

    /// Calls running on each shard now (for tests).
    #[cfg(test)]
    pub(crate) fn running(&self) -> Vec<u32> {
        self.0
            .iter()
            .map(|load| load.0.load(Ordering::Relaxed))
            .collect()
    }
}

/// A call counted on its shard's load.
pub(crate) struct ShardGuard<'a>(&'a AtomicU32);

impl Drop for ShardGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_instance_goes_to_the_least_busy_shard_and_stays_there_on_a_tie() {
        let shards = ShardLoads::new(3);
        std::thread::spawn(move || {
            assert_eq!(shards.pick(), 0, "all idle: this thread's last (0)");
            let a = shards.enter(0);
            assert_eq!(shards.pick(), 1);
            let _b = shards.enter(1);
            assert_eq!(shards.pick(), 2);
            let c = shards.enter(2);
            assert_eq!(shards.running(), vec![1, 1, 1]);
            // A tie: this thread keeps to the shard it used last.
            assert_eq!(shards.pick(), 2);
            drop(c);
            let d = shards.enter(0);
            assert_eq!(shards.running(), vec![2, 1, 0]);
            assert_eq!(shards.pick(), 2);
            drop((a, d));
            assert_eq!(shards.running(), vec![0, 1, 0]);
            assert_eq!(shards.pick(), 2, "a tie at 0: still its last one");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn one_shard_is_always_shard_zero() {
        let shards = ShardLoads::new(1);
        let _running = shards.enter(0);
        assert_eq!(shards.pick(), 0);
        assert_eq!(shards.running(), vec![1]);
    }
}
