//! The wasmtime [`Engine`]: epoch interruption, fuel metering, the pooling allocator, and
//! the ticker thread that advances the epoch.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::{PluginError, PluginHostConfig};

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

/// Builds the engine for `config`.
///
/// Fuel metering is always compiled in (a plugin without a fuel limit gets `u64::MAX`),
/// so a manifest can ask for a fuel limit whatever the host's defaults are; it costs a
/// few percent on guest code and nothing measurable per call.
///
/// # Errors
/// [`PluginError::Host`] when wasmtime refuses the configuration.
pub fn build(config: &PluginHostConfig) -> Result<Engine, PluginError> {
    let mut wasm = Config::new();
    wasm.wasm_component_model(true)
        .epoch_interruption(true)
        .consume_fuel(true);

    // Slots for every call that may run at once, and as many again for instances kept
    // by reuse mode and for the definitions calls made while loading. Each memory slot
    // reserves 4 GiB of address space (so wasm needs no bounds checks) plus guards: about
    // 0.5 TiB of virtual memory for the default 64 calls, none of it resident until used.
    // A Rust component has one memory, so one memory slot per instance slot.
    let instances = config.max_concurrent_calls.max(1).saturating_mul(2);
    let memory = config
        .max_limits
        .memory_bytes
        .max(config.default_limits.memory_bytes)
        .min(MAX_WASM32_MEMORY);
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

    Engine::new(&wasm).map_err(|err| PluginError::Host {
        message: format!(
            "wasmtime refused the engine configuration: {}",
            super::error::error_chain(&err)
        ),
    })
}

/// Starts the thread that advances `engine`'s epoch every [`EPOCH_TICK`]. It holds only
/// a weak reference and ends once the engine (and every component compiled with it) is
/// dropped.
///
/// # Errors
/// [`PluginError::Host`] when the thread cannot be spawned.
pub fn start_ticker(engine: &Engine) -> Result<(), PluginError> {
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
        .map_err(|err| PluginError::Host {
            message: format!("cannot start the epoch ticker thread: {err}"),
        })
}

/// A digest of everything that makes a compiled artifact usable by `engine`: the
/// wasmtime version, target, compiler flags and tunables (wasmtime's
/// `precompile_compatibility_hash`), plus this host's cache format version.
pub fn fingerprint(engine: &Engine) -> [u8; 32] {
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
