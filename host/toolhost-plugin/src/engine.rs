//! The wasmtime [`Engine`]s: epoch interruption, fuel metering where a plugin's limits
//! ask for it, the pooling allocator, and the ticker thread that advances the epoch.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::Linker;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::state::PluginState;
use super::{PluginError, PluginErrorKind, PluginHostConfig};

/// One engine and its linker: a shard of a backend ([`engine_shards`] of them), on which
/// a call's instance is made.
pub(crate) struct Shard {
    pub engine: Engine,
    pub linker: Linker<PluginState>,
}

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
        use toolhost::registry::format_bytes;
        let slot_memory = config
            .max_limits
            .memory_bytes
            .max(config.default_limits.memory_bytes)
            .min(MAX_WASM32_MEMORY);
        // A running call holds one slot (its store is dropped before its concurrency
        // permit, and loading asks for definitions under the same permits). Reuse mode
        // also keeps up to one idle instance per call (`runtime::pool::IdleCount`).
        // A plugin allowed to call tools (`--plugin-tools`) runs a nested plugin call
        // inside its own concurrency slot, one at a time: one more instance per call.
        let nested = u32::from(config.plugin_tools.is_some());
        let slots_per_call: u32 = if config.fresh_instance_per_call { 1 } else { 2 } + nested;
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

/// Whether an engine's code counts fuel.
///
/// Fuel metering is compiled into the code (a check on every loop back-edge and call),
/// which makes a component ~35 % slower to compile (measured on the five example plugins:
/// 626 ms of Cranelift CPU time with epoch checks only, 860 ms with fuel too) and its
/// code a few percent slower. Only a plugin whose limits set a fuel limit needs it, so the
/// host compiles every other plugin on a [`Metering::EpochOnly`] engine, and builds a
/// second, [`Metering::Fuel`] engine the first time a plugin asks for fuel. The wall-time
/// limit (epoch interruption) is in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metering {
    /// Epoch interruption only: the call's wall-time limit.
    EpochOnly,
    /// Epoch interruption and fuel metering: for plugins with a fuel limit.
    Fuel,
}

impl Metering {
    /// The metering a plugin with these limits needs.
    pub fn for_limits(limits: &super::PluginLimits) -> Self {
        if limits.fuel.is_some() {
            Metering::Fuel
        } else {
            Metering::EpochOnly
        }
    }
}

/// Most engines of one kind a host builds ([`engine_shards`]).
pub(crate) const MAX_ENGINE_SHARDS: usize = 8;

/// How many engines of one kind the host runs calls on: one per core (at most
/// [`MAX_ENGINE_SHARDS`]).
///
/// Each engine has its own instance pool. With one engine, concurrent fresh-instance
/// calls on different cores contend for the pool's slot allocator (one lock) and get
/// each other's freshly freed slots, whose pages sit in the other core's cache; on a
/// 2-core Intel VM that made greet calls take 40 % more CPU each at 2 calls at once than
/// at 1 (c2/c1 1.2-1.3, bare wasmtime alike), while one engine per core kept the cost
/// flat and scaled 2.0. A call starts on the engine with the fewest calls running
/// (`runtime::shard::ShardLoads::enter_least_busy`), so each core keeps to its own pool.
/// Each plugin is compiled once and its artifact loaded into every engine.
pub(crate) fn engine_shards() -> usize {
    std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, MAX_ENGINE_SHARDS)
}

/// Builds the engine for `config` (for tests; the host computes the [`PoolPlan`] itself,
/// logs it and calls [`build_with`]).
///
/// # Errors
/// As [`PoolPlan::for_config`] and [`build_with`].
#[cfg(test)]
pub(crate) fn build(config: &PluginHostConfig, metering: Metering) -> Result<Engine, PluginError> {
    build_with(&PoolPlan::for_config(config)?, metering, 1)
}

