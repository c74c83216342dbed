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

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use wasmtime::{Store, UpdateDeadline};

use toolhost::registry::{
    Arguments, CallContext, Environment, Handler, HandlerFuture, ToolError, ToolResult,
};

use super::bindings::exports::toolhost::plugin::tools::{
    Environment as WitEnvironment, ToolDefinition as WitDefinition, ToolError as GuestError,
};
use super::bindings::{Plugin, PluginPre};
use super::classify::{self, CallFacts};
use super::host::files::FileGrant;
use super::host::log::clean;
use super::host::quota::PluginMeter;
use super::output::{Capture, Captured};
use super::state::{NewState, PluginState};
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
}

impl Shared {
    /// Shared state for `max_calls` concurrent calls.
    pub(crate) fn new(max_calls: u32, fresh: bool) -> Self {
        Self {
            slots: Semaphore::new(max_calls.max(1) as usize),
            io: Arc::new(Semaphore::new(max_calls.max(1) as usize)),
            fresh,
            idle_total: AtomicU32::new(0),
            idle_cap: max_calls,
        }
    }
}

/// One loaded plugin: its pre-instantiated component and everything a call needs.
pub(crate) struct PluginRuntime {
    /// The plugin's name (the file stem).
    pub name: Arc<str>,
    pre: PluginPre<PluginState>,
    /// The limits every call runs under.
    pub limits: PluginLimits,
    files: Arc<FileGrant>,
    meter: Arc<PluginMeter>,
    shared: Arc<Shared>,
    idle: Mutex<Vec<Instance>>,
}

/// A store with (once instantiated) the plugin in it.
struct Instance {
    store: Store<PluginState>,
    plugin: Option<Plugin>,
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
    /// A runtime for a component pre-instantiated as `pre`.
    pub(crate) fn new(
        name: Arc<str>,
        pre: PluginPre<PluginState>,
        limits: PluginLimits,
        files: Arc<FileGrant>,
        shared: Arc<Shared>,
    ) -> Self {
        Self {
            meter: Arc::new(PluginMeter::new(Arc::clone(&name), limits.imports.clone())),
            name,
            pre,
            limits,
            files,
            shared,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Asks the plugin for its tool definitions, under its limits.
    ///
    /// # Errors
    /// The classified failure (trap, timeout, limit).
    pub(crate) async fn definitions(&self) -> Result<Vec<WitDefinition>, ToolError> {
        match self.run("", None, Op::Definitions).await? {
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
        let result = self.run(name, ctx.remaining(), op).await;
        tracing::trace!(target: "plugin", plugin = %self.name, tool = name, elapsed = ?started.elapsed(), "call done");
        match result? {
            Out::Call(result) => classify::returned(result, name, &self.limits),
            Out::Definitions(_) => unreachable!("a tool call returns a call result"),
        }
    }

    /// Runs `op` in an instance under the limits; `remaining` is the caller's time left.
    async fn run(
        &self,
        tool: &str,
        remaining: Option<Duration>,
        op: Op<'_>,
    ) -> Result<Out, ToolError> {
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
        instance.arm(deadline, &self.limits, tool);
        let Instance { store, plugin, .. } = &mut instance;
        let outcome = tokio::time::timeout_at(deadline.into(), async {
            let plugin = match plugin {
                Some(plugin) => plugin,
                None => plugin.insert(self.pre.instantiate_async(&mut *store).await?),
            };
            let tools = plugin.toolhost_plugin_tools();
            match op {
                Op::Definitions => tools
                    .call_definitions(&mut *store)
                    .await
                    .map(Out::Definitions),
                Op::Call {
                    name,
                    arguments,
                    env,
                } => tools
                    .call_call(&mut *store, name, arguments, env)
                    .await
                    .map(Out::Call),
            }
        })
        .await;

        let stderr = instance.stderr.take();
        self.log_output(tool, "stdout", &instance.stdout.take());
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
        );
        let mut store = Store::new(self.pre.engine(), new.state);
        store.limiter(|state| &mut state.limiter);
        Instance {
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
        if idle.len() >= IDLE_PER_PLUGIN {
            return;
        }
        if self.shared.idle_total.fetch_add(1, Ordering::Relaxed) >= self.shared.idle_cap {
            self.shared.idle_total.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        idle.push(instance);
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
    fn arm(&mut self, deadline: Instant, limits: &PluginLimits, tool: &str) {
        let state = self.store.data_mut();
        state.limiter.reset();
        state.imports.begin_call(tool);
        // Fuel metering is always on in our engine, so this cannot fail.
        let _ = self.store.set_fuel(limits.fuel.unwrap_or(u64::MAX));
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
