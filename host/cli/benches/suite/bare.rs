//! The physical floor of a fresh-instance plugin call: the same component, an engine
//! configured as the host's for a plugin without a fuel limit (component model, epoch
//! interruption, pooling allocator sized as for the default `PluginHostConfig`),
//! pre-instantiated once; per call
//! a new Store with a bare WasiCtx, instantiate, call, drop. No limiter, no deadline
//! callback, no output capture, no classification, no registry.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use toolhost_plugin::engine::{
    PoolPlan, EPOCH_TICK, KEEP_RESIDENT_MEMORY, KEEP_RESIDENT_TABLE, WARM_SLOTS,
};
use toolhost_plugin::PluginHostConfig;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

mod bindings {
    wasmtime::component::bindgen!({
        world: "plugin",
        path: "../../wit/plugin.wit",
        exports: { default: async },
    });
}

use bindings::exports::toolhost::plugin::tools::Environment;
use bindings::toolhost::plugin::{config, files, interaction, log, registry, sampling, types};
use bindings::PluginPre;

/// What a bare store holds: WASI and nothing else.
pub(crate) struct BareState {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for BareState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for BareState {}

impl config::Host for BareState {
    fn get(&mut self, _key: String) -> Option<String> {
        None
    }
    fn keys(&mut self) -> Vec<String> {
        Vec::new()
    }
}

impl log::Host for BareState {
    fn log(&mut self, _level: log::Level, _message: String) {}
    fn progress(&mut self, _done: u64, _total: Option<u64>, _message: Option<String>) {}
}

impl interaction::Host for BareState {
    fn confirm(&mut self, message: String) -> Result<bool, interaction::InteractionError> {
        Err(interaction::InteractionError::Unsupported(message))
    }
    fn ask(
        &mut self,
        message: String,
        _schema: String,
    ) -> Result<Option<String>, interaction::InteractionError> {
        Err(interaction::InteractionError::Unsupported(message))
    }
}

// The benchmark's plugin never samples: the import is linked, and refuses.
impl sampling::Host for BareState {
    fn create_message(
        &mut self,
        _request: sampling::CreateMessageRequest,
    ) -> Result<sampling::CreateMessageResult, interaction::InteractionError> {
        Err(interaction::InteractionError::Unsupported(
            "no sampling in the benchmark".into(),
        ))
    }
}

// Nor calls tools: the import is linked, lists none and refuses.
impl registry::Host for BareState {
    fn definitions(&mut self) -> Vec<types::ToolDefinition> {
        Vec::new()
    }
    fn call(&mut self, name: String, _arguments: String) -> Result<String, types::ToolError> {
        Err(types::ToolError::Failed(format!(
            "{name} is not granted in the benchmark"
        )))
    }
}

impl files::Host for BareState {
    fn read(&mut self, path: String) -> Result<files::File, files::FileError> {
        Err(files::FileError::Denied(path))
    }
    fn list(&mut self) -> Result<Vec<files::FileInfo>, files::FileError> {
        Err(files::FileError::Denied(String::new()))
    }
    fn write(
        &mut self,
        path: String,
        _content: Vec<u8>,
        _content_type: Option<String>,
    ) -> Result<(), files::FileError> {
        Err(files::FileError::Denied(path))
    }
    fn delete(&mut self, path: String) -> Result<(), files::FileError> {
        Err(files::FileError::Denied(path))
    }
}

/// How the pooling allocator resets a slot when an instance is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reset {
    /// As the host does: keep up to 2 MiB of each memory (64 KiB of each table) resident
    /// and reset only the dirty pages, found with Linux's `PAGEMAP_SCAN` ioctl (6.7+;
    /// `Enabled::Auto` falls back where it is missing); at most `WARM_SLOTS` warm slots.
    Host,
    /// wasmtime's default, for reference: `madvise(DONTNEED)` of the linear memory and
    /// tables, so every call page-faults its memory back in, and every reset flushes the
    /// TLB of the other cores running the process (an IPI; a VM exit here).
    Madvise,
}

/// A component ready to be instantiated in fresh stores.
pub(crate) struct Bare {
    engine: Engine,
    pre: PluginPre<BareState>,
    env: Environment,
}

impl Bare {
    /// Compiles `wasm` for an engine configured like the host's.
    pub(crate) fn new(wasm: &Path, reset: Reset) -> Result<Self> {
        let engine = Engine::new(&host_like_config(reset)).map_err(|e| anyhow!("engine: {e}"))?;
        start_ticker(&engine);
        let component = Component::from_file(&engine, wasm)
            .map_err(|e| anyhow!("compiling {}: {e}", wasm.display()))?;
        let mut linker = Linker::<BareState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| anyhow!("{e}"))?;
        bindings::Plugin::add_to_linker::<BareState, HasSelf<BareState>>(&mut linker, |s| s)
            .map_err(|e| anyhow!("{e}"))?;
        let pre = linker
            .instantiate_pre(&component)
            .and_then(PluginPre::new)
            .map_err(|e| anyhow!("pre-instantiating {}: {e}", wasm.display()))?;
        Ok(Bare {
            engine,
            pre,
            env: Environment {
                session_id: "bench-session".into(),
                turn_id: "bench-turn".into(),
            },
        })
    }

    /// One call on a fresh instance: new store, instantiate, call `tool`, drop.
    pub(crate) async fn call(&self, tool: &str, arguments: &str) -> Result<String> {
        let wasi = WasiCtxBuilder::new().build();
        let mut store = Store::new(
            &self.engine,
            BareState {
                wasi,
                table: ResourceTable::new(),
            },
        );
        store.set_epoch_deadline(1_000_000);
        let plugin = self
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| anyhow!("instantiate: {e}"))?;
        let out = plugin
            .toolhost_plugin_tools()
            .call_call(&mut store, tool, arguments, &self.env)
            .await
            .map_err(|e| anyhow!("call: {e}"))?;
        drop(store);
        // A plain (0.3.0) result is its JSON as `structured`, with no blocks.
        out.map(|result| result.structured.unwrap_or_default())
            .map_err(|e| anyhow!("the guest returned an error: {e:?}"))
            .context("bare call")
    }
}

/// `host/toolhost-plugin/src/engine.rs::build` with the default `PluginHostConfig`, rebuilt from
/// its public `PoolPlan` and constants (the host's function is private: keep this in
/// step with it),
/// with `reset` as the slot reset.
fn host_like_config(reset: Reset) -> Config {
    let mut wasm = Config::new();
    wasm.wasm_component_model(true).epoch_interruption(true);
    let plan = PoolPlan::for_config(&PluginHostConfig::builder().cache_dir(None).build())
        .expect("the default pool fits");
    let (instances, memory) = (plan.slots, plan.slot_memory);
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(instances)
        .total_core_instances(instances * 8)
        .total_memories(instances)
        .total_tables(instances * 8)
        .total_stacks(instances)
        .max_memory_size(usize::try_from(memory).unwrap_or(usize::MAX));
    if reset == Reset::Host {
        pool.linear_memory_keep_resident(KEEP_RESIDENT_MEMORY)
            .table_keep_resident(KEEP_RESIDENT_TABLE)
            .pagemap_scan(wasmtime::Enabled::Auto)
            .max_unused_warm_slots(WARM_SLOTS.min(instances));
    }
    wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    wasm
}

/// The same epoch ticker as the host's, so both engines see the same interruptions.
fn start_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::spawn(move || loop {
        std::thread::sleep(EPOCH_TICK);
        match weak.upgrade() {
            Some(engine) => engine.increment_epoch(),
            None => break,
        }
    });
}
