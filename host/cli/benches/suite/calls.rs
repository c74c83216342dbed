//! Figures 1 to 4: what a call costs through the registry, against the floor below it.
//!
//! Contenders measured against each other are interleaved in rounds (a batch of one, then
//! a batch of the other, ...) in the same process and thread, so drift in the machine's
//! load hits both alike.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use serde_json::Value;
use tokio::runtime::Runtime;
use toolhost::registry::{
    Arguments, CallContext, Environment, Registry, ToolCall, ToolDefinition, ToolError, ToolResult,
};
use toolhost_plugin::{PluginHost, PluginHostConfig};
use toolhost_sdk::schema::{object, string};

use super::bare::{Bare, Reset};
use super::fixtures::Fixtures;
use super::report::{latency, median, time, Row, Samples, Target};

const GREET_ARGS: &str = r#"{"name":"Ada"}"#;
const GREETING: &str = "Hello, Ada!";

/// A registry with greet loaded from `fixtures.greet_dir` by a plugin host in the given
/// instance mode. The host is returned too: it owns the epoch ticker.
pub(crate) fn greet_registry(
    fixtures: &Fixtures,
    fresh: bool,
) -> Result<(PluginHost, Arc<Registry>)> {
    let host = PluginHost::new(
        PluginHostConfig::builder()
            .cache_dir(Some(fixtures.cache_dir.clone()))
            .fresh_instance_per_call(fresh)
            .build(),
    )?;
    let registry = Registry::new();
    let report = host.load_dir(&fixtures.greet_dir, &registry);
    if let Some(failure) = report.failed.first() {
        bail!("greet did not load: {}", failure.error);
    }
    if !registry.has("greet") {
        bail!("greet.wasm registered no greet tool");
    }
    Ok((host, Arc::new(registry)))
}

async fn greet(registry: &Registry, ctx: &CallContext, env: &Environment) -> Result<(), String> {
    let call = ToolCall::new("greet", GREET_ARGS);
    match registry.dispatch(ctx, &call, env).await {
        Ok(result) if result.content == GREETING => Ok(()),
        Ok(result) => Err(format!("greet returned {}", result.content)),
        Err(err) => Err(err.to_string()),
    }
}

/// Figures 1 and 2: greet through the registry on a fresh instance and on a reused one,
/// and the bare wasmtime floor.
pub(crate) fn plugin_calls(rt: &Runtime, fixtures: &Fixtures) -> Result<Vec<Row>> {
    const WARMUP: usize = 500;
    const ROUNDS: usize = 40;
    const BATCH: usize = 200;
    let (_fresh_host, fresh) = greet_registry(fixtures, true)?;
    let (_reused_host, reused) = greet_registry(fixtures, false)?;
    let bare = Bare::new(&fixtures.greet_wasm(), Reset::Host)?;
    let (ctx, env) = (CallContext::new(), Environment::generate());

    let (dispatch, floor, reuse) = rt.block_on(async {
        let expected = serde_json::to_string(GREETING)?;
        let out = bare.call("greet", GREET_ARGS).await?;
        if out != expected {
            bail!("the bare call returned {out}, not {expected}");
        }
        for _ in 0..WARMUP {
            greet(&fresh, &ctx, &env)
                .await
                .map_err(anyhow::Error::msg)?;
            greet(&reused, &ctx, &env)
                .await
                .map_err(anyhow::Error::msg)?;
            bare.call("greet", GREET_ARGS).await?;
        }
        let mut dispatch = Samples::with_capacity(ROUNDS * BATCH);
        let mut floor = Samples::with_capacity(ROUNDS * BATCH);
        let mut reuse = Samples::with_capacity(ROUNDS * BATCH);
        for _ in 0..ROUNDS {
            for _ in 0..BATCH {
                let started = Instant::now();
                greet(&fresh, &ctx, &env)
                    .await
                    .map_err(anyhow::Error::msg)?;
                dispatch.push(started.elapsed());
            }
            for _ in 0..BATCH {
                let started = Instant::now();
                black_box(bare.call("greet", GREET_ARGS).await?);
                floor.push(started.elapsed());
            }
            for _ in 0..BATCH {
                let started = Instant::now();
                greet(&reused, &ctx, &env)
                    .await
                    .map_err(anyhow::Error::msg)?;
                reuse.push(started.elapsed());
            }
        }
        Ok((dispatch, floor, reuse))
    })?;

    let overhead = dispatch.p50() / floor.p50();
    let fresh_vs_reused = dispatch.p50() / reuse.p50();
    println!(
        "  greet, {} calls each: dispatch (fresh) {}; bare wasmtime {}; dispatch (reused) {}",
        dispatch.len(),
        latency(&dispatch),
        latency(&floor),
        latency(&reuse)
    );
    Ok(vec![
        Row::judged(
            "1 plugin call: dispatch / bare wasmtime (fresh instance, greet)",
            format!("dispatch {}; bare {}", latency(&dispatch), latency(&floor)),
            overhead,
            format!("{overhead:.2} (p99 {:.2})", dispatch.p99() / floor.p99()),
            Target::AtMost(1.3),
        ),
        Row::judged(
            "2 fresh / reused instance (greet dispatch)",
            format!("fresh {}; reused {}", latency(&dispatch), latency(&reuse)),
            fresh_vs_reused,
            format!("{fresh_vs_reused:.1}"),
            Target::Report,
        ),
    ])
}

