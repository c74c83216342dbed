//! Figure 11: the file tools over roots of 10^3, 10^4 and 10^5 files, and 10^6 with
//! `files-1m` (`scripts/bench files-1m`: that tree is made for the run, ~4 GB of 4 KiB
//! blocks and a million inodes, and deleted after it). Each root is a generated tree
//! (kept in `target/bench-data/files-v2-N`, made once and reused: 100 files per
//! directory of at most 13 bytes each, so grep reads the 10^6 tree whole within its
//! 32 MiB scan budget; every thousandth file is a `.md` holding the word `needle`, the
//! others `.txt`; every ten-thousandth in the 10^6 tree, [`spacing`]). Per size, a
//! fresh `host run --root ROOT` is asked `glob "**/*.md"` and `grep "needle"` (both
//! walk every file; the matches stay under both tools' result caps), [`RUNS`] times
//! each after one warm-up: the p50 per file, the time grep's busiest thread waited
//! for a core, and the host's peak RSS (VmHWM) after the handshake and after the calls.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::fixtures::Fixtures;
use super::report::median;
use super::report::{bytes, time, Row, Samples, Target};
use super::scale::Host;

const HOST: &str = env!("CARGO_BIN_EXE_host");
/// Root sizes, in files.
const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
/// The opt-in largest root (`scripts/bench files-1m`): ~4 GB of 4 KiB blocks and a
/// million inodes, so it is made for the run and deleted after it.
const MILLION: usize = 1_000_000;
/// Files per directory.
const PER_DIR: usize = 100;
/// Timed calls per tool and size.
const RUNS: usize = 5;

/// One file in this many is a `.md` holding `needle`: every thousandth up to 10^5
/// files; in the 10^6 tree every ten-thousandth, so the 100 matches stay under
/// grep's 200 entries and glob's 500 paths (past a cap a tool stops early and would
/// not walk every file).
fn spacing(n: usize) -> usize {
    if n > 100_000 {
        n / 100
    } else {
        1000
    }
}

/// The tree of `n` files, made once (a `.complete` marker is written last, so a tree cut
/// short by an interrupted run is made again).
fn tree(fixtures: &Fixtures, n: usize) -> Result<PathBuf> {
    let root = fixtures.data_dir.join(format!("files-v2-{n}"));
    let marker = fixtures.data_dir.join(format!("files-v2-{n}.complete"));
    if marker.is_file() {
        return Ok(root);
    }
    if root.exists() {
        std::fs::remove_dir_all(&root)?;
    }
    println!("  generating {n} files in {}", root.display());
    for i in 0..n {
        let dir = root.join(format!("d{:04}", i / PER_DIR));
        if i % PER_DIR == 0 {
            std::fs::create_dir_all(&dir)?;
        }
        let (name, text) = if i % spacing(n) == 7 {
            (format!("f{i:07}.md"), format!("{i}: needle\n"))
        } else {
            (format!("f{i:07}.txt"), format!("{i}: hay\n"))
        };
        std::fs::write(dir.join(name), text)?;
    }
    std::fs::write(&marker, b"")?;
    Ok(root)
}

/// Per live thread of process `pid`: (seconds on a core, seconds runnable but waiting
/// for one), the first two fields of `/proc/PID/task/TID/schedstat`.
fn schedstats(pid: u32) -> Result<HashMap<u64, (f64, f64)>> {
    let mut threads = HashMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let task = task?;
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        let mut fields = stat.split_whitespace().map(|f| f.parse::<f64>().ok());
        if let (Some(Some(cpu)), Some(Some(wait))) = (fields.next(), fields.next()) {
            threads.insert(tid, (cpu / 1e9, wait / 1e9));
        }
    }
    Ok(threads)
}

