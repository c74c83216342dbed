//! The instance pool of reuse mode (`fresh_instance_per_call = false`): a store with its
//! instance, kept idle after a call that returned cleanly, up to [`IDLE_PER_PLUGIN`] per
//! plugin and a host-wide cap, so idle and running instances fit the pooling allocator.
//! A call takes an idle instance only on the shard it is counted on (the least busy), so
//! reuse never puts two calls on one shard while another has fewer.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use wasmtime::Store;

use super::shard::{ShardGuard, ShardLoads};
use crate::output::Capture;
use crate::state::PluginState;
use crate::world::Bound;

/// Idle instances kept per plugin in reuse mode.
const IDLE_PER_PLUGIN: usize = 8;

/// A store with (once instantiated) the plugin in it.
pub(crate) struct Instance {
    /// The engine shard the store belongs to.
    pub shard: usize,
    /// Whether it runs (or will instantiate) the optimized code that replaced the code
    /// the plugin was loaded with.
    pub optimized: bool,
    pub store: Store<PluginState>,
    pub plugin: Option<Bound>,
    pub stdout: Capture,
    pub stderr: Capture,
}

/// Idle instances kept across all plugins of one host, and their cap.
#[derive(Debug)]
pub(crate) struct IdleCount {
    total: AtomicU32,
    cap: u32,
}

impl IdleCount {
    /// None idle yet; at most `cap`.
    pub(crate) fn new(cap: u32) -> Self {
        Self {
            total: AtomicU32::new(0),
            cap,
        }
    }

    /// Idle instances kept now.
    pub(crate) fn get(&self) -> u32 {
        self.total.load(Ordering::Relaxed)
    }
}

/// One plugin's idle instances.
#[derive(Default)]
pub(crate) struct Idle(Mutex<Vec<Instance>>);

impl Idle {
    /// Counts a call on the least busy of the first `shards` of `loads` (on a tie, one
    /// where an idle instance waits: [`ShardLoads::enter_least_busy`]) and takes an idle
    /// instance on that shard, the one kept last, if there is one. The shard is chosen
    /// under this plugin's idle lock, so the instance cannot be taken by another call
    /// meanwhile.
    pub(crate) fn take<'l>(
        &self,
        count: &IdleCount,
        loads: &'l ShardLoads,
        shards: usize,
    ) -> (ShardGuard<'l>, Option<Instance>) {
        let mut idle = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let guard = loads.enter_least_busy(shards, |shard| {
            idle.iter().any(|instance| instance.shard == shard)
        });
        let kept = idle
            .iter()
            .rposition(|instance| instance.shard == guard.shard());
        let instance = kept.map(|at| idle.remove(at));
        drop(idle);
        if instance.is_some() {
            count.total.fetch_sub(1, Ordering::Relaxed);
        }
        (guard, instance)
    }

    /// Keeps `instance` when there is room, unless it runs the code the plugin was
    /// loaded with and `runs_optimized` (asked under the lock [`drop_unoptimized`]
    /// takes) says optimized code has replaced it.
    ///
    /// [`drop_unoptimized`]: Self::drop_unoptimized
    pub(crate) fn put(
        &self,
        instance: Instance,
        count: &IdleCount,
        runs_optimized: impl FnOnce() -> bool,
    ) {
        let mut idle = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() >= IDLE_PER_PLUGIN || (!instance.optimized && runs_optimized()) {
            return;
        }
        if count.total.fetch_add(1, Ordering::Relaxed) >= count.cap {
            count.total.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        idle.push(instance);
    }

    /// Drops the idle instances of the code the plugin was loaded with (optimized code
    /// was swapped in).
    pub(crate) fn drop_unoptimized(&self, count: &IdleCount) {
        let mut idle = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let before = idle.len();
        idle.retain(|instance| instance.optimized);
        let dropped = u32::try_from(before - idle.len()).unwrap_or(u32::MAX);
        count.total.fetch_sub(dropped, Ordering::Relaxed);
    }
}
