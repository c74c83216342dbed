//! Running a plugin: a store per call (or a reused one) under the plugin's limits, and
//! the [`Handler`] each of its tools is registered with.
//!
//! Every call: waits for a slot (at most `max_concurrent_calls` run at once), takes a
//! fresh store and instance from the cached `InstancePre` (or an idle one in reuse
//! mode), arms the deadline (epoch callback: trap at the deadline, yield to the async
//! runtime at every tick before it; plus a timer for a guest waiting in the host), fuel
//! and limiter, runs the guest, logs its stdout/stderr, and classifies the outcome
//! ([`super::classify`]).
//!
//! The deadline also covers the host's imports: `files` calls run on the blocking pool
//! and the guest awaits them, so the call's timer fires even while a storage call hangs
//! (the call is answered `TimedOut`; the storage call finishes in the background and its
//! result is dropped). Each plugin has one [`PluginMeter`] for all its calls: its
//! lifetime write totals and its log rate limit.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use tokio::sync::Semaphore;
use wasmtime::{Engine, Store, UpdateDeadline};

use toolhost::registry::{
    Arguments, CallContext, Environment, Handler, HandlerFuture, ToolError, ToolResult,
};

use super::bindings::exports::toolhost::plugin::tools::{
    Environment as WitEnvironment, ToolDefinition as WitDefinition, ToolError as GuestError,
};
use super::bindings::v0_1;
use super::bindings::{Plugin, PluginPre};
use super::classify::{self, CallFacts};
use super::host::files::FileGrant;
use super::host::log::clean;
use super::host::quota::PluginMeter;
use super::output::{Capture, Captured};
use super::state::{Grants, NewState, PluginState};
use super::PluginLimits;

/// Idle instances kept per plugin in reuse mode.
const IDLE_PER_PLUGIN: usize = 8;
/// Stdout/stderr lines logged per call (the last ones); a flood is summarised.
const LOGGED_LINES_PER_CALL: usize = 100;
/// Longest stdout/stderr line logged.
const LOGGED_LINE_BYTES: usize = 4 * 1024;

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
    /// Idle instances kept across all plugins (reuse mode).
    idle_total: AtomicU32,
    /// Cap of `idle_total`, so idle and running instances fit the pooling allocator.
    idle_cap: u32,
    /// Calls running on each engine shard ([`super::engine_shards`]).
    shard_load: Box<[ShardLoad]>,
}

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

impl Shared {
    /// Shared state for `max_calls` concurrent calls on `shards` engine shards.
    pub(crate) fn new(max_calls: u32, fresh: bool, shards: usize) -> Self {
        Self {
            slots: Semaphore::new(max_calls.max(1) as usize),
            io: Arc::new(Semaphore::new(max_calls.max(1) as usize)),
            fresh,
            idle_total: AtomicU32::new(0),
            idle_cap: max_calls,
            shard_load: (0..shards.max(1)).map(|_| ShardLoad::default()).collect(),
        }
    }

    /// The shard a new instance should be made on: the one with the fewest calls
    /// running, this thread's last one when it is among them.
    fn pick_shard(&self) -> usize {
        let shards = self.shard_load.len();
        if shards == 1 {
            return 0;
        }
        let load = |shard: usize| self.shard_load[shard].0.load(Ordering::Relaxed);
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

    /// Idle instances kept now, over all plugins (for tests).
    #[cfg(test)]
    pub(crate) fn idle(&self) -> u32 {
        self.idle_total.load(Ordering::Relaxed)
    }

    /// Calls running on each shard now (for tests).
    #[cfg(test)]
    pub(crate) fn running_per_shard(&self) -> Vec<u32> {
        self.shard_load
            .iter()
            .map(|load| load.0.load(Ordering::Relaxed))
            .collect()
    }

    /// Counts a call running on `shard` until the guard is dropped.
    fn enter(&self, shard: usize) -> ShardGuard<'_> {
        let load = &self.shard_load[shard].0;
        load.fetch_add(1, Ordering::Relaxed);
        ShardGuard(load)
    }
}

