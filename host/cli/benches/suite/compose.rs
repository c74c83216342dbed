//! Figure 14: what a nested tool call costs. A composing plugin (`hostile_compose`,
//! allowed to call `greet` only) calls greet.wasm's `greet` through the `registry` import
//! 64 times in one call (`flood`), and once with none; the difference over 64 is one
//! nested call, set against a direct dispatch of `greet` measured in interleaved rounds of
//! the same run. Target (docs/benchmarks.md): at most 50 µs above the direct dispatch.

use std::time::Instant;

use anyhow::{bail, Result};
use serde_json::json;
use toolhost::registry::{CallContext, Environment, Registry, ToolCall};
use toolhost_plugin::manifest::ToolNames;
use toolhost_plugin::{PluginHost, PluginHostConfig};

use super::fixtures::Fixtures;
use super::report::{median, time, Row, Samples, Target};

/// Nested calls per composing call.
const NESTED: u32 = 64;
/// Interleaved rounds.
const ROUNDS: usize = 5;
/// Direct greet calls per round.
const DIRECT: usize = 400;
/// Composing calls of each kind per round.
const COMPOSED: usize = 20;

/// Figure 14.
pub(crate) fn compose(rt: &tokio::runtime::Runtime, fixtures: &Fixtures) -> Result<Vec<Row>> {
    let figure = "14 nested greet (registry import) - direct greet dispatch";
    let plugin = fixtures.built.join("hostile_compose.wasm");
    if !plugin.is_file() {
        return Ok(vec![Row::skipped(
            figure,
            "hostile_compose.wasm is not built (scripts/build-plugins builds it)",
        )]);
    }
    let dir = fixtures.scratch.path().join("compose");
    std::fs::create_dir_all(&dir)?;
    std::fs::copy(fixtures.built.join("greet.wasm"), dir.join("greet.wasm"))?;
    std::fs::copy(&plugin, dir.join("hostile_compose.wasm"))?;
    std::fs::write(
        dir.join("hostile_compose.toml"),
        format!("[grants]\ntools = [\"greet\"]\nmax_tool_calls = {NESTED}\n"),
    )?;
    let host = PluginHost::new(
        PluginHostConfig::builder()
            .cache_dir(Some(fixtures.cache_dir.clone()))
            .plugin_tools(Some(ToolNames::only(["greet"])))
            .build(),
    )?;
    let registry = Registry::new();
    let report = host.load_dir(&dir, &registry);
    if let Some(failure) = report.failed.first() {
        bail!("{} did not load: {}", failure.path.display(), failure.error);
    }
    let env = Environment::generate();
    let ctx = CallContext::new();
    let greet = ToolCall::new("greet", r#"{"name":"Ada"}"#);
    let flood = |times: u32| {
        ToolCall::new(
            "flood",
            json!({"tool": "greet", "arguments": r#"{"name":"Ada"}"#, "times": times}).to_string(),
        )
    };
    let (with, without) = (flood(NESTED), flood(0));
    let run = |call: &ToolCall, registry: &Registry| -> Result<f64> {
        let started = Instant::now();
        let result = rt.block_on(registry.dispatch(&ctx, call, &env))?;
        let took = started.elapsed().as_secs_f64();
        if call.name == "flood" && result.content["errors"] != 0 {
            bail!("nested calls failed: {}", result.content);
        }
        Ok(took)
    };
    // Warm up: code paged in, pool slots touched.
    for _ in 0..50 {
        run(&greet, &registry)?;
        run(&with, &registry)?;
    }
    let mut direct = Samples::with_capacity(ROUNDS * DIRECT);
    let (mut composed, mut alone) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        for _ in 0..DIRECT {
            direct.push(std::time::Duration::from_secs_f64(run(&greet, &registry)?));
        }
        for _ in 0..COMPOSED {
            composed.push(run(&with, &registry)?);
            alone.push(run(&without, &registry)?);
        }
    }
    let nested = (median(&composed) - median(&alone)) / f64::from(NESTED);
    let overhead = nested - direct.p50();
    println!(
        "  direct greet p50 {}; composing call with {NESTED} nested greets {} and with none {}: {} per nested greet",
        time(direct.p50()),
        time(median(&composed)),
        time(median(&alone)),
        time(nested),
    );
    drop(host);
    Ok(vec![Row::judged(
        figure,
        format!("nested {} vs direct {}", time(nested), time(direct.p50())),
        overhead * 1e6,
        format!("{:+.1} µs", overhead * 1e6),
        Target::AtMost(50.0),
    )
    .with_unit(" µs")])
}
