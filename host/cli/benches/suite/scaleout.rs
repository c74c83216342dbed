//! Figure 18: scale-out throughput. `scripts/scaleout-bench.py` (Python's standard
//! library only) puts HAProxy (round robin) in front of 1, then 3 `host serve --http
//! --stateless` processes and measures greet calls a second from 8 kept-alive clients;
//! then task create + fetch (a 2026-07-28 task, `tasks/get` until completed) one after
//! another with the tasks kept in memory, and shared through Redis (`--state`). Reported,
//! not judged: on this machine's 2 cores three processes share the cores one uses, so
//! the figure shows the cost of the balancer and of Redis, not a speed-up. Skipped when
//! haproxy or redis-server is not installed.

use std::ffi::OsStr;

use anyhow::Result;

use crate::fixtures::Fixtures;
use crate::report::{Row, Target};
use crate::script::{run_script, ScriptRun};

const HOST: &str = env!("CARGO_BIN_EXE_host");
const FIGURE: &str = "18 scale-out";

/// The figure's rows (one skipped row when python3, haproxy or redis-server is missing).
pub(crate) fn scaleout(fixtures: &Fixtures) -> Result<Vec<Row>> {
    let greet = fixtures.greet_dir.join("greet.wasm");
    let args = [OsStr::new(HOST), greet.as_os_str()];
    let figures = match run_script("scaleout-bench.py", &args, |l| !l.starts_with("FIGURES "))? {
        ScriptRun::Figures(figures) => figures,
        ScriptRun::Skipped(why) => return Ok(vec![Row::skipped(FIGURE, &why)]),
    };
    let value = |name: &str| figures.value(name);
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