/// A component pre-instantiated for the world it targets.
pub(crate) enum WorldPre {
    /// `toolhost:plugin@0.2.0`.
    V0_2(PluginPre<PluginState>),
    /// `toolhost:plugin@0.1.0`.
    V0_1(v0_1::PluginPre<PluginState>),
}

impl WorldPre {
    async fn instantiate(&self, store: &mut Store<PluginState>) -> wasmtime::Result<Bound> {
        Ok(match self {
            WorldPre::V0_2(pre) => Bound::V0_2(pre.instantiate_async(store).await?),
            WorldPre::V0_1(pre) => Bound::V0_1(pre.instantiate_async(store).await?),
        })
    }
}

/// An instance of either world.
enum Bound {
    V0_2(Plugin),
    V0_1(v0_1::Plugin),
}

impl Bound {
    async fn definitions(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Vec<WitDefinition>> {
        match self {
            Bound::V0_2(plugin) => plugin.toolhost_plugin_tools().call_definitions(store).await,
            Bound::V0_1(plugin) => {
                let old = plugin
                    .toolhost_plugin_tools()
                    .call_definitions(store)
                    .await?;
                Ok(old
                    .into_iter()
                    .map(|d| WitDefinition {
                        name: d.name,
                        description: d.description,
                        parameters: d.parameters,
                        title: None,
                        annotations: None,
                        output_schema: None,
                    })
                    .collect())
            }
        }
    }

    async fn call(
        &self,
        store: &mut Store<PluginState>,
        name: &str,
        arguments: &str,
        env: &WitEnvironment,
    ) -> wasmtime::Result<Result<String, GuestError>> {
        match self {
            Bound::V0_2(plugin) => {
                plugin
                    .toolhost_plugin_tools()
                    .call_call(store, name, arguments, env)
                    .await
            }
            Bound::V0_1(plugin) => {
                use v0_1::exports::toolhost::plugin::tools as old;
                let env = old::Environment {
                    session_id: env.session_id.clone(),
                    turn_id: env.turn_id.clone(),
                };
                let result = plugin
                    .toolhost_plugin_tools()
                    .call_call(store, name, arguments, &env)
                    .await?;
                Ok(result.map_err(|error| match error {
                    old::ToolError::InvalidArguments(m) => GuestError::InvalidArguments(m),
                    old::ToolError::Failed(m) => GuestError::Failed(m),
                }))
            }
        }
    }
}
/// A call counted on its shard's load.
struct ShardGuard<'a>(&'a AtomicU32);

impl Drop for ShardGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Pre-instantiates a plugin in engine shard `n`: called the first time a call of the
/// plugin lands on a shard other than the first, so a start loads each plugin into one
/// engine only.
pub(crate) type PrepareShard = Box<dyn Fn(usize) -> wasmtime::Result<WorldPre> + Send + Sync>;

/// A component pre-instantiated as `first` in the first of `engines` (one per shard, at
/// least one), and how to pre-instantiate it in the others.
pub(crate) struct ShardPres {
    pub first: WorldPre,
    pub engines: Vec<Engine>,
    pub prepare: PrepareShard,
}

/// One build of a plugin's code, pre-instantiated in each engine shard once a call has
/// needed it there (the first shard's when it is made).
struct Code {
    pres: Box<[OnceLock<WorldPre>]>,
    prepare: PrepareShard,
}

impl Code {
    /// The code of `first` (pre-instantiated in shard 0) for `shards` shards.
    fn new(first: WorldPre, prepare: PrepareShard, shards: usize) -> Self {
        let pres: Box<[OnceLock<WorldPre>]> = (0..shards.max(1)).map(|_| OnceLock::new()).collect();
        let _ = pres[0].set(first);
        Self { pres, prepare }
    }

