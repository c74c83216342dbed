//! Running a plugin: a store per call (or a reused one) under the plugin's limits.
//!
//! One job per file: this one runs a call (slot, instance, deadline, guest, outcome);
//! [`shard`] picks the engine shard, [`code`] holds the plugin's code and its compile
//! tiers, [`pool`] the idle instances of reuse mode, [`log`] redacts and logs the
//! guest's output, and [`handler`] is the registry [`Handler`](toolhost::registry::Handler)
//! each tool is registered with. Calling a given world's exports is
//! [`crate::world`]'s job.
//!
//! Every call: waits for a slot (at most `max_concurrent_calls` run at once), takes a
//! fresh store and instance from the cached `InstancePre` on the least busy engine
//! shard (or an idle one there in reuse mode), arms the deadline (epoch callback: trap
//! at the deadline, yield to the async runtime at every tick before it; plus a timer for
//! a guest waiting in the host), fuel and limiter, runs the guest, logs its
//! stdout/stderr, and classifies the outcome ([`super::classify`]).
//!
//! The deadline also covers the host's imports: `files` calls run on the blocking pool
//! and the guest awaits them, so the call's timer fires even while a storage call hangs
//! (the call is answered `TimedOut`; the storage call finishes in the background and its
//! result is dropped). Each plugin has one [`PluginMeter`] for all its calls: its
//! lifetime write totals and its log rate limit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::error::Elapsed;
use wasmtime::{Engine, Store, UpdateDeadline};

use toolhost::registry::{Arguments, CallContext, Environment, StepKind, ToolError, ToolResult};

use crate::classify::{self, CallFacts};
use crate::host::file_grant::FileGrant;
use crate::host::quota::PluginMeter;
use crate::output::Captured;
use crate::state::{Grants, NewState, PluginState};
use crate::v0_2::exports::toolhost::plugin::tools::ToolDefinition as WitDefinition;
use crate::world::Bound;
use crate::PluginLimits;

mod catalog;
mod code;
mod handler;
mod log;
mod pool;
mod shard;

pub(crate) use code::ShardPres;
use code::Tiers;
pub(crate) use handler::PluginTool;
use pool::{Idle, IdleCount, Instance};
use shard::{ShardGuard, ShardLoads};

/// State shared by every plugin of one host.
#[derive(Debug)]
pub(crate) struct Shared {
    /// One permit per call allowed to run at once.
    pub slots: Semaphore,
    /// One permit per plugin storage call allowed on the blocking pool at once, as many
    /// as calls may run. A call answered `TimedOut` while its storage call is still
    /// running leaves that storage call to finish in the background (its result is
    /// dropped) still holding its permit, so calls that time out in a hung storage cannot
    /// pile up blocking threads without bound: once every permit is held, further plugin
    /// file calls wait, and time out at their own deadline. Built-in tools are not held
    /// by it.
    pub io: Arc<Semaphore>,
    /// A fresh instance for every call (no reuse).
    pub fresh: bool,
    /// Idle instances kept across all plugins (reuse mode), capped so idle and running
    /// instances fit the pooling allocator.
    idle: IdleCount,
    /// Calls running on each engine shard ([`crate::engine::engine_shards`]).
    shards: ShardLoads,
}

impl Shared {
    /// Shared state for `max_calls` concurrent calls on `shards` engine shards.
    pub(crate) fn new(max_calls: u32, fresh: bool, shards: usize) -> Self {
        Self {
            slots: Semaphore::new(max_calls.max(1) as usize),
            io: Arc::new(Semaphore::new(max_calls.max(1) as usize)),
            fresh,
            idle: IdleCount::new(max_calls),
            shards: ShardLoads::new(shards),
        }
    }

    /// Idle instances kept now, over all plugins.
    pub(crate) fn idle(&self) -> u32 {
        self.idle.get()
    }

    /// Calls running on each shard now (for tests).
    #[cfg(test)]
    pub(crate) fn running_per_shard(&self) -> Vec<u32> {
        self.shards.running()
    }
}

