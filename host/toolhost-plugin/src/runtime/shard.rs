//! Shard picking: which engine shard ([`crate::engine::engine_shards`]) a call runs on.
//! Each shard counts the calls running on it; a call goes to the least busy one (to an
//! idle instance there in reuse mode, else a new one), and a thread keeps to the shard
//! it used last while that one is no busier than another (its pool's slots stay in this
//! core's cache). Choosing a shard and counting the call on it are one atomic step.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

/// Times a start chooses its shard again because the loads changed under it, before
/// it counts on its last choice whatever the loads (see [`ShardLoads::enter_least_busy`]).
const CLAIM_ATTEMPTS: u32 = 8;

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

    /// Counts a call on the least busy of the first `shards` shards (at least one, at
    /// most all) and returns it: the shard with the fewest calls running; on a tie, one
    /// `preferred` says yes to (where an idle instance waits), then this thread's last
    /// shard, then the lowest.
    ///
    /// Choosing and counting are one step: the count is raised only if the chosen shard
    /// still has the load it was chosen with (a compare-exchange), else the choice is
    /// made again from the new loads, so two calls starting at once never both take a
    /// shard while another has fewer calls. Each retry means another call started or
    /// ended meanwhile; after [`CLAIM_ATTEMPTS`] the call counts on its last choice
    /// anyway (a start never spins unbounded). A call ending while another chooses can
    /// still leave the chooser one call behind the best choice; that evens out at the
    /// next start.
    pub(crate) fn enter_least_busy(
        &self,
        shards: usize,
        mut preferred: impl FnMut(usize) -> bool,
    ) -> ShardGuard<'_> {
        let shards = shards.clamp(1, self.0.len());
        if shards == 1 {
            return self.enter(0);
        }
        let last = LAST_SHARD.get().min(shards - 1);
        let mut attempt = 1;
        let shard = loop {
            let (shard, seen) = self.least_busy(shards, last, &mut preferred);
            if attempt == CLAIM_ATTEMPTS {
                self.0[shard].0.fetch_add(1, Ordering::Relaxed);
                break shard;
            }
            let claimed = self.0[shard].0.compare_exchange(
                seen,
                seen.wrapping_add(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            if claimed.is_ok() {
                break shard;
            }
            attempt += 1;
        };
        LAST_SHARD.set(shard);
        ShardGuard {
            load: &self.0[shard].0,
            shard,
        }
    }

    /// The least busy of the first `shards` shards and its load: fewest calls, then
    /// `preferred`, then `last`, then the lowest.
    fn least_busy(
        &self,
        shards: usize,
        last: usize,
        preferred: &mut impl FnMut(usize) -> bool,
    ) -> (usize, u32) {
        // Smaller is better: (calls running, not preferred, not the last shard).
        let mut rank = |shard: usize| {
            let load = self.0[shard].0.load(Ordering::Relaxed);
            (load, !preferred(shard), shard != last)
        };
        let mut best = (0, rank(0));
        for shard in 1..shards {
            let rank = rank(shard);
            if rank < best.1 {
                best = (shard, rank);
            }
        }
        (best.0, best.1 .0)
    }

    /// Counts a call running on `shard` until the guard is dropped.
    fn enter(&self, shard: usize) -> ShardGuard<'_> {
        let load = &self.0[shard].0;
        load.fetch_add(1, Ordering::Relaxed);
        ShardGuard { load, shard }
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
pub(crate) struct ShardGuard<'a> {
    load: &'a AtomicU32,
    shard: usize,
}

impl ShardGuard<'_> {
    /// The shard the call is counted on.
    pub(crate) fn shard(&self) -> usize {
        self.shard
    }
}