    /// The component pre-instantiated in `shard`, prepared on first use.
    fn pre(&self, shard: usize) -> wasmtime::Result<&WorldPre> {
        if let Some(pre) = self.pres[shard].get() {
            return Ok(pre);
        }
        let pre = (self.prepare)(shard)?;
        // Two calls may prepare it at once; the first set wins.
        Ok(self.pres[shard].get_or_init(|| pre))
    }
}

/// One loaded plugin: its pre-instantiated component and everything a call needs.
pub(crate) struct PluginRuntime {
    /// The plugin's name (the file stem).
    pub name: Arc<str>,
    /// The engine of each shard, in shard order.
    engines: Box<[Engine]>,
    /// The code it was loaded with.
    code: Code,
    /// The optimized code, once swapped in for quick code
    /// ([`CompileTiers::QuickFirst`](crate::CompileTiers::QuickFirst)): every instance
    /// made after that uses it.
    optimized: OnceLock<Code>,
    /// The limits every call runs under.
    pub limits: PluginLimits,
    files: Arc<FileGrant>,
    grants: Grants,
    meter: Arc<PluginMeter>,
    shared: Arc<Shared>,
    idle: Mutex<Vec<Instance>>,
}

/// A store with (once instantiated) the plugin in it.
struct Instance {
    /// The engine shard the store belongs to.
    shard: usize,
    /// Whether it runs (or will instantiate) the optimized code that replaced the code
    /// the plugin was loaded with.
    optimized: bool,
    store: Store<PluginState>,
    plugin: Option<Bound>,
    stdout: Capture,
    stderr: Capture,
}

/// What to run in the guest.
enum Op<'a> {
    Definitions,
    Call {
        name: &'a str,
        arguments: &'a str,
        env: &'a WitEnvironment,
    },
}