/// How long the thread that did most of a call's work (the most CPU since `before`:
/// the one that lists the files and scans beside grep's scanning threads) was runnable
/// but waiting for a core: the share of the call another tenant of the cores took.
fn call_wait(pid: u32, before: &HashMap<u64, (f64, f64)>) -> Result<f64> {
    let busiest = schedstats(pid)?
        .into_iter()
        .map(|(tid, (cpu, wait))| {
            let (cpu0, wait0) = before.get(&tid).copied().unwrap_or((0.0, 0.0));
            (cpu - cpu0, wait - wait0)
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    Ok(busiest.map_or(0.0, |(_, wait)| wait))
}

/// The result of a tool call as JSON (structured content, else the first text block).
fn result_of(answer: &Value) -> Result<Value> {
    let result = &answer["result"];
    if result["isError"] == true || result.is_null() {
        bail!("the call failed: {answer}");
    }
    if !result["structuredContent"].is_null() {
        return Ok(result["structuredContent"].clone());
    }
    let text = result["content"][0]["text"]
        .as_str()
        .with_context(|| format!("no text in {answer}"))?;
    Ok(serde_json::from_str(text).unwrap_or(Value::String(text.to_owned())))
}

struct Size {
    n: usize,
    glob: Samples,
    grep: Samples,
    /// The median over the timed grep calls of the time the call's busiest thread
    /// spent runnable but waiting for a core ([`call_wait`]), in seconds.
    grep_wait: f64,
    idle_peak: u64,
    peak: u64,
}

/// Figure 11.
pub(crate) fn files(fixtures: &Fixtures) -> Result<Vec<Row>> {
    let million = std::env::args().any(|arg| arg == "files-1m");
    let mut sizes = Vec::new();
    for n in SIZES.into_iter().chain(million.then_some(MILLION)) {
        let made = Instant::now();
        let root = tree(fixtures, n)?;
        if n == MILLION {
            println!(
                "  the {n}-file tree took {}",
                time(made.elapsed().as_secs_f64())
            );
        }
        let measured = (|| -> Result<(Samples, Samples, f64, u64, u64)> {
            let mut command = Command::new(HOST);
            command.arg("run").arg("--root").arg(&root);
            let mut host = Host::spawn_command(command)?;
            host.handshake()?;
            let idle_peak = host.status_bytes("VmHWM:")?;
            let mut id = 100;
            let mut grep_wait = Vec::new();
            let mut call =
                |host: &mut Host, tool: &str, args: Value| -> Result<(Duration, Value)> {
                    id += 1;
                    let before = schedstats(host.pid())?;
                    let started = Instant::now();
                    let answer =
                        host.request(id, "tools/call", json!({"name": tool, "arguments": args}))?;
                    let elapsed = started.elapsed();
                    if tool == "grep" {
                        grep_wait.push(call_wait(host.pid(), &before)?);
                    }
                    Ok((elapsed, result_of(&answer)?))
                };
            let (mut glob, mut grep) = (Samples::default(), Samples::default());
            for run in 0..=RUNS {
                let (elapsed, found) = call(&mut host, "glob", json!({"pattern": "**/*.md"}))?;
                let paths = found["paths"].as_array().map_or(0, Vec::len);
                let expected = n / spacing(n);
                if paths != expected || found["truncated"] != false {
                    bail!("glob over {n} files found {paths} paths, not {expected}: {found}");
                }
                let (grep_elapsed, hits) = call(&mut host, "grep", json!({"pattern": "needle"}))?;
                let text = hits.to_string();
                if text.matches("needle").count() < expected {
                    bail!("grep over {n} files found fewer than {expected} needles: {text:.400}");
                }
                if run > 0 {
                    glob.push(elapsed);
                    grep.push(grep_elapsed);
                }
            }
            // The warm-up call's wait is left out, as its time is.
            let grep_wait = median(&grep_wait[1..]);
            let peak = host.status_bytes("VmHWM:")?;
            host.stop(Duration::from_secs(10))?;
            Ok((glob, grep, grep_wait, idle_peak, peak))
        })();
        // The largest tree goes whatever the outcome: a million inodes and ~4 GB.
        if n == MILLION {
            std::fs::remove_file(fixtures.data_dir.join(format!("files-v2-{n}.complete")))?;
            std::fs::remove_dir_all(&root)?;
        }
        let (glob, grep, grep_wait, idle_peak, peak) = measured?;
        println!(
            "  {n} files: glob p50 {} ({:.2} µs per file), grep p50 {} ({:.2} µs per file, of which {:.2} µs waiting for a core), peak RSS {} after the handshake, {} after the calls",
            time(glob.p50()),
            glob.p50() / n as f64 * 1e6,
            time(grep.p50()),
            grep.p50() / n as f64 * 1e6,
            grep_wait / n as f64 * 1e6,
            bytes(idle_peak),
            bytes(peak)
        );
        sizes.push(Size {
            n,
            glob,
            grep,
            grep_wait,
            idle_peak,
            peak,
        });
    }
    pictures(&sizes)?;
    Ok(rows_of(&sizes))
}

/// docs/benchmarks/files.svg: time per file of glob and grep against the root's size.
fn pictures(sizes: &[Size]) -> Result<()> {
    use super::plot::{Chart, Scale, Series};
    let per_file = |of: fn(&Size) -> f64| -> Vec<(f64, f64)> {
        sizes
            .iter()
            .map(|s| (s.n as f64, of(s) / s.n as f64 * 1e6))
            .collect()
    };
    Chart {
        title: "File tools: time per file (p50)".to_owned(),
        x_label: "files under the root".to_owned(),
        y_label: "µs per file".to_owned(),
        x_scale: Scale::Log,
        y_scale: Scale::Linear,
        series: vec![
            Series::new("grep \"needle\"", per_file(|s| s.grep.p50())),
            Series::new("glob \"**/*.md\"", per_file(|s| s.glob.p50())),
            Series::new(
                "grep less its wait for a core",
                per_file(|s| (s.grep.p50() - s.grep_wait).max(0.0)),
            ),
        ],
    }
    .write("files")?;
    Ok(())
}

fn rows_of(sizes: &[Size]) -> Vec<Row> {
    let mut rows = Vec::new();
    for size in sizes {
        rows.push(Row::judged(
            format!("11 file tools, {} files", size.n),
            format!(
                "glob p50 {} ({:.2} µs/file); grep p50 {} ({:.2} µs/file, {:.2} waiting for a core); peak RSS {} -> {}",
                time(size.glob.p50()),
                size.glob.p50() / size.n as f64 * 1e6,
                time(size.grep.p50()),
                size.grep.p50() / size.n as f64 * 1e6,
                size.grep_wait / size.n as f64 * 1e6,
                bytes(size.idle_peak),
                bytes(size.peak)
            ),
            0.0,
            "-",
            Target::Report,
        ));
    }
    let (first, last) = (&sizes[0], &sizes[sizes.len() - 1]);
    // Time per file must not grow: the per-file time at the largest root over the
    // smallest's (1 or less is linear or better).
    for (tool, of) in [
        ("glob", (|s: &Size| s.glob.p50()) as fn(&Size) -> f64),
        ("grep", |s: &Size| s.grep.p50()),
    ] {
        let ratio = (of(last) / last.n as f64) / (of(first) / first.n as f64);
        rows.push(Row::judged(
            format!("11 {tool} time per file, {} / {} files", last.n, first.n),
            format!(
                "{:.2} vs {:.2} µs per file",
                of(last) / last.n as f64 * 1e6,
                of(first) / first.n as f64 * 1e6
            ),
            ratio,
            format!("{ratio:.2}"),
            Target::AtMost(1.0),
        ));
    }
    // grep's time per file less the time its threads waited for a core (another
    // tenant's work on the shared cores), reported: what the tool's own work costs.
    let own = |s: &Size| (s.grep.p50() - s.grep_wait).max(0.0) / s.n as f64;
    let own_ratio = own(last) / own(first);
    rows.push(Row::judged(
        format!(
            "11 grep time per file less the wait for a core, {} / {} files",
            last.n, first.n
        ),
        format!(
            "{:.2} vs {:.2} µs per file (waits {:.2} vs {:.2})",
            own(last) * 1e6,
            own(first) * 1e6,
            last.grep_wait / last.n as f64 * 1e6,
            first.grep_wait / first.n as f64 * 1e6
        ),
        own_ratio,
        format!("{own_ratio:.2}"),
        Target::Report,
    ));
    // The last step alone (reported): past the smallest root, whose files and
    // directory entries fit in the CPU's caches, the curve's own slope.
    if sizes.len() > 2 {
        let before = &sizes[sizes.len() - 2];
        for (tool, of) in [
            ("glob", (|s: &Size| s.glob.p50()) as fn(&Size) -> f64),
            ("grep", |s: &Size| s.grep.p50()),
        ] {
            let ratio = (of(last) / last.n as f64) / (of(before) / before.n as f64);
            rows.push(Row::judged(
                format!("11 {tool} time per file, {} / {} files", last.n, before.n),
                format!(
                    "{:.2} vs {:.2} µs per file",
                    of(last) / last.n as f64 * 1e6,
                    of(before) / before.n as f64 * 1e6
                ),
                ratio,
                format!("{ratio:.2}"),
                Target::Report,
            ));
        }
    }
    // Memory bounded: the peak over the calls grows by less than the root (100 times
    // the files) would make it; judged as the growth of the calls' own peak (above the
    // idle host's) at most 2x from the smallest root to the largest.
    let own = |s: &Size| s.peak.saturating_sub(s.idle_peak).max(1) as f64;
    let growth = own(last) / own(first);
    rows.push(Row::judged(
        format!("11 file tools' peak memory, {} / {} files", last.n, first.n),
        format!(
            "calls' peak above the idle host: {} vs {}",
            bytes(own(last) as u64),
            bytes(own(first) as u64)
        ),
        growth,
        format!("{growth:.2}"),
        Target::AtMost(2.0),
    ));
    rows
}
