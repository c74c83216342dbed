//! Figure 10's listing: `tools/list` followed page by page (`nextCursor`) over 500
//! plugins of four tools each (the `texttools` fixture under 500 namespaces: 2,000
//! tools), against 500 plugins of one tool (greet: 500 tools). Both hosts start warm
//! (their compile caches filled first) and stay alive together; their full listings
//! take turns, [`ROUNDS`] times. The 2,000 names are checked: every
//! `pNNNN_{upper,lower,reverse,length}` once. The target: the time per tool listed
//! grows no faster than the tools (2,000-tool listing / 500-tool listing, per tool, at
//! most 1.1).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::fixtures::Fixtures;
use super::report::{latency, time, Row, Samples, Target};
use super::scale::{fill_cache, plugin_dir_of, start, Copies, Host};

/// Plugins of each listed directory.
const PLUGINS: usize = 500;
/// The fixture's tools, as it declares them.
const TOOLS: [&str; 4] = ["upper", "lower", "reverse", "length"];
/// Full listings of each host, taking turns.
const ROUNDS: usize = 7;

/// The names a listing of `plugins` plugins of `tools` must give, sorted.
fn expected(plugins: usize, tools: &[&str]) -> BTreeSet<String> {
    (0..plugins)
        .flat_map(|i| tools.iter().map(move |tool| format!("p{i:04}_{tool}")))
        .collect()
}

/// Checks one full listing against `expected`: each name once, none missing.
fn check(names: Vec<String>, expected: &BTreeSet<String>) -> Result<()> {
    let count = names.len();
    let listed: BTreeSet<String> = names.into_iter().collect();
    if listed.len() != count {
        bail!(
            "tools/list gave {} names more than once over its pages",
            count - listed.len()
        );
    }
    if &listed != expected {
        let missing = expected.difference(&listed).take(3).collect::<Vec<_>>();
        let extra = listed.difference(expected).take(3).collect::<Vec<_>>();
        bail!("tools/list gave {count} tools; missing {missing:?}, unexpected {extra:?}");
    }
    Ok(())
}

/// Figure 10's listing rows.
pub(crate) fn listing(fixtures: &Fixtures) -> Result<Vec<Row>> {
    let four = fixtures.built.join("texttools.wasm");
    if !four.is_file() {
        bail!(
            "{} is missing; run `bash scripts/build-plugins` (scripts/bench does)",
            four.display()
        );
    }
    let dirs = [
        plugin_dir_of(fixtures, &four, "texttools", PLUGINS, Copies::Same)?,
        plugin_dir_of(
            fixtures,
            &fixtures.greet_wasm(),
            "greet",
            PLUGINS,
            Copies::Same,
        )?,
    ];
    let expected = [expected(PLUGINS, &TOOLS), expected(PLUGINS, &["greet"])];
    let mut hosts: Vec<Host> = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let cache = fixtures.scratch.path().join(format!("listing-cache-{i}"));
        fill_cache(dir, &cache)?;
        hosts.push(start(dir, &cache)?.1);
    }
    let mut times = [Samples::default(), Samples::default()];
    let mut pages = [0, 0];
    for _ in 0..ROUNDS {
        for (i, host) in hosts.iter_mut().enumerate() {
            let started = Instant::now();
            let (names, count) = host.list_all()?;
            times[i].push(started.elapsed());
            check(names, &expected[i])?;
            pages[i] = count;
        }
    }
    for host in hosts {
        host.stop(Duration::from_secs(10))?;
    }
    let tools = [expected[0].len() as f64, expected[1].len() as f64];
    let per_tool = [times[0].p50() / tools[0], times[1].p50() / tools[1]];
    println!(
        "  tools/list of {PLUGINS} plugins x 4 tools: {} tools in {} pages, {} ({} a tool); x 1 tool: {} tools in {} pages, {} ({} a tool)",
        tools[0],
        pages[0],
        latency(&times[0]),
        time(per_tool[0]),
        tools[1],
        pages[1],
        latency(&times[1]),
        time(per_tool[1]),
    );
    let ratio = per_tool[0] / per_tool[1];
    Ok(vec![Row::judged(
        format!("10 tools/list of {PLUGINS} plugins x 4 tools, per tool / x 1 tool"),
        format!(
            "{} tools in {} pages p50 {} vs {} tools in {} pages p50 {}",
            tools[0],
            pages[0],
            time(times[0].p50()),
            tools[1],
            pages[1],
            time(times[1].p50())
        ),
        ratio,
        format!("{ratio:.2}"),
        Target::AtMost(1.1),
    )])
}