/// What the guest returned.
enum Out {
    Definitions(Vec<WitDefinition>),
    Call(Result<String, GuestError>),
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
        let ShardPres {
            first,
            engines,
            prepare,
        } = shards;
        let code = Code::new(first, prepare, engines.len());
        Self {
            meter: Arc::new(PluginMeter::new(Arc::clone(&name), limits.imports.clone())),
            name,
            engines: engines.into_boxed_slice(),
            code,
            optimized: OnceLock::new(),
            limits,
            files,
            grants,
            shared,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Asks the plugin for its tool definitions, under its limits.
    ///
    /// # Errors
    /// The classified failure (trap, timeout, limit).
    pub(crate) async fn definitions(&self) -> Result<Vec<WitDefinition>, ToolError> {
        match self.run("", &CallContext::new(), Op::Definitions).await? {
            Out::Definitions(definitions) => Ok(definitions),
            Out::Call(_) => unreachable!("a definitions call returns definitions"),
        }
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
        let env = WitEnvironment {
            session_id: env.session_id.clone(),
            turn_id: env.turn_id.clone(),
        };
        let op = Op::Call {
            name,
            arguments: arguments.raw(),
            env: &env,
        };
        let started = Instant::now();
        let result = self.run(name, ctx, op).await;
        tracing::trace!(target: "plugin", plugin = %self.name, tool = name, elapsed = ?started.elapsed(), "call done");
        let redactor = &self.grants.redactor;
        let redact = |error: ToolError| {
            if redactor.is_empty() {
                error
            } else {
                classify::redacted(error, redactor)
            }
        };
        match result.map_err(redact)? {
            Out::Call(result) => classify::returned(result, name, &self.limits).map_err(redact),
            Out::Definitions(_) => unreachable!("a tool call returns a call result"),
        }
    }

    /// Runs `op` in an instance under the limits, for a caller with `ctx` (its time left,
    /// where progress reports go).
    async fn run(&self, tool: &str, ctx: &CallContext, op: Op<'_>) -> Result<Out, ToolError> {
        let remaining = ctx.remaining();
        let started = Instant::now();
        let time_limit = remaining.map_or(self.limits.timeout, |r| r.min(self.limits.timeout));
        let deadline = started + time_limit;
        let no_output = Captured::default();
        let early = CallFacts {
            tool,
            limits: &self.limits,
            time_limit,
            refused_grow: None,
            stderr: &no_output,
        };

        // The semaphore is never closed, so an error here is the deadline.
        let Ok(Ok(_slot)) =
            tokio::time::timeout_at(deadline.into(), self.shared.slots.acquire()).await
        else {
            return Err(classify::timed_out(&early));
        };
        let mut instance = self.checkout();
        let _running = self.shared.enter(instance.shard);
        instance.arm(deadline, &self.limits, tool, ctx);
        let (shard, optimized) = (instance.shard, instance.optimized);
        let Instance { store, plugin, .. } = &mut instance;
        let outcome = tokio::time::timeout_at(deadline.into(), async {
            let plugin = match plugin {
                Some(plugin) => plugin,
                None => plugin.insert(self.pre(shard, optimized)?.instantiate(&mut *store).await?),
            };
            match op {
                Op::Definitions => plugin.definitions(&mut *store).await.map(Out::Definitions),
                Op::Call {
                    name,
                    arguments,
                    env,
                } => plugin
                    .call(&mut *store, name, arguments, env)
                    .await
                    .map(Out::Call),
            }
        })
        .await;

        // The call's context (its progress hook holds the client's channel) is not kept
        // by an instance that waits idle for the next call.
        instance.store.data_mut().imports.call = CallContext::new();
        // Secrets out before anything reads the output (the log, an error's stderr tail).
        let stderr = self.redacted(instance.stderr.take());
        self.log_output(tool, "stdout", &self.redacted(instance.stdout.take()));
        self.log_output(tool, "stderr", &stderr);
        self.meter.flush_dropped(tool);
        let facts = CallFacts {
            refused_grow: instance.store.data().limiter.refused_grow(),
            stderr: &stderr,
            ..early
        };
        match outcome {
            Ok(Ok(out)) => {
                self.checkin(instance);
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
        let ShardPres { first, prepare, .. } = optimized;
        if self
            .optimized
            .set(Code::new(first, prepare, self.engines.len()))
            .is_err()
        {
            return false;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let before = idle.len();
        idle.retain(|instance| instance.optimized);
        let dropped = u32::try_from(before - idle.len()).unwrap_or(u32::MAX);
        self.shared.idle_total.fetch_sub(dropped, Ordering::Relaxed);
        true
    }

    /// Whether optimized code has been swapped in.
    pub(crate) fn runs_optimized(&self) -> bool {
        self.optimized.get().is_some()
    }

    /// The component pre-instantiated in `shard`: of the optimized code or of the code
    /// the plugin was loaded with.
    fn pre(&self, shard: usize, optimized: bool) -> wasmtime::Result<&WorldPre> {
        match self.optimized.get() {
            Some(code) if optimized => code.pre(shard),
            _ => self.code.pre(shard),
        }
    }

    /// A fresh instance, or an idle one in reuse mode.
    fn checkout(&self) -> Instance {
        if !self.shared.fresh {
            let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            if let Some(instance) = idle {
                self.shared.idle_total.fetch_sub(1, Ordering::Relaxed);
                return instance;
            }
        }
        let new = NewState::new(
            Arc::clone(&self.name),
            &self.limits,
            Arc::clone(&self.files),
            Arc::clone(&self.meter),
            Arc::clone(&self.shared.io),
            &self.grants,
        );
        let shard = self.shared.pick_shard().min(self.engines.len() - 1);
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
    fn checkin(&self, instance: Instance) {
        if self.shared.fresh {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        // Checked under the lock that the swap takes to drop the old code's idle ones.
        if idle.len() >= IDLE_PER_PLUGIN || (!instance.optimized && self.runs_optimized()) {
            return;
        }
        if self.shared.idle_total.fetch_add(1, Ordering::Relaxed) >= self.shared.idle_cap {
            self.shared.idle_total.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        idle.push(instance);
    }

    /// `captured` with the plugin's secret values replaced (and, when its start was
    /// dropped, its cut first line removed: it could hold the end of a secret).
    fn redacted(&self, captured: Captured) -> Captured {
        let redactor = &self.grants.redactor;
        if redactor.is_empty() {
            return captured;
        }
        Captured {
            text: redactor
                .redact_tail(&captured.text, captured.dropped > 0)
                .into_owned(),
            dropped: captured.dropped,
        }
    }

    /// Sends a call's captured output to the host log, one event per line, within the
    /// plugin's log rate limit (its stdout and stderr lines count as log lines).
    fn log_output(&self, tool: &str, stream: &'static str, captured: &Captured) {
        if captured.text.is_empty() {
            return;
        }
        let lines: Vec<&str> = captured
            .text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .collect();
        let skipped = lines.len().saturating_sub(LOGGED_LINES_PER_CALL);
        let plugin = &*self.name;
        if (captured.dropped > 0 || skipped > 0) && self.meter.admit_log(tool) {
            tracing::info!(target: "plugin", plugin, tool, stream, "({} earlier bytes and {skipped} earlier lines of {stream} not logged)", captured.dropped);
        }
        for line in &lines[skipped..] {
            if !self.meter.admit_log(tool) {
                continue;
            }
            let line = clean(line, LOGGED_LINE_BYTES);
            match stream {
                "stderr" => tracing::info!(target: "plugin", plugin, tool, stream, "{line}"),
                _ => tracing::debug!(target: "plugin", plugin, tool, stream, "{line}"),
            }
        }
    }
}

impl Instance {
    /// Sets the deadline, fuel and per-call state for a call of `tool`.
    fn arm(&mut self, deadline: Instant, limits: &PluginLimits, tool: &str, ctx: &CallContext) {
        let state = self.store.data_mut();
        state.limiter.reset();
        state.imports.begin_call(tool, ctx.clone());
        state.http_hooks.begin_call(tool, deadline);
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

/// The registry handler of one plugin tool.
pub(crate) struct PluginTool {
    /// The plugin.
    pub runtime: Arc<PluginRuntime>,
    /// The tool's name.
    pub tool: Arc<str>,
}

impl Handler for PluginTool {
    fn call(&self, ctx: CallContext, arguments: Arguments, env: Environment) -> HandlerFuture {
        let runtime = Arc::clone(&self.runtime);
        let tool = Arc::clone(&self.tool);
        Box::pin(async move { runtime.call(&tool, &ctx, &arguments, &env).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_instance_goes_to_the_least_busy_shard_and_stays_there_on_a_tie() {
        let shared = Shared::new(8, true, 3);
        std::thread::spawn(move || {
            assert_eq!(shared.pick_shard(), 0, "all idle: this thread's last (0)");
            let a = shared.enter(0);
            assert_eq!(shared.pick_shard(), 1);
            let _b = shared.enter(1);
            assert_eq!(shared.pick_shard(), 2);
            let c = shared.enter(2);
            assert_eq!(shared.running_per_shard(), vec![1, 1, 1]);
            // A tie: this thread keeps to the shard it used last.
            assert_eq!(shared.pick_shard(), 2);
            drop(c);
            let d = shared.enter(0);
            assert_eq!(shared.running_per_shard(), vec![2, 1, 0]);
            assert_eq!(shared.pick_shard(), 2);
            drop((a, d));
            assert_eq!(shared.running_per_shard(), vec![0, 1, 0]);
            assert_eq!(shared.pick_shard(), 2, "a tie at 0: still its last one");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn one_shard_is_always_shard_zero() {
        let shared = Shared::new(2, false, 1);
        let _running = shared.enter(0);
        assert_eq!(shared.pick_shard(), 0);
        assert_eq!(shared.running_per_shard(), vec![1]);
    }
}