/// One loaded plugin: its pre-instantiated component and everything a call needs.
pub(crate) struct PluginRuntime {
    /// The plugin's name (the file stem).
    pub name: Arc<str>,
    /// The engine of each shard, in shard order.
    engines: Box<[Engine]>,
    /// The code it was loaded with, and the optimized code once swapped in for it.
    code: Tiers,
    /// The limits every call runs under.
    pub limits: PluginLimits,
    files: Arc<FileGrant>,
    grants: Grants,
    meter: Arc<PluginMeter>,
    shared: Arc<Shared>,
    idle: Idle,
}

/// A call that holds its slot, its instance (armed for the call) and its place in its
/// shard's load. Fields drop in order: the shard's count, the instance (its pool slot
/// back to the allocator), then the call's slot, so a call let in by the slot finds a
/// free pool slot.
struct Running<'r> {
    _shard: ShardGuard<'r>,
    instance: Instance,
    /// `None` for a nested call, which runs inside its caller's slot.
    _slot: Option<SemaphorePermit<'r>>,
    tool: &'r str,
    time_limit: Duration,
    deadline: Instant,
}

impl Running<'_> {
    /// The instance's plugin, instantiated from `code` on first use, and its store.
    async fn plugin(
        &mut self,
        code: &Tiers,
    ) -> wasmtime::Result<(&Bound, &mut Store<PluginState>)> {
        let Instance {
            shard,
            optimized,
            store,
            plugin,
            ..
        } = &mut self.instance;
        let plugin = match plugin {
            Some(plugin) => plugin,
            None => plugin.insert(
                code.pre(*shard, *optimized)?
                    .instantiate(&mut *store)
                    .await?,
            ),
        };
        Ok((plugin, store))
    }
}

impl PluginRuntime {
    /// A runtime for a component pre-instantiated in the engine shards of `shards`.
    pub(crate) fn new(
        name: Arc<str>,
        shards: ShardPres,
        limits: PluginLimits,
        files: Arc<FileGrant>,
        grants: Grants,
        shared: Arc<Shared>,
    ) -> Self {
        let mut shards = shards;
        let engines = std::mem::take(&mut shards.engines);
        let code = Tiers::new(shards, engines.len());
        Self {
            meter: Arc::new(PluginMeter::new(Arc::clone(&name), limits.imports.clone())),
            name,
            engines: engines.into_boxed_slice(),
            code,
            limits,
            files,
            grants,
            shared,
            idle: Idle::default(),
        }
    }

    /// Asks the plugin for its tool definitions, under its limits.
    ///
    /// # Errors
    /// The classified failure (trap, timeout, limit).
    pub(crate) async fn definitions(&self) -> Result<Vec<WitDefinition>, ToolError> {
        let mut running = self.start("", &CallContext::new()).await?;
        let outcome = tokio::time::timeout_at(running.deadline.into(), async {
            let (plugin, store) = running.plugin(&self.code).await?;
            plugin.definitions(store).await
        })
        .await;
        self.finish(running, outcome)
    }

    /// Runs tool `name` with `arguments`.
    ///
    /// # Errors
    /// See [`super::classify`].
    pub(crate) async fn call(
        &self,
        name: &str,
        ctx: &CallContext,
        arguments: &Arguments,
        env: &Environment,
    ) -> Result<ToolResult, ToolError> {
        let started = Instant::now();
        let result = match self.start(name, ctx).await {
            Ok(mut running) => {
                let record = ctx.record();
                let outcome = tokio::time::timeout_at(running.deadline.into(), async {
                    let Some(record) = record else {
                        let (plugin, store) = running.plugin(&self.code).await?;
                        return plugin.call(store, name, arguments.raw(), env).await;
                    };
                    // Traced or audited: the instantiation (when the instance is fresh)
                    // and the guest call are steps of the call.
                    let fresh = running.instance.plugin.is_none();
                    let start = record.now();
                    let (plugin, store) = running.plugin(&self.code).await?;
                    if fresh {
                        record.step(StepKind::Instantiate, start, false);
                    }
                    let start = record.now();
                    let out = plugin.call(store, name, arguments.raw(), env).await;
                    record.step(StepKind::GuestCall, start, out.is_err());
                    out
                })
                .await;
                self.finish(running, outcome)
            }
            Err(err) => Err(err),
        };
        tracing::trace!(target: "plugin", plugin = %self.name, tool = name, elapsed = ?started.elapsed(), "call done");
        let redactor = &self.grants.redactor;
        let redact = |error: ToolError| {
            if redactor.is_empty() {
                error
            } else {
                classify::redacted(error, redactor)
            }
        };
        classify::returned(result.map_err(redact)?, name, &self.limits).map_err(redact)
    }

