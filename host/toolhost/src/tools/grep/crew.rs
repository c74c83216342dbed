//! A crew: a few scoped threads that stay for a whole call and work on a shared job
//! round after round, beside the thread that sets the job.
//!
//! grep scans a walk a chunk at a time; starting threads per chunk cost a thread (its
//! stack, and glibc's malloc arena for each thread that starts before the last one
//! has given its arena back) 244 times in a walk of 10^6 files. A crew starts its
//! helpers once: each round, the caller puts the next job in place
//! ([`job_mut`](Crew::job_mut)), and [`round`](Crew::round) wakes the helpers, works on
//! the job itself and returns once every helper is done with it.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockWriteGuard};
use std::thread::Scope;

/// A job and the helpers that work on it with the caller, a round at a time.
#[derive(Debug)]
pub(super) struct Crew<J> {
    job: RwLock<J>,
    state: Mutex<State>,
    /// A new round, or the stop.
    wake: Condvar,
    /// The last helper of a round is done.
    idle: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Rounds started so far.
    round: u64,
    /// Helpers still working on this round.
    busy: usize,
    /// Helpers serving (a helper that panicked is gone).
    helpers: usize,
    stop: bool,
}

impl<J: Send + Sync> Crew<J> {
    /// A crew without helpers yet, with `job` in place.
    pub(super) fn new(job: J) -> Self {
        Crew {
            job: RwLock::new(job),
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            idle: Condvar::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts `helpers` threads in `scope`, each with the state `make` gives it, that
    /// run `work` on the job in every round until [`stop`](Crew::stop).
    pub(super) fn hire<'scope, 'env, S, M, W>(
        &'env self,
        scope: &'scope Scope<'scope, 'env>,
        helpers: usize,
        make: M,
        work: &'env W,
    ) where
        M: Fn() -> S,
        S: Send + 'env,
        W: Fn(&mut S, &J) + Sync,
    {
        for _ in 0..helpers {
            let mut own = make();
            // Hired between rounds: the first round it serves is the next one.
            let seen = {
                let mut state = self.state();
                state.helpers += 1;
                state.round
            };
            scope.spawn(move || self.serve(seen, &mut own, work));
        }
    }

    /// A helper's life: wait for a round, work on its job, say so; until the stop.
    fn serve<S>(&self, mut seen: u64, own: &mut S, work: &impl Fn(&mut S, &J)) {
        loop {
            {
                let mut state = self.state();
                while state.round == seen && !state.stop {
                    state = self
                        .wake
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                if state.stop {
                    return;
                }
                seen = state.round;
            }
            let _done = Done(self);
            work(
                own,
                &self.job.read().unwrap_or_else(PoisonError::into_inner),
            );
        }
    }

    /// The job, to set between rounds.
    pub(super) fn job_mut(&self) -> RwLockWriteGuard<'_, J> {
        self.job.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a round: wakes the helpers on the job in place, and returns at once, so
    /// the caller can do other work (list the next files) while they work; the round
    /// ends at [`finish`](Crew::finish), which must come before the job is changed.
    pub(super) fn start(&self) {
        {
            let mut state = self.state();
            state.round += 1;
            state.busy = state.helpers;
        }
        self.wake.notify_all();
    }

    /// Ends the round [`start`](Crew::start) began: runs `own` (the caller's share of
    /// the work) on the job, and returns once every helper is done with it.
    pub(super) fn finish<R>(&self, own: impl FnOnce(&J) -> R) -> R {
        let result = own(&self.job.read().unwrap_or_else(PoisonError::into_inner));
        let mut state = self.state();
        while state.busy > 0 {
            state = self
                .idle
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        result
    }

    /// Sends the helpers home: each ends once it is done with its round.
    pub(super) fn stop(&self) {
        self.state().stop = true;
        self.wake.notify_all();
    }
}

/// Counts a helper out of its round when dropped, also when its work panicked (then it
/// serves no more rounds: the scope passes the panic on when it joins the thread).
struct Done<'a, J>(&'a Crew<J>);

impl<J> Drop for Done<'_, J> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.busy -= 1;
        if std::thread::panicking() {
            state.helpers -= 1;
        }
        if state.busy == 0 {
            self.0.idle.notify_all();
        }
    }
}

/// Stops a crew when dropped: put in the scope before its helpers start, so that an
/// early return or a panic of the caller lets the scope join them.
pub(super) struct Dismiss<'a, J: Send + Sync>(pub(super) &'a Crew<J>);

