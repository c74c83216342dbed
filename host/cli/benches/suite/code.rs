//! Figure 15: the code tools. A `return 1 + 1` program through run_javascript and
//! run_python (`result = 1 + 1`), dispatched in process with a warm compile cache: p50
//! per call (a fresh instance of the engine each time). Targets (docs/benchmarks.md): 20 ms
//! for JavaScript, 40 ms for Python. And the idle `host run` process's RSS with both
//! loaded (`--plugin-tools '*'`), reported.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;
use toolhost::registry::{CallContext, Environment, Registry, ToolCall};
use toolhost_plugin::manifest::ToolNames;
use toolhost_plugin::{PluginHost, PluginHostConfig};

use super::fixtures::Fixtures;
use super::report::{bytes, time, Row, Samples, Target};

const HOST: &str = env!("CARGO_BIN_EXE_host");
/// Timed calls per code tool.
const CALLS: usize = 60;
/// Untimed calls first (code paged in, pool slots touched).
const WARM_UP: usize = 5;

/// Figure 15.
pub(crate) fn code(fixtures: &Fixtures) -> Result<Vec<Row>> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .context("host/cli/ is not two levels below the repository")?;
    let built = repo.join("plugins/target/pyjs");
    let tools = [
        (
            "run_javascript",
            "plugins/javascript/run_javascript",
            "return 1 + 1",
            20.0,
        ),
        (
            "run_python",
            "plugins/python/run_python",
            "result = 1 + 1",
            40.0,
        ),
    ];
    if let Some((name, ..)) = tools
        .iter()
        .find(|(name, ..)| !built.join(format!("{name}.wasm")).is_file())
    {
        return Ok(vec![Row::skipped(
            "15 code tools",
            format!("{name}.wasm is not built (scripts/build-pyjs-plugins --install builds it)"),
        )]);
    }
    let dir = fixtures.scratch.path().join("code");
    std::fs::create_dir_all(&dir)?;
    for (name, source, ..) in &tools {
        std::fs::copy(
            built.join(format!("{name}.wasm")),
            dir.join(format!("{name}.wasm")),
        )?;
        std::fs::copy(
            repo.join(source).join(format!("{name}.toml")),
            dir.join(format!("{name}.toml")),
        )?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let load = || -> Result<(PluginHost, Registry)> {
        let host = PluginHost::new(
            PluginHostConfig::builder()
                .cache_dir(Some(fixtures.cache_dir.clone()))
                .plugin_tools(Some(ToolNames::All))
                .build(),
        )?;
        let registry = Registry::new();
        let report = host.load_dir(&dir, &registry);
        if let Some(failure) = report.failed.first() {
            bail!("{} did not load: {}", failure.path.display(), failure.error);
        }
        Ok((host, registry))
    };
    // The first load compiles into the cache (tens of seconds for the Python engine); the
    // second, measured, loads from it.
    let started = Instant::now();
    drop(load()?);
    let first = started.elapsed();
    let started = Instant::now();
    let (host, registry) = load()?;
    let warm = started.elapsed();
    println!(
        "  loading both code tools: {} compiling, {} from the compile cache",
        time(first.as_secs_f64()),
        time(warm.as_secs_f64())
    );
    let env = Environment::generate();
    let ctx = CallContext::new();
    let mut rows = Vec::new();
    for (name, _, code, target_ms) in &tools {
        let call = ToolCall::new(*name, json!({ "code": code }).to_string());
        let mut samples = Samples::with_capacity(CALLS);
        for round in 0..WARM_UP + CALLS {
            let started = Instant::now();
            let result = rt.block_on(registry.dispatch(&ctx, &call, &env))?;
            let took = started.elapsed();
            if result.content["result"] != 2 {
                bail!("{name} answered {} to `{code}`", result.content);
            }
            if round >= WARM_UP {
                samples.push(took);
            }
        }
        println!(
            "  {name} `{code}`: p50 {}, p99 {} ({CALLS} calls)",
            time(samples.p50()),
            time(samples.p99())
        );
        rows.push(
            Row::judged(
                format!("15 {name} `{code}` p50 (warm compile cache)"),
                time(samples.p50()),
                samples.p50() * 1e3,
                format!("{:.1} ms", samples.p50() * 1e3),
                Target::AtMost(*target_ms),
            )
            .with_unit(" ms"),
        );
    }
    drop(registry);
    drop(host);
    let idle = idle_rss(fixtures, &dir)?;
    println!(
        "  host run RSS, idle, both code tools loaded: {}",
        bytes(idle)
    );
    rows.push(Row::judged(
        "15 RSS idle, both code tools loaded (host run)",
        bytes(idle),
        0.0,
        "-",
        Target::Report,
    ));
    Ok(rows)
}

/// VmRSS of `host run` on `dir` (both code tools, `--plugin-tools '*'`) once its
/// `tools/list` answered and it sat idle for 300 ms.
fn idle_rss(fixtures: &Fixtures, dir: &PathBuf) -> Result<u64> {
    let mut child = Command::new(HOST)
        .arg("run")
        .arg("--plugins")
        .arg(dir)
        .arg("--cache-dir")
        .arg(&fixtures.cache_dir)
        .arg("--root")
        .arg(&fixtures.root)
        .args(["--plugin-tools", "*"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {HOST}"))?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    let mut stdout = BufReader::new(child.stdout.take().context("no stdout")?);
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
    ];
    for line in &lines {
        writeln!(stdin, "{line}")?;
    }
    stdin.flush()?;
    let mut line = String::new();
    let listed = loop {
        line.clear();
        if stdout.read_line(&mut line)? == 0 {
            bail!("host run closed its stdout before answering tools/list");
        }
        let message: serde_json::Value = serde_json::from_str(&line)?;
        if message["id"] == 2 {
            break message;
        }
    };
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .context("no tools in tools/list")?
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    if !names.contains(&"run_javascript") || !names.contains(&"run_python") {
        bail!("host run does not offer both code tools: {names:?}");
    }
    std::thread::sleep(Duration::from_millis(300));
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()))?;
    let rss = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .context("no VmRSS in /proc/PID/status")?;
    drop(stdin);
    let _ = child.wait();
    Ok(rss * 1024)
}