    /// Starts a call of `tool` for a caller with `ctx` (its time left, where progress
    /// reports go): waits for a slot until the deadline, takes an instance and arms it.
    ///
    /// # Errors
    /// [`ToolError::TimedOut`] when no slot came free before the deadline.
    async fn start<'r>(
        &'r self,
        tool: &'r str,
        ctx: &CallContext,
    ) -> Result<Running<'r>, ToolError> {
        let remaining = ctx.remaining();
        let started = Instant::now();
        // A call with a time limit of its own (a task) runs under it instead of the
        // plugin's per-call limit; the deadline still applies.
        let own_limit = ctx.time_limit().unwrap_or(self.limits.timeout);
        let time_limit = remaining.map_or(own_limit, |r| r.min(own_limit));
        let deadline = started + time_limit;
        // A nested call (a composing plugin's, which waits for it) runs inside its
        // caller's slot: it never waits for one the caller may be the last holder of,
        // and the pool holds one more instance per slot for it (`PoolPlan`).
        let slot = if ctx.is_nested() {
            Some(None)
        } else {
            // The semaphore is never closed, so an error here is the deadline.
            match tokio::time::timeout_at(deadline.into(), self.shared.slots.acquire()).await {
                Ok(Ok(permit)) => Some(Some(permit)),
                _ => None,
            }
        };
        let Some(slot) = slot else {
            return Err(classify::timed_out(&CallFacts {
                tool,
                limits: &self.limits,
                time_limit,
                refused_grow: None,
                stderr: &Captured::default(),
            }));
        };
        let (shard, mut instance) = self.checkout();
        instance.arm(deadline, &self.limits, tool, ctx);
        Ok(Running {
            _shard: shard,
            instance,
            _slot: slot,
            tool,
            time_limit,
            deadline,
        })
    }

    /// Ends `running` with the guest's `outcome` (or its deadline): logs the guest's
    /// output, keeps the instance for reuse after a clean return, and classifies a
    /// failure.
    fn finish<T>(
        &self,
        mut running: Running<'_>,
        outcome: Result<wasmtime::Result<T>, Elapsed>,
    ) -> Result<T, ToolError> {
        let (tool, time_limit) = (running.tool, running.time_limit);
        let instance = &mut running.instance;
        // The call's context (its progress hook holds the client's channel) is not kept
        // by an instance that waits idle for the next call.
        instance.store.data_mut().imports.call = CallContext::new();
        instance.store.data_mut().http_hooks.end_call();
        // Secrets out before anything reads the output (the log, an error's stderr tail).
        let redactor = &self.grants.redactor;
        let stderr = log::redacted(redactor, instance.stderr.take());
        let stdout = log::redacted(redactor, instance.stdout.take());
        log::log_output(&self.name, &self.meter, tool, "stdout", &stdout);
        log::log_output(&self.name, &self.meter, tool, "stderr", &stderr);
        self.meter.flush_dropped(tool);
        let facts = CallFacts {
            tool,
            limits: &self.limits,
            time_limit,
            refused_grow: instance.store.data().limiter.refused_grow(),
            stderr: &stderr,
        };
        match outcome {
            Ok(Ok(out)) => {
                // The rest of `running` drops after, in field order.
                self.checkin(running.instance);
                Ok(out)
            }
            Ok(Err(err)) => Err(classify::failed(&err, &facts)),
            Err(_elapsed) => Err(classify::timed_out(&facts)),
        }
    }

    /// Swaps in `optimized` for the code the plugin was loaded with: instances made
    /// from now on use it, and idle instances of the old code are dropped (a call running
    /// on one finishes there). Returns `false`, changing nothing, when code was already
    /// swapped in.
    pub(crate) fn swap_in_optimized(&self, optimized: ShardPres) -> bool {
        if !self.code.swap_in(optimized) {
            return false;
        }
        self.idle.drop_unoptimized(&self.shared.idle);
        true
    }

    /// Whether the plugin calls its registry's tools (its manifest asks for
    /// `[grants] tools`).
    pub(crate) fn composes(&self) -> bool {
        self.grants.tools.is_some()
    }

    /// Whether its grant lets it call tool `name` (the manifest's list within the
    /// operator's `--plugin-tools`).
    pub(crate) fn may_call(&self, name: &str) -> bool {
        self.grants
            .tools
            .as_ref()
            .is_some_and(|grant| grant.tools.allows(name))
    }

    /// Whether optimized code has been swapped in.
    pub(crate) fn runs_optimized(&self) -> bool {
        self.code.runs_optimized()
    }

    /// A call counted on the least busy engine shard, and its instance there: an idle
    /// one in reuse mode when one waits on that shard, else a fresh one.
    pub(crate) fn checkout(&self) -> (ShardGuard<'_>, Instance) {
        let (loads, shards) = (&self.shared.shards, self.engines.len());
        if self.shared.fresh {
            let shard = loads.enter_least_busy(shards, |_| false);
            let instance = self.new_instance(shard.shard());
            return (shard, instance);
        }
        let (shard, idle) = self.idle.take(&self.shared.idle, loads, shards);
        let instance = idle.unwrap_or_else(|| self.new_instance(shard.shard()));
        (shard, instance)
    }

    /// A new store on engine shard `shard`, to instantiate the plugin in.
    pub(crate) fn new_instance(&self, shard: usize) -> Instance {
        let new = NewState::new(
            Arc::clone(&self.name),
            &self.limits,
            Arc::clone(&self.files),
            Arc::clone(&self.meter),
            Arc::clone(&self.shared.io),
            &self.grants,
        );
        let shard = shard.min(self.engines.len() - 1);
        let mut store = Store::new(&self.engines[shard], new.state);
        store.limiter(|state| &mut state.limiter);
        Instance {
            shard,
            optimized: self.runs_optimized(),
            store,
            plugin: None,
            stdout: new.stdout,
            stderr: new.stderr,
        }
    }

    /// Keeps a cleanly returned instance for reuse, when reuse is on and there is room.
    pub(crate) fn checkin(&self, instance: Instance) {
        if self.shared.fresh {
            return;
        }
        self.idle
            .put(instance, &self.shared.idle, || self.runs_optimized());
    }
}