/// The native greet: what the bare closure does, as a registered tool.
fn native_registry() -> Result<Registry> {
    let registry = Registry::new();
    registry.register(
        ToolDefinition::new(
            "greet",
            "Greet a person by name.",
            object([("name", string("Who to greet."))], ["name"]),
        ),
        |_ctx: CallContext, args: Arguments, _env: Environment| async move {
            Ok(ToolResult::new(format!(
                "Hello, {}!",
                args.required_str("name")?
            )))
        },
    )?;
    Ok(registry)
}

/// The same work without the registry: parse the arguments, take the name, format.
fn bare_greet(arguments: &str) -> Result<ToolResult, ToolError> {
    let value: Value = serde_json::from_str(arguments)
        .map_err(|err| ToolError::invalid_arguments(err.to_string()))?;
    let name = value
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::invalid_arguments("name is missing"))?;
    Ok(ToolResult::new(format!("Hello, {name}!")))
}

/// Figure 3: a native tool through `Registry::dispatch` against a plain function call.
pub(crate) fn native_dispatch(rt: &Runtime) -> Result<Vec<Row>> {
    const WARMUP: usize = 20_000;
    const ROUNDS: usize = 50;
    const BATCH: usize = 2_000;
    let registry = native_registry()?;
    let (ctx, env) = (CallContext::new(), Environment::generate());
    let call = ToolCall::new("greet", GREET_ARGS);
    let (dispatch, closure) = rt.block_on(async {
        let check = |result: ToolResult| {
            if result.content == GREETING {
                Ok(())
            } else {
                Err(anyhow::anyhow!("native greet returned {}", result.content))
            }
        };
        for _ in 0..WARMUP {
            check(registry.dispatch(&ctx, &call, &env).await?)?;
            check(bare_greet(black_box(GREET_ARGS))?)?;
        }
        let mut dispatch = Samples::with_capacity(ROUNDS * BATCH);
        let mut closure = Samples::with_capacity(ROUNDS * BATCH);
        for _ in 0..ROUNDS {
            for _ in 0..BATCH {
                let started = Instant::now();
                black_box(registry.dispatch(&ctx, black_box(&call), &env).await?);
                dispatch.push(started.elapsed());
            }
            for _ in 0..BATCH {
                let started = Instant::now();
                black_box(bare_greet(black_box(GREET_ARGS))?);
                closure.push(started.elapsed());
            }
        }
        Ok::<_, anyhow::Error>((dispatch, closure))
    })?;
    let overhead = dispatch.p50() - closure.p50();
    println!(
        "  native greet, {} calls each: dispatch {}; closure {}",
        dispatch.len(),
        latency(&dispatch),
        latency(&closure)
    );
    Ok(vec![Row::judged(
        "3 native dispatch overhead (dispatch - closure, p50)",
        format!(
            "dispatch {}; closure {}",
            latency(&dispatch),
            latency(&closure)
        ),
        overhead * 1e6,
        format!(
            "+{} ({:.1}x)",
            time(overhead),
            dispatch.p50() / closure.p50()
        ),
        Target::AtMost(2.0),
    )
    .with_unit(" µs")])
}

/// This process's CPU time (user + system) so far, in seconds, from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // Fields after the command name (which is in parentheses): state is field 3, utime
    // and stime are fields 14 and 15, in clock ticks (100 per second on Linux).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => (user + system) / 100.0,
        _ => f64::NAN,
    }
}

/// One throughput window: calls/s, failures, and CPU cores busy on average.
#[derive(Debug, Clone, Copy)]
struct Window {
    rate: f64,
    failed: u64,
    cores: f64,
}