/// Builds an engine with its pool sized by `plan`, counting fuel if `metering` says so,
/// as one of `shards` engines of its kind.
///
/// A host may hold `shards` engines of each kind, each with a pool of `plan.slots`:
/// calls on all of them together are still bounded by the one concurrency limit (a call
/// holds a permit of `runtime::Shared::slots` while it holds a pool slot), so the memory
/// they hold at once stays within `plan.total_memory`; only address space is reserved
/// once per engine. The warm slots ([`WARM_SLOTS`]) are divided between the shards, so
/// the memory kept resident stays within the same bound.
///
/// Compilation runs on every core ([`code_config`]).
///
/// # Errors
/// [`PluginErrorKind::Host`] when wasmtime refuses the configuration.
pub(crate) fn build_with(
    plan: &PoolPlan,
    metering: Metering,
    shards: usize,
) -> Result<Engine, PluginError> {
    let mut wasm = code_config(metering);

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
        // resident stays bounded: at most max(WARM_SLOTS, 4 x shards) x (2 MiB + 64 KiB)
        // over all shards.
        .linear_memory_keep_resident(KEEP_RESIDENT_MEMORY)
        .table_keep_resident(KEEP_RESIDENT_TABLE)
        .pagemap_scan(wasmtime::Enabled::Auto)
        .max_unused_warm_slots(warm_slots_per_shard(shards).min(instances));
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

/// What every engine of `metering` compiles alike: the component model, epoch checks,
/// fuel checks when metered, and compilation on every core (wasmtime's
/// `parallel-compilation`: the functions of a module are compiled on rayon's pool).
fn code_config(metering: Metering) -> Config {
    let mut wasm = Config::new();
    wasm.wasm_component_model(true)
        .epoch_interruption(true)
        .consume_fuel(metering == Metering::Fuel)
        .parallel_compilation(true);
    wasm
}

/// Builds the engine that compiles the quick first tier of
/// [`CompileTiers::QuickFirst`](super::CompileTiers::QuickFirst): the code of
/// [`build_with`]'s engines for `metering` (the same checks, features and tunables),
/// with Cranelift's optimizer off (`opt_level` none) and its single-pass register
/// allocator. On the five example plugins that compiles in about half the CPU time, and
/// the code runs up to about twice as slow (docs/benchmarks.md, figure 5).
///
/// It only compiles (no instance pool): its artifacts are loaded into the pooled
/// engines with [`crate::cache::deserialize`], which wasmtime allows because neither
/// setting changes what the code does or how it is called (`opt_level` and
/// `regalloc_algorithm` are among the flags its compatibility check ignores).
///
/// # Errors
/// [`PluginErrorKind::Host`] when wasmtime refuses the configuration.
pub(crate) fn build_quick(metering: Metering) -> Result<Engine, PluginError> {
    let mut wasm = code_config(metering);
    wasm.cranelift_opt_level(wasmtime::OptLevel::None)
        .cranelift_regalloc_algorithm(wasmtime::RegallocAlgorithm::SinglePass);
    Engine::new(&wasm).map_err(|err| {
        PluginError::from(PluginErrorKind::Host {
            message: format!(
                "wasmtime refused the quick compile engine's configuration: {}",
                super::error::error_chain(&err)
            ),
        })
    })
}

/// Warm slots each of `shards` engines keeps: [`WARM_SLOTS`] shared out (at least 4 each).
pub(crate) fn warm_slots_per_shard(shards: usize) -> u32 {
    let shards = u32::try_from(shards.max(1)).unwrap_or(u32::MAX);
    (WARM_SLOTS / shards).max(4)
}

/// Starts the thread that advances the epoch of `engines` every [`EPOCH_TICK`]. It holds
/// only weak references and ends once every engine (and every component compiled with
/// it) is dropped.
///
/// # Errors
/// [`PluginErrorKind::Host`] when the thread cannot be spawned.
pub(crate) fn start_ticker(engines: &[&Engine]) -> Result<(), PluginError> {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if let Some(policy) = realtime_policy() {
        WARNED.call_once(|| {
            tracing::warn!(
                target: "plugin",
                "the host runs at a real-time priority ({policy}): plugin time limits need the epoch ticker thread, which has the same priority, and runaway plugins on every core starve it, so no call would time out; start the host under normal scheduling (without chrt -f/-r)"
            );
        });
    }
    let weak: Vec<_> = engines.iter().map(|engine| engine.weak()).collect();
    std::thread::Builder::new()
        .name("plugin-epoch".into())
        .spawn(move || loop {
            std::thread::sleep(EPOCH_TICK);
            let mut alive = false;
            for engine in weak.iter().filter_map(|weak| weak.upgrade()) {
                engine.increment_epoch();
                alive = true;
            }
            if !alive {
                break;
            }
        })
        .map(drop)
        .map_err(|err| {
            PluginError::from(PluginErrorKind::Host {
                message: format!("cannot start the epoch ticker thread: {err}"),
            })
        })
}

/// The process's scheduling policy when it is a real-time one (`SCHED_FIFO`, `SCHED_RR`),
/// from `/proc/self/stat`; `None` for the others or where that file does not exist.
fn realtime_policy() -> Option<&'static str> {
    realtime_policy_in(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// The real-time policy a `/proc/PID/stat` line names (field 41), if any.
fn realtime_policy_in(stat: &str) -> Option<&'static str> {
    // The command name (field 2) may hold spaces and parentheses: count from its last
    // `)`. Field 3 is then the first, so field 41 is the 39th.
    let policy = stat.rsplit_once(')')?.1.split_whitespace().nth(38)?;
    match policy {
        "1" => Some("SCHED_FIFO"),
        "2" => Some("SCHED_RR"),
        _ => None,
    }
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
    fn realtime_policies_are_read_from_field_41_whatever_the_command_name() {
        // Fields 3 to 52 of a real line (kernel 6.18), policy (field 41) set to {}.
        let line = |name: &str, policy: u8| {
            let mut fields: Vec<String> = "R 11922 11922 26924 0 -1 4194304 132 0 0 0 0 0 0 0 20 0 1 0 4261585 3133440 410 18446744073709551615 93933424549888 93933424569769 140724178851904 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 93933424585776 93933424587392 93933463195648 140724178860770 140724178860790 140724178860790 140724178862059 0"
                .split(' ')
                .map(str::to_owned)
                .collect();
            fields[38] = policy.to_string();
            format!("4242 ({name}) {}", fields.join(" "))
        };
        assert_eq!(realtime_policy_in(&line("host", 0)), None);
        assert_eq!(realtime_policy_in(&line("host", 1)), Some("SCHED_FIFO"));
        assert_eq!(realtime_policy_in(&line("host", 2)), Some("SCHED_RR"));
        assert_eq!(realtime_policy_in(&line("host", 3)), None, "SCHED_BATCH");
        assert_eq!(
            realtime_policy_in(&line("a) 0 1 (b", 1)),
            Some("SCHED_FIFO"),
            "a command name with ') ' in it"
        );
        assert_eq!(realtime_policy_in("4242 (host) S 1"), None, "cut short");
        // This test process runs under normal scheduling.
        assert_eq!(realtime_policy(), None);
    }

    #[test]
    fn fingerprint_is_stable_and_follows_the_config() {
        let config = PluginHostConfig {
            cache_dir: None,
            ..PluginHostConfig::default()
        };
        let a = build(&config, Metering::EpochOnly).unwrap();
        let b = build(&config, Metering::EpochOnly).unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        let other = Engine::new(&Config::new()).unwrap();
        assert_ne!(fingerprint(&a), fingerprint(&other));
        // Code compiled with fuel checks never serves an engine without them, and back.
        let fuel = build(&config, Metering::Fuel).unwrap();
        assert_ne!(fingerprint(&a), fingerprint(&fuel));
        assert_eq!(
            fingerprint(&fuel),
            fingerprint(&build(&config, Metering::Fuel).unwrap())
        );
    }
}
