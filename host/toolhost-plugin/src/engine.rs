//! The wasmtime [`Engine`]: epoch interruption, fuel metering, the pooling allocator, and
//! the ticker thread that advances the epoch.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::{PluginError, PluginErrorKind, PluginHostConfig};

/// How often the epoch advances. A running guest checks its deadline at every tick, so
/// a CPU-bound guest is stopped at most one tick after its deadline, and yields to the
/// async runtime once per tick (so other tasks on its thread keep running).
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The largest linear memory a 32-bit wasm memory can have; pooling slots never need
/// more.
const MAX_WASM32_MEMORY: u64 = 4 * 1024 * 1024 * 1024;

/// Core instances per component instance the pool is sized for. A Rust `wasm32-wasip2`
/// component instantiates about 4; the per-store limit (`max_instances`) is the real
/// cap, this only sizes the shared pool.
const CORE_INSTANCES_PER_COMPONENT: u32 = 8;

/// Bytes of each linear memory kept resident between instances in a pool slot.
pub const KEEP_RESIDENT_MEMORY: usize = 2 << 20;
/// Bytes of each table kept resident between instances in a pool slot.
pub const KEEP_RESIDENT_TABLE: usize = 64 << 10;
/// Freed pool slots kept warm (with their resident pages); more are fully released.
pub const WARM_SLOTS: u32 = 16;

/// How the instance pool is sized: its slots, the memory each may hold, and the calls
/// that may run at once. [`PluginHost::pool`](super::PluginHost::pool) returns it; the
/// host states it in its log at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolPlan {
    /// Instance (and linear memory) slots in the pool.
    pub slots: u32,
    /// The most linear memory one slot may hold: the larger of the default and maximum
    /// memory limits.
    pub slot_memory: u64,
    /// `slots x slot_memory`: the most memory pooled plugin instances may hold at once.
    pub total_memory: u64,
    /// Calls that may run at once across all plugins (at most
    /// [`PluginHostConfig::max_concurrent_calls`]).
    pub concurrent_calls: u32,
}

impl PoolPlan {
    /// The pool for `config`.
    ///
    /// # Errors
    /// [`PluginErrorKind::Host`] when not even one call fits
    /// [`PluginHostConfig::max_pool_memory`].
    pub fn for_config(config: &PluginHostConfig) -> Result<Self, PluginError> {
        use super::format_bytes;
        let slot_memory = config
            .max_limits
            .memory_bytes
            .max(config.default_limits.memory_bytes)
            .min(MAX_WASM32_MEMORY);
        // A running call holds one slot (its store is dropped before its concurrency
        // permit, and loading asks for definitions under the same permits). Reuse mode
        // also keeps up to one idle instance per call (runtime::Shared::idle_cap).
        let slots_per_call: u32 = if config.fresh_instance_per_call { 1 } else { 2 };
        let per_call = slot_memory.saturating_mul(u64::from(slots_per_call));
        let fit = config.max_pool_memory / per_call.max(1);
        if fit == 0 {
            let slots = if slots_per_call == 1 {
                format!("1 slot of {}", format_bytes(slot_memory))
            } else {
                format!("{slots_per_call} slots of {}", format_bytes(slot_memory))
            };
            return Err(PluginError::from(PluginErrorKind::Host { message: format!(
                    "one plugin call needs {} of pooled memory ({slots}), above the pool's cap of {}; raise the cap (--plugin-pool-memory, PluginHostConfig::max_pool_memory) or lower the plugins' maximum memory (--plugin-max-memory)",
                    format_bytes(per_call),
                    format_bytes(config.max_pool_memory)
                ) }));
        }
        let calls = config
            .max_concurrent_calls
            .max(1)
            .min(u32::try_from(fit).unwrap_or(u32::MAX));
        let slots = calls.saturating_mul(slots_per_call);
        Ok(Self {
            slots,
            slot_memory,
            total_memory: u64::from(slots).saturating_mul(slot_memory),
            concurrent_calls: calls,
        })
    }
}

/// Builds the engine for `config` (for tests; the host computes the [`PoolPlan`] itself,
/// logs it and calls [`build_with`]).
///
/// # Errors
/// As [`PoolPlan::for_config`] and [`build_with`].
#[cfg(test)]
pub(crate) fn build(config: &PluginHostConfig) -> Result<Engine, PluginError> {
    build_with(&PoolPlan::for_config(config)?)
}