impl Drop for ShardGuard<'_> {
    fn drop(&mut self) {
        self.load.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call on the least busy shard, with no shard preferred.
    fn enter(shards: &ShardLoads) -> ShardGuard<'_> {
        shards.enter_least_busy(usize::MAX, |_| false)
    }

    #[test]
    fn a_call_goes_to_the_least_busy_shard_and_stays_there_on_a_tie() {
        let shards = ShardLoads::new(3);
        std::thread::spawn(move || {
            let a = enter(&shards);
            assert_eq!(a.shard(), 0, "all idle: this thread's last (0)");
            let b = enter(&shards);
            assert_eq!(b.shard(), 1);
            let c = enter(&shards);
            assert_eq!(c.shard(), 2);
            assert_eq!(shards.running(), vec![1, 1, 1]);
            // A tie: this thread keeps to the shard it used last.
            let d = enter(&shards);
            assert_eq!(d.shard(), 2);
            assert_eq!(shards.running(), vec![1, 1, 2]);
            drop((c, d));
            let e = enter(&shards);
            assert_eq!(e.shard(), 2, "the least busy, and its last");
            drop((a, b));
            assert_eq!(shards.running(), vec![0, 0, 1]);
            let f = enter(&shards);
            assert_eq!(f.shard(), 0, "a tie at 0 without its last: the lowest");
            drop((e, f));
            assert_eq!(shards.running(), vec![0, 0, 0]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn on_a_tie_a_preferred_shard_comes_before_the_last_one() {
        let shards = ShardLoads::new(3);
        std::thread::spawn(move || {
            assert_eq!(enter(&shards).shard(), 0);
            let a = shards.enter_least_busy(3, |shard| shard == 2);
            assert_eq!(
                a.shard(),
                2,
                "a tie at 0: the preferred one, not the last (0)"
            );
            let b = shards.enter_least_busy(3, |shard| shard == 2);
            assert_eq!(b.shard(), 0, "the preferred one is busier: the least busy");
            assert_eq!(shards.running(), vec![1, 0, 1]);
        })
        .join()
        .unwrap();
    }

    /// Another call counted on the shard this one chose, between its reading the loads
    /// and its counting (here from inside `preferred`, called while the loads are read):
    /// this call chooses again and takes the idle shard, not a second place on the busy
    /// one.
    #[test]
    fn a_call_counted_meanwhile_on_the_chosen_shard_sends_this_one_to_another() {
        let shards = ShardLoads::new(2);
        std::thread::spawn(move || {
            let mut meanwhile = None;
            let this = shards.enter_least_busy(2, |_| {
                if meanwhile.is_none() {
                    meanwhile = Some(enter(&shards));
                }
                false
            });
            let meanwhile = meanwhile.unwrap();
            assert_eq!((meanwhile.shard(), this.shard()), (0, 1));
            assert_eq!(shards.running(), vec![1, 1]);
        })
        .join()
        .unwrap();
    }

    /// Calls started at once on many threads, as many as there are shards, take one
    /// shard each.
    #[test]
    fn calls_started_at_once_take_a_shard_each() {
        for _ in 0..200 {
            let shards = ShardLoads::new(4);
            let start = std::sync::Barrier::new(4);
            let taken = std::sync::Barrier::new(4);
            let mut chosen: Vec<usize> = std::thread::scope(|scope| {
                let threads: Vec<_> = (0..4)
                    .map(|_| {
                        scope.spawn(|| {
                            start.wait();
                            let guard = enter(&shards);
                            taken.wait();
                            guard.shard()
                        })
                    })
                    .collect();
                threads.into_iter().map(|t| t.join().unwrap()).collect()
            });
            chosen.sort_unstable();
            assert_eq!(chosen, vec![0, 1, 2, 3]);
            assert_eq!(shards.running(), vec![0, 0, 0, 0]);
        }
    }

    #[test]
    fn one_shard_is_always_shard_zero() {
        let shards = ShardLoads::new(1);
        let running = shards.enter_least_busy(4, |_| true);
        let second = enter(&shards);
        assert_eq!((running.shard(), second.shard()), (0, 0));
        assert_eq!(shards.running(), vec![2]);
    }

    #[test]
    fn calls_keep_to_the_first_shards_asked_for() {
        let shards = ShardLoads::new(3);
        let a = shards.enter_least_busy(2, |_| false);
        let b = shards.enter_least_busy(2, |_| false);
        let c = shards.enter_least_busy(0, |_| false);
        assert_eq!(shards.running(), vec![2, 1, 0]);
        drop((a, b, c));
    }
}