/// Who takes the calls in a throughput window.
#[derive(Clone)]
enum Callee {
    /// A registry (greet on fresh or reused instances).
    Registry(Arc<Registry>),
    /// Bare wasmtime, fresh instances.
    Bare(Arc<Bare>),
    /// Bare wasmtime, fresh instances, one engine (and pool) per task: task `i` calls
    /// engine `i % len`.
    BarePerTask(Vec<Arc<Bare>>),
}

impl Callee {
    async fn greet(&self, ctx: &CallContext, env: &Environment) -> Result<(), String> {
        match self {
            Callee::Registry(registry) => greet(registry, ctx, env).await,
            Callee::Bare(bare) => bare
                .call("greet", GREET_ARGS)
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
            Callee::BarePerTask(_) => Err("resolved per task in throughput()".into()),
        }
    }
}

/// Greet calls from `tasks` concurrent tasks for `window`.
async fn throughput(callee: &Callee, tasks: usize, window: Duration) -> Window {
    let stop = Instant::now() + window;
    let started = Instant::now();
    let cpu = cpu_seconds();
    let mut set = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let callee = match callee {
            Callee::BarePerTask(engines) => {
                Callee::Bare(Arc::clone(&engines[task % engines.len()]))
            }
            other => other.clone(),
        };
        set.spawn(async move {
            let (ctx, env) = (CallContext::new(), Environment::generate());
            let (mut ok, mut failed) = (0u64, 0u64);
            while Instant::now() < stop {
                match callee.greet(&ctx, &env).await {
                    Ok(()) => ok += 1,
                    Err(_) => failed += 1,
                }
            }
            (ok, failed)
        });
    }
    let (mut ok, mut failed) = (0, 0);
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((o, f)) => {
                ok += o;
                failed += f;
            }
            Err(_) => failed += 1,
        }
    }
    let wall = started.elapsed().as_secs_f64();
    Window {
        rate: ok as f64 / wall,
        failed,
        cores: (cpu_seconds() - cpu) / wall,
    }
}

/// Work units per second of `threads` threads spinning on pure arithmetic for `window`:
/// how much parallel CPU the machine gives right now.
fn spin_rate(threads: usize, window: Duration) -> f64 {
    let stop = Instant::now() + window;
    let started = Instant::now();
    let total: u64 = std::thread::scope(|scope| {
        #[allow(
            clippy::needless_collect,
            reason = "every thread must be spawned before the first is joined"
        )]
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(move || {
                    let mut units = 0u64;
                    let mut x = 1u64;
                    while Instant::now() < stop {
                        for _ in 0..10_000 {
                            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                        }
                        units += 1;
                    }
                    units
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
    });
    total as f64 / started.elapsed().as_secs_f64()
}