impl Instance {
    /// Sets the deadline, fuel and per-call state for a call of `tool`.
    fn arm(&mut self, deadline: Instant, limits: &PluginLimits, tool: &str, ctx: &CallContext) {
        let state = self.store.data_mut();
        state.limiter.reset();
        // The imports see the call's own deadline (a nested tool call ends by it).
        state
            .imports
            .begin_call(tool, ctx.clone().deadline_at(deadline));
        state.http_hooks.begin_call(
            tool,
            deadline,
            ctx.outgoing_trace_parent(),
            ctx.record().cloned(),
        );
        state.http_hooks.set_gate(ctx.outgoing_gate().cloned());
        // A plugin with a fuel limit runs on the engine that meters fuel
        // (`Metering::for_limits`), so this cannot fail; the others have no fuel to set.
        if let Some(fuel) = limits.fuel {
            let _ = self.store.set_fuel(fuel);
        }
        self.store.set_epoch_deadline(1);
        self.store.epoch_deadline_callback(move |_| {
            Ok(if Instant::now() >= deadline {
                UpdateDeadline::Interrupt
            } else {
                // tokio's `yield_now` wakes the task only after the runtime has polled its
                // timers, so a spinning guest cannot starve a timer (or a cancellation)
                // on its thread; a plain `Yield` is re-polled before the timers are.
                UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now()))
            })
        });
    }
}