impl<J: Send + Sync> Drop for Dismiss<'_, J> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Every helper works every round once, with its own state kept between rounds, and
    /// the caller sees the round's work done when `finish` returns.
    #[test]
    fn helpers_work_each_round_once_and_round_waits_for_them() {
        let crew = Crew::new(AtomicUsize::new(0));
        let work = |own: &mut usize, job: &AtomicUsize| {
            *own += 1;
            job.fetch_add(*own, Ordering::Relaxed);
        };
        std::thread::scope(|scope| {
            let _dismiss = Dismiss(&crew);
            crew.hire(scope, 3, || 0usize, &work);
            for round in 1..=50usize {
                crew.start();
                let own = crew.finish(|job| {
                    job.fetch_add(1000, Ordering::Relaxed);
                    round * 2
                });
                // Each helper added its round number: 3 x round, plus the caller's 1000.
                let total = crew.job_mut().swap(0, Ordering::Relaxed);
                assert_eq!(total, 3 * round + 1000, "round {round}");
                assert_eq!(own, round * 2, "round returns the caller's result");
            }
        });
    }

    /// The helpers work on a started round while the caller is away: the caller sees
    /// their work done before it comes to `finish`, and joins no round they skipped.
    #[test]
    fn helpers_work_between_start_and_finish() {
        let crew = Crew::new(AtomicUsize::new(0));
        let work = |_: &mut (), job: &AtomicUsize| {
            job.fetch_add(1, Ordering::Relaxed);
        };
        std::thread::scope(|scope| {
            let _dismiss = Dismiss(&crew);
            crew.hire(scope, 2, || (), &work);
            for round in 1..=3usize {
                crew.start();
                let waited = std::time::Instant::now();
                while crew.job.read().unwrap().load(Ordering::Relaxed) < 2 * round {
                    assert!(
                        waited.elapsed() < std::time::Duration::from_secs(30),
                        "round {round}: the helpers did not work before finish"
                    );
                    std::thread::yield_now();
                }
                crew.finish(|_| ());
                assert_eq!(crew.job.read().unwrap().load(Ordering::Relaxed), 2 * round);
            }
        });
    }

    /// A round without helpers is the caller's work alone; the stop ends helpers that
    /// never got a round.
    #[test]
    fn rounds_without_helpers_and_a_stop_before_any_round() {
        let crew = Crew::new(AtomicUsize::new(0));
        crew.start();
        assert_eq!(
            crew.finish(|job| job.fetch_add(1, Ordering::Relaxed) + 1),
            1
        );
        let work = |_: &mut (), job: &AtomicUsize| {
            job.fetch_add(1, Ordering::Relaxed);
        };
        std::thread::scope(|scope| {
            let _dismiss = Dismiss(&crew);
            crew.hire(scope, 2, || (), &work);
        });
        assert_eq!(crew.job_mut().load(Ordering::Relaxed), 1);
    }

    /// A helper that panics is counted out: the round still returns, and the scope
    /// passes the panic on.
    #[test]
    fn a_panicking_helper_does_not_hang_the_round() {
        let crew = Crew::new(());
        let work = |own: &mut bool, _: &()| {
            if *own {
                panic!("helper failed");
            }
        };
        let flags = AtomicUsize::new(0);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            std::thread::scope(|scope| {
                let _dismiss = Dismiss(&crew);
                crew.hire(
                    scope,
                    2,
                    || flags.fetch_add(1, Ordering::Relaxed) == 0,
                    &work,
                );
                for _ in 0..2 {
                    crew.start();
                    crew.finish(|_| ());
                }
            });
        }));
        assert!(outcome.is_err());
    }
}
