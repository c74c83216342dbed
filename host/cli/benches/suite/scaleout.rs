//! Figure 18: scale-out throughput. `scripts/scaleout-bench.py` (Python's standard
//! library only) puts HAProxy (round robin) in front of 1, then 3 `host serve --http
//! --stateless` processes and measures greet calls a second from 8 kept-alive clients;
//! then task create + fetch (a 2026-07-28 task, `tasks/get` until completed) one after
//! another with the tasks kept in memory, and shared through Redis (`--state`). Reported,
//! not judged: on this machine's 2 cores three processes share the cores one uses, so
//! the figure shows the cost of the balancer and of Redis, not a speed-up. Skipped when
//! haproxy or redis-server is not installed.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::fixtures::Fixtures;
use crate::report::{Row, Target};

const HOST: &str = env!("CARGO_BIN_EXE_host");
const FIGURE: &str = "18 scale-out";

/// The figure's rows (one skipped row when python3, haproxy or redis-server is missing).
pub(crate) fn scaleout(fixtures: &Fixtures) -> Result<Vec<Row>> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .context("host/cli/ is not two levels below the repository")?;
    let script = repo.join("scripts/scaleout-bench.py");
    let greet = fixtures.greet_dir.join("greet.wasm");
    let output = match Command::new("python3")
        .arg(&script)
        .arg(HOST)
        .arg(&greet)
        .output()
    {
        Ok(output) => output,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(vec![Row::skipped(FIGURE, "python3 is not installed")]);
        }
        Err(err) => return Err(err).context("cannot run scripts/scaleout-bench.py"),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    if let Some(why) = stdout.lines().find_map(|l| l.strip_prefix("SKIP ")) {
        return Ok(vec![Row::skipped(FIGURE, why)]);
    }
    for line in stdout.lines().filter(|l| !l.starts_with("FIGURES ")) {
        println!("  {line}");
    }
    let Some(figures) = stdout.lines().find_map(|l| l.strip_prefix("FIGURES ")) else {
        bail!(
            "scripts/scaleout-bench.py gave no figures (exit {:?}): {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let value = |name: &str| -> Result<f64> {
        figures
            .split_whitespace()
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            .with_context(|| format!("no {name} in {figures:?}"))?
            .parse()
            .with_context(|| format!("{name} in {figures:?}"))
    };
    let (one, three) = (value("greet_1")?, value("greet_3")?);
    let (memory, redis) = (value("tasks_memory")?, value("tasks_redis")?);
    let (memory_p50, redis_p50) = (value("task_p50_memory_us")?, value("task_p50_redis_us")?);
    Ok(vec![
        Row::judged(
            format!("{FIGURE}: greet through HAProxy, 3 processes / 1"),
            format!("{three:.0} vs {one:.0} calls/s (8 clients)"),
            three / one,
            format!("{:.2}", three / one),
            Target::Report,
        ),
        Row::judged(
            format!("{FIGURE}: task create + fetch, Redis / in memory"),
            format!("{redis:.0} vs {memory:.0} tasks/s (p50 {redis_p50:.0} vs {memory_p50:.0} µs)"),
            redis / memory,
            format!("{:.2}", redis / memory),
            Target::Report,
        ),
    ])
}