/// Builds the engine with its pool sized by `plan`.
///
/// Fuel metering is always compiled in (a plugin without a fuel limit gets `u64::MAX`),
/// so a manifest can ask for a fuel limit whatever the host's defaults are; it costs a
/// few percent on guest code and nothing measurable per call.
///
/// # Errors
/// [`PluginErrorKind::Host`] when wasmtime refuses the configuration.
pub(crate) fn build_with(plan: &PoolPlan) -> Result<Engine, PluginError> {
    let mut wasm = Config::new();
    wasm.wasm_component_model(true)
        .epoch_interruption(true)
        .consume_fuel(true);

    // Slots for every call that may run at once (and, in reuse mode, as many again for
    // idle instances): see `PoolPlan`. Each memory slot reserves 4 GiB of address space
    // (so wasm needs no bounds checks) plus guards, none of it resident until used; what
    // a slot may actually hold is `plan.slot_memory`, and `plan.total_memory` is bounded
    // by `PluginHostConfig::max_pool_memory`. A Rust component has one memory, so one
    // memory slot per instance slot.
    let instances = plan.slots;
    let memory = plan.slot_memory;
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(instances)
        .total_core_instances(instances.saturating_mul(CORE_INSTANCES_PER_COMPONENT))
        .total_memories(instances)
        .total_tables(instances.saturating_mul(CORE_INSTANCES_PER_COMPONENT))
        .total_stacks(instances)
        .max_memory_size(usize::try_from(memory).unwrap_or(usize::MAX))
        // Reset a freed slot by rewriting only its dirty pages (Linux PAGEMAP_SCAN, 6.7+;
        // `Auto` falls back elsewhere) and keep its first pages resident, instead of
        // wasmtime's default `madvise(DONTNEED)` of the whole memory. The default makes
        // every fresh instance fault its pages back in and every reset flush the TLB of
        // the other cores, so concurrent calls did not scale past one core (c2/c1 was 0.99
        // in the benchmark; 1.9 with this). Warm slots are capped so the memory this keeps
        // resident stays bounded: at most WARM_SLOTS x (2 MiB + 64 KiB).
        .linear_memory_keep_resident(KEEP_RESIDENT_MEMORY)
        .table_keep_resident(KEEP_RESIDENT_TABLE)
        .pagemap_scan(wasmtime::Enabled::Auto)
        .max_unused_warm_slots(WARM_SLOTS.min(instances));
    wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));

    Engine::new(&wasm).map_err(|err| {
        PluginError::from(PluginErrorKind::Host {
            message: format!(
                "wasmtime refused the engine configuration: {}",
                super::error::error_chain(&err)
            ),
        })
    })
}

/// Starts the thread that advances `engine`'s epoch every [`EPOCH_TICK`]. It holds only
/// a weak reference and ends once the engine (and every component compiled with it) is
/// dropped.
///
/// # Errors
/// [`PluginErrorKind::Host`] when the thread cannot be spawned.
pub(crate) fn start_ticker(engine: &Engine) -> Result<(), PluginError> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("plugin-epoch".into())
        .spawn(move || loop {
            std::thread::sleep(EPOCH_TICK);
            match weak.upgrade() {
                Some(engine) => engine.increment_epoch(),
                None => break,
            }
        })
        .map(drop)
        .map_err(|err| {
            PluginError::from(PluginErrorKind::Host {
                message: format!("cannot start the epoch ticker thread: {err}"),
            })
        })
}

/// A digest of everything that makes a compiled artifact usable by `engine`: the
/// wasmtime version, target, compiler flags and tunables (wasmtime's
/// `precompile_compatibility_hash`), plus this host's cache format version.
pub(crate) fn fingerprint(engine: &Engine) -> [u8; 32] {
    struct Sha(Sha256);
    impl Hasher for Sha {
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
        fn finish(&self) -> u64 {
            0
        }
    }
    let mut sha = Sha(Sha256::new());
    sha.0.update(b"wasm-toolhost plugin cache v1\0");
    engine.precompile_compatibility_hash().hash(&mut sha);
    sha.0.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_stable_and_follows_the_config() {
        let config = PluginHostConfig {
            cache_dir: None,
            ..PluginHostConfig::default()
        };
        let a = build(&config).unwrap();
        let b = build(&config).unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        let other = Engine::new(&Config::new()).unwrap();
        assert_ne!(fingerprint(&a), fingerprint(&other));
    }
}