/// Figure 4: calls/s into greet at concurrency 1, 2 and 8 on the runtime's workers; for
/// reference, the same at 1 and 2 on reused instances, on bare wasmtime (one engine, and
/// one engine per task as the host has one per core), with wasmtime's default slot
/// reset, and how two threads of pure arithmetic scale on the machine right now. Rounds
/// interleave every level; each ratio is taken within a round (adjacent windows), then
/// the median.
///
/// Judged: c2/c1; our c2/c1 against bare wasmtime's best c2/c1 in the same
/// run (what the machine gives this kind of work: the ratio that stays meaningful when
/// the machine itself scales worse); and c2 calls/s against bare wasmtime's best at c2
/// (the host's own cost under concurrency). Bare wasmtime with one engine shows what a
/// pool shared by both cores costs (docs/benchmarks.md, "The speed work: before and after").
pub(crate) fn concurrency(rt: &Runtime, fixtures: &Fixtures, workers: usize) -> Result<Vec<Row>> {
    const ROUNDS: usize = 6;
    const WINDOW: Duration = Duration::from_millis(500);
    const SPIN: Duration = Duration::from_millis(200);
    let (_fresh_host, fresh) = greet_registry(fixtures, true)?;
    let (_reused_host, reused) = greet_registry(fixtures, false)?;
    let bare = Arc::new(Bare::new(&fixtures.greet_wasm(), Reset::Host)?);
    let per_task = (0..2)
        .map(|_| Bare::new(&fixtures.greet_wasm(), Reset::Host).map(Arc::new))
        .collect::<Result<Vec<_>>>()?;
    let madvise = Arc::new(Bare::new(&fixtures.greet_wasm(), Reset::Madvise)?);
    let levels: [(&str, Callee, usize); 10] = [
        ("c1", Callee::Registry(Arc::clone(&fresh)), 1),
        ("c2", Callee::Registry(Arc::clone(&fresh)), 2),
        ("c8", Callee::Registry(fresh), 8),
        ("reused c1", Callee::Registry(Arc::clone(&reused)), 1),
        ("reused c2", Callee::Registry(reused), 2),
        ("bare c1", Callee::Bare(Arc::clone(&bare)), 1),
        ("bare c2", Callee::Bare(bare), 2),
        ("bare engine-per-task c2", Callee::BarePerTask(per_task), 2),
        (
            "bare madvise-reset c1",
            Callee::Bare(Arc::clone(&madvise)),
            1,
        ),
        ("bare madvise-reset c2", Callee::Bare(madvise), 2),
    ];
    let (windows, spin) = rt.block_on(async {
        throughput(&levels[2].1, 8, Duration::from_millis(300)).await;
        let mut windows: Vec<Vec<Window>> = vec![Vec::new(); levels.len()];
        let mut spin = Vec::new();
        for _ in 0..ROUNDS {
            let one = spin_rate(1, SPIN);
            spin.push(spin_rate(2, SPIN) / one);
            for (i, (_, callee, tasks)) in levels.iter().enumerate() {
                windows[i].push(throughput(callee, *tasks, WINDOW).await);
            }
        }
        (windows, spin)
    });
    let spin = median(&spin);
    let rate = |i: usize| median(&windows[i].iter().map(|w| w.rate).collect::<Vec<_>>());
    let cores = |i: usize| median(&windows[i].iter().map(|w| w.cores).collect::<Vec<_>>());
    let failed = |i: usize| windows[i].iter().map(|w| w.failed).sum::<u64>();
    let calls = |i: usize| windows[i].iter().map(|w| w.rate).sum::<f64>() * WINDOW.as_secs_f64();
    let ratio = |a: usize, b: usize| {
        median(
            &windows[a]
                .iter()
                .zip(&windows[b])
                .map(|(a, b)| a.rate / b.rate)
                .collect::<Vec<_>>(),
        )
    };
    let detail: Vec<String> = levels
        .iter()
        .enumerate()
        .map(|(i, (name, _, _))| format!("{name} {:.0}/s ({:.2} cores)", rate(i), cores(i)))
        .collect();
    println!(
        "  greet calls/s on {workers} workers, medians of {ROUNDS} windows of {}: {}; failures c1/c2/c8 {}/{}/{}; pure-CPU spin 2 threads / 1 thread {spin:.2}",
        time(WINDOW.as_secs_f64()),
        detail.join(", "),
        failed(0),
        failed(1),
        failed(2),
    );
    let scaling = ratio(1, 0);
    let bare_scaling = ratio(6, 5).max(ratio(7, 5));
    let relative = scaling / bare_scaling;
    let bare_c2 = rate(6).max(rate(7));
    Ok(vec![
        Row::judged(
            format!("4 concurrency: c2 / c1 calls/s (greet, fresh, {workers} workers)"),
            format!(
                "c1 {:.0}/s; c2 {:.0}/s ({:.2} cores busy); c8 {:.0}/s",
                rate(0),
                rate(1),
                cores(1),
                rate(2),
            ),
            scaling,
            format!("{scaling:.2} (c8/c1 {:.2})", ratio(2, 0)),
            Target::AtLeast(1.7),
        ),
        Row::judged(
            "4 concurrency: our c2/c1 / bare wasmtime's best c2/c1 (same run)",
            format!(
                "ours {scaling:.2}; bare {:.2}, bare engine-per-task {:.2}",
                ratio(6, 5),
                ratio(7, 5)
            ),
            relative,
            format!("{relative:.2}"),
            Target::AtLeast(0.9),
        ),
        Row::judged(
            "4 concurrency: c2 calls/s, ours / bare wasmtime's best",
            format!("ours {:.0}/s; bare {:.0}/s", rate(1), bare_c2),
            rate(1) / bare_c2,
            format!("{:.2}", rate(1) / bare_c2),
            Target::AtLeast(0.75),
        ),
        Row::judged(
            "4 reference c2 / c1: other callees, same run",
            format!(
                "reused {:.0}/s c1; bare with madvise reset (wasmtime default) {:.0}/s c1; 2 spinning threads",
                rate(3),
                rate(8),
            ),
            0.0,
            format!("{:.2}; {:.2}; {spin:.2}", ratio(4, 3), ratio(9, 8)),
            Target::Report,
        ),
        Row::judged(
            "4 concurrency: failed calls at c8",
            format!("{} failed of {:.0} calls", failed(2), calls(2)),
            failed(2) as f64,
            failed(2).to_string(),
            Target::AtMost(0.0),
        ),
    ])
}
