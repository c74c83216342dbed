//! Figure 10: scale. `host run` over generated plugin directories of 1, 10, 100 and 500
//! plugins made from the one greet component, each with a manifest
//! `namespace = "pNNNN"`, so its tool is `pNNNN_greet` and no extra build is needed. Two
//! kinds of directory:
//!
//! - **distinct**: each `pNNNN.wasm` is greet with a custom section naming its index
//!   appended (ignored by every tool, but a new digest): to the host, N distinct
//!   plugins of greet's size. The targets are judged on these.
//! - **same**: greet hard-linked (copied where links fail) N times: one plugin offered
//!   under N namespaces, which the host compiles and holds once.
//!
//! For each size: start to the first `tools/list` answer with an empty compile cache
//! (cold) and with a filled one (warm), idle RSS, the time to list every tool page by
//! page (`nextCursor`), and the p50 of sequential greet calls (the last plugin's),
//! measured on hosts of every size alive at once, interleaved round by round.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::fixtures::Fixtures;
use super::placement::{allowed_cpus, pin_process, ThreadPin};
use super::report::{bytes, latency, time, Row, Samples, Target};

const HOST: &str = env!("CARGO_BIN_EXE_host");
/// The directory sizes, in plugins.
const SIZES: [usize; 4] = [1, 10, 100, 500];
/// Cold starts per size (each compiles into an empty cache).
const COLD: usize = 2;
/// Warm starts per size.
const WARM: usize = 5;
/// Sequential calls per host and round, after [`WARM_UP`] untimed ones.
const CALLS: usize = 1000;
const WARM_UP: usize = 300;
/// Rounds of [`CALLS`], every size in turn within a round.
const ROUNDS: usize = 3;
const MIB: f64 = 1024.0 * 1024.0;

/// A running `host run` on a generated directory.
pub(crate) struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: String,
    /// A `notifications/tools/list_changed` was read (while waiting for an answer).
    list_changed: bool,
}

impl Host {
    fn spawn(dir: &Path, cache: &Path) -> Result<Host> {
        let mut command = Command::new(HOST);
        command
            .arg("run")
            .arg("--plugins")
            .arg(dir)
            .arg("--cache-dir")
            .arg(cache)
            .arg("--no-builtins");
        Self::spawn_command(command)
    }

    /// `host run` with these arguments (stdin and stdout piped, stderr dropped).
    pub(crate) fn spawn_command(mut command: Command) -> Result<Host> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start host run")?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("no stdout")?);
        Ok(Host {
            child,
            stdin: Some(stdin),
            stdout,
            line: String::new(),
            list_changed: false,
        })
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        stdin.write_all(&line)?;
        stdin.flush()?;
        Ok(())
    }

    pub(crate) fn request(&mut self, id: u64, method: &str, params: Value) -> Result<Value> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            self.line.clear();
            if self.stdout.read_line(&mut self.line)? == 0 {
                bail!("host run closed its stdout");
            }
            let message: Value = serde_json::from_str(&self.line)?;
            if message["method"] == "notifications/tools/list_changed" {
                self.list_changed = true;
            }
            if message["id"] == id {
                return Ok(message);
            }
        }
    }

    /// initialize, initialized and the first tools/list page; returns that page.
    pub(crate) fn handshake(&mut self) -> Result<Value> {
        self.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
        )?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        self.request(2, "tools/list", json!({}))
    }

    /// Every tool name, page by page; returns them and the number of pages.
    pub(crate) fn list_all(&mut self) -> Result<(Vec<String>, usize)> {
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let params = match &cursor {
                Some(cursor) => json!({"cursor": cursor}),
                None => json!({}),
            };
            let page = self.request(1000 + pages as u64, "tools/list", params)?;
            pages += 1;
            let tools = page["result"]["tools"]
                .as_array()
                .with_context(|| format!("tools/list answered {page}"))?;
            names.extend(
                tools
                    .iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned)),
            );
            match page["result"]["nextCursor"].as_str() {
                Some(next) if pages < 10_000 => cursor = Some(next.to_owned()),
                _ => return Ok((names, pages)),
            }
        }
    }

    fn rss(&self) -> Result<u64> {
        self.status_bytes("VmRSS:")
    }

    /// The process id of the running `host run`.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A byte count of `/proc/PID/status`, by its label (`VmRSS:`, `VmHWM:`).
    pub(crate) fn status_bytes(&self, label: &str) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let kib: u64 = status
            .lines()
            .find(|line| line.starts_with(label))
            .and_then(|line| line.split_whitespace().nth(1))
            .with_context(|| format!("no {label} in /proc/PID/status"))?
            .parse()?;
        Ok(kib * 1024)
    }

    /// `count` sequential greet calls of `tool`; their latencies.
    fn calls(&mut self, tool: &str, count: usize, first_id: u64) -> Result<Samples> {
        let mut samples = Samples::with_capacity(count);
        for i in 0..count {
            let id = first_id + i as u64;
            let started = Instant::now();
            let answer = self.request(
                id,
                "tools/call",
                json!({"name": tool, "arguments": {"name": "Ada"}}),
            )?;
            samples.push(started.elapsed());
            let text = answer["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default();
            if !text.contains("Hello, Ada!") {
                bail!("{tool} answered {answer}");
            }
        }
        Ok(samples)
    }

    /// Closes stdin and waits for the exit (`host run` first finishes the optimized
    /// compiles of a cold start, at most 30 s); kills it after `patience`.
    pub(crate) fn stop(mut self, patience: Duration) -> Result<()> {
        drop(self.stdin.take());
        let deadline = Instant::now() + patience;
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.child.kill()?;
        self.child.wait()?;
        bail!(
            "host run did not exit within {} of the end of its input",
            time(patience.as_secs_f64())
        )
    }
}

/// How the plugins of a generated directory relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Copies {
    /// Greet with a custom section naming its index: N distinct components.
    Distinct,
    /// Greet hard-linked: one component under N names.
    Same,
}

impl Copies {
    fn label(self) -> &'static str {
        match self {
            Copies::Distinct => "distinct",
            Copies::Same => "same",
        }
    }
}

/// `component` with a custom section `bench-copy` holding `index` appended: the same
/// code, another digest.
fn distinct_copy(component: &[u8], index: usize) -> Vec<u8> {
    let name = b"bench-copy";
    let payload = format!("{index:04}");
    let mut body = vec![name.len() as u8];
    body.extend_from_slice(name);
    body.extend_from_slice(payload.as_bytes());
    let mut bytes = component.to_vec();
    bytes.push(0); // custom section
    bytes.push(body.len() as u8); // < 128: one LEB128 byte
    bytes.extend_from_slice(&body);
    bytes
}

/// The directory of `n` greet plugins of kind `copies` (generated once per run).
fn plugin_dir(fixtures: &Fixtures, n: usize, copies: Copies) -> Result<PathBuf> {
    plugin_dir_of(fixtures, &fixtures.greet_wasm(), "greet", n, copies)
}

/// The directory of `n` plugins of kind `copies` made from `component` (`label` names
/// it in the directory's name): `pNNNN.wasm`, each with a manifest giving it namespace
/// `pNNNN`.
pub(crate) fn plugin_dir_of(
    fixtures: &Fixtures,
    component: &Path,
    label: &str,
    n: usize,
    copies: Copies,
) -> Result<PathBuf> {
    let dir = fixtures
        .scratch
        .path()
        .join(format!("scale-{label}-{}-{n}", copies.label()));
    std::fs::create_dir_all(&dir)?;
    let bytes =
        std::fs::read(component).with_context(|| format!("cannot read {}", component.display()))?;
    for i in 0..n {
        let name = format!("p{i:04}");
        let wasm = dir.join(format!("{name}.wasm"));
        // A directory made before in this run holds hard links to `component`: writing
        // or copying through one would truncate the built component itself.
        match std::fs::remove_file(&wasm) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err.into()),
            _ => {}
        }
        match copies {
            Copies::Distinct => std::fs::write(&wasm, distinct_copy(&bytes, i))?,
            Copies::Same => {
                if std::fs::hard_link(component, &wasm).is_err() {
                    std::fs::copy(component, &wasm)?;
                }
            }
        }
        std::fs::write(
            dir.join(format!("{name}.toml")),
            format!("namespace = \"{name}\"\n"),
        )?;
    }
    Ok(dir)
}

/// Fills `cache` with the optimized code of every plugin of `dir` (`host tools`
/// compiles optimized code first, with no time limit): `host run` waits at most 30 s
/// for its background compiles at exit, too little for 500 distinct plugins.
pub(crate) fn fill_cache(dir: &Path, cache: &Path) -> Result<()> {
    let status = Command::new(HOST)
        .arg("tools")
        .arg("--plugins")
        .arg(dir)
        .arg("--cache-dir")
        .arg(cache)
        .arg("--no-builtins")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("cannot start host tools")?;
    if !status.success() {
        bail!("host tools --plugins {} failed: {status}", dir.display());
    }
    Ok(())
}

/// One start to the first `tools/list` answer; the host is returned running.
pub(crate) fn start(dir: &Path, cache: &Path) -> Result<(Duration, Host)> {
    let started = Instant::now();
    let mut host = Host::spawn(dir, cache)?;
    let page = host.handshake()?;
    let elapsed = started.elapsed();
    if page["result"]["tools"].as_array().is_none_or(Vec::is_empty) {
        bail!("the first tools/list page is empty: {page}");
    }
    Ok((elapsed, host))
}

struct Size {
    n: usize,
    cold: Samples,
    warm: Samples,
    rss: u64,
    list: Duration,
    pages: usize,
    calls: Samples,
}

/// Figure 10.
pub(crate) fn scale(fixtures: &Fixtures) -> Result<Vec<Row>> {
    let distinct = measure(fixtures, Copies::Distinct)?;
    let same = measure(fixtures, Copies::Same)?;
    let mut rows = rows_of(&distinct, Copies::Distinct, true);
    rows.extend(rows_of(&same, Copies::Same, false));
    rows.extend(super::listing::listing(fixtures)?);
    pictures(&distinct, &same)?;
    Ok(rows)
}

/// docs/benchmarks/scale-{start,rss,call}.svg: figure 10's curves.
fn pictures(distinct: &[Size], same: &[Size]) -> Result<()> {
    use super::plot::{Chart, Scale, Series};
    let curve = |sizes: &[Size], of: &dyn Fn(&Size) -> f64| -> Vec<(f64, f64)> {
        sizes.iter().map(|s| (s.n as f64, of(s))).collect()
    };
    let chart = |title: &str, y_label: &str, y_scale: Scale, series: Vec<Series>| Chart {
        title: title.to_owned(),
        x_label: "plugins".to_owned(),
        y_label: y_label.to_owned(),
        x_scale: Scale::Log,
        y_scale,
        series,
    };
    chart(
        "Start to the first tools/list (p50)",
        "ms",
        Scale::Log,
        vec![
            Series::new(
                "distinct, warm cache",
                curve(distinct, &|s| s.warm.p50() * 1e3),
            ),
            Series::new("distinct, cold", curve(distinct, &|s| s.cold.p50() * 1e3)),
            Series::new("same, warm cache", curve(same, &|s| s.warm.p50() * 1e3)),
            Series::new("same, cold", curve(same, &|s| s.cold.p50() * 1e3)),
        ],
    )
    .write("scale-start")?;
    chart(
        "Idle RSS of host run",
        "MiB",
        Scale::Log,
        vec![
            Series::new("distinct plugins", curve(distinct, &|s| s.rss as f64 / MIB)),
            Series::new("same plugin, N names", curve(same, &|s| s.rss as f64 / MIB)),
        ],
    )
    .write("scale-rss")?;
    chart(
        "greet over stdio, sequential call p50",
        "µs",
        Scale::Linear,
        vec![
            Series::new(
                "distinct plugins",
                curve(distinct, &|s| s.calls.p50() * 1e6),
            ),
            Series::new(
                "same plugin, N names",
                curve(same, &|s| s.calls.p50() * 1e6),
            ),
        ],
    )
    .write("scale-call")?;
    Ok(())
}

/// Every size of one kind.
fn measure(fixtures: &Fixtures, copies: Copies) -> Result<Vec<Size>> {
    let kind = copies.label();
    let mut sizes = Vec::new();
    let mut hosts = Vec::new();
    for n in SIZES {
        let dir = plugin_dir(fixtures, n, copies)?;
        let mut cold = Samples::default();
        let mut cache = PathBuf::new();
        // Distinct plugins compile N times: one cold run of those is enough.
        let runs = if copies == Copies::Distinct { 1 } else { COLD };
        for run in 0..runs {
            cache = fixtures
                .scratch
                .path()
                .join(format!("scale-cache-{kind}-{n}-{run}"));
            let (elapsed, host) = start(&dir, &cache)?;
            cold.push(elapsed);
            // Let it write the optimized code it finishes in time to the cache.
            host.stop(Duration::from_secs(120))?;
        }
        fill_cache(&dir, &cache)?;
        let mut warm = Samples::default();
        for _ in 0..WARM {
            let (elapsed, host) = start(&dir, &cache)?;
            warm.push(elapsed);
            host.stop(Duration::from_secs(10))?;
        }
        // One more warm host, kept for the idle RSS, the full listing and the calls.
        let (_, mut host) = start(&dir, &cache)?;
        std::thread::sleep(Duration::from_millis(500));
        let rss = host.rss()?;
        let listed = Instant::now();
        let (names, pages) = host.list_all()?;
        let list = listed.elapsed();
        if names.len() != n || !names.iter().all(|name| name.ends_with("_greet")) {
            bail!(
                "{n} plugins listed {} tools: {:?}",
                names.len(),
                &names[..names.len().min(5)]
            );
        }
        println!(
            "  {n} {kind} plugins: cold start {} ({runs} runs), warm start {} ({WARM} runs), idle RSS {}, tools/list of all {n} tools in {pages} pages {}",
            latency(&cold),
            latency(&warm),
            bytes(rss),
            time(list.as_secs_f64())
        );
        sizes.push(Size {
            n,
            cold,
            warm,
            rss,
            list,
            pages,
            calls: Samples::default(),
        });
        hosts.push(host);
    }
    // Calls: every size in turn, round by round, so drift hits all alike; every host on
    // one CPU and the client on another, so no host is measured across CPUs and
    // another on one (placement.rs).
    let cpus = allowed_cpus()?;
    let (client_cpu, server_cpu) = (cpus[0], cpus.get(1).copied().unwrap_or(cpus[0]));
    let _client = ThreadPin::to(client_cpu)?;
    for host in &hosts {
        pin_process(host.child.id(), server_cpu)?;
    }
    let mut id = 10_000;
    for (size, host) in sizes.iter().zip(hosts.iter_mut()) {
        let tool = format!("p{:04}_greet", size.n - 1);
        host.calls(&tool, WARM_UP, id)?;
        id += WARM_UP as u64;
    }
    for _ in 0..ROUNDS {
        for (size, host) in sizes.iter_mut().zip(hosts.iter_mut()) {
            let tool = format!("p{:04}_greet", size.n - 1);
            let samples = host.calls(&tool, CALLS, id)?;
            id += CALLS as u64;
            size.calls.extend(&samples);
        }
    }
    for host in hosts {
        host.stop(Duration::from_secs(10))?;
    }
    for size in &sizes {
        println!(
            "  {} {kind} plugins: greet over stdio, {} sequential calls: {}",
            size.n,
            size.calls.len(),
            latency(&size.calls)
        );
    }
    Ok(sizes)
}

/// The rows of one kind; `judged`: held to the targets (else reported).
fn rows_of(sizes: &[Size], copies: Copies, judged: bool) -> Vec<Row> {
    let kind = copies.label();
    let target = |limit: f64| {
        if judged {
            Target::AtMost(limit)
        } else {
            Target::Report
        }
    };
    let mut rows = Vec::new();
    for size in sizes {
        rows.push(Row::judged(
            format!("10 scale, {} {kind} plugins", size.n),
            format!(
                "cold p50 {}; warm p50 {}; RSS {}; list {} ({} pages); call p50 {}",
                time(size.cold.p50()),
                time(size.warm.p50()),
                bytes(size.rss),
                time(size.list.as_secs_f64()),
                size.pages,
                time(size.calls.p50())
            ),
            0.0,
            "-",
            Target::Report,
        ));
    }
    let first = &sizes[0];
    let last = &sizes[sizes.len() - 1];
    let warm = last.warm.p50();
    let mut warm_row = Row::judged(
        format!("10 warm start to tools/list, {} {kind} plugins", last.n),
        format!("p50 {} (1 plugin: {})", time(warm), time(first.warm.p50())),
        warm,
        time(warm),
        target(1.0),
    );
    if judged {
        warm_row = warm_row.with_unit(" s");
    }
    rows.push(warm_row);
    let growth = (last.rss as f64 - first.rss as f64) / (last.n - first.n) as f64 / MIB;
    let steps: Vec<String> = sizes
        .windows(2)
        .map(|pair| {
            let per = (pair[1].rss as f64 - pair[0].rss as f64) / (pair[1].n - pair[0].n) as f64;
            format!("{}->{}: {:.0} KiB", pair[0].n, pair[1].n, per / 1024.0)
        })
        .collect();
    let mut rss_row = Row::judged(
        format!(
            "10 idle RSS growth per plugin, {} -> {} {kind} plugins",
            first.n, last.n
        ),
        format!(
            "{} -> {}; per plugin by step {}",
            bytes(first.rss),
            bytes(last.rss),
            steps.join(", ")
        ),
        growth,
        format!("{:.0} KiB", growth * 1024.0),
        target(1.0),
    );
    if judged {
        rss_row = rss_row.with_unit(" MiB");
    }
    rows.push(rss_row);
    let ratio = last.calls.p50() / first.calls.p50();
    rows.push(Row::judged(
        format!(
            "10 greet call p50 over stdio: {} {kind} plugins / 1",
            last.n
        ),
        format!("{} vs {}", latency(&last.calls), latency(&first.calls)),
        ratio,
        format!("{ratio:.2}"),
        target(1.1),
    ));
    rows
}

/// Figure 12: hot reload of one plugin among 500 distinct ones. A warm `host run --watch`
/// over the 500 distinct plugins; sequential greet calls of the last plugin's tool
/// ([`CALLS`] before, as the baseline), then the first plugin's component is replaced
/// by another distinct copy (a new digest: compiled, quick code first) while the calls
/// go on, until `notifications/tools/list_changed` arrives and [`CALLS`] more calls
/// after it (at most 60 s). Reports the time from the write to the notification and the
/// p99 of the calls made while the reload ran against the baseline's.
pub(crate) fn reload(fixtures: &Fixtures) -> Result<Vec<Row>> {
    let n = SIZES[SIZES.len() - 1];
    let dir = plugin_dir(fixtures, n, Copies::Distinct)?;
    // Kept between runs (target/bench-data): filling it compiles 500 plugins.
    let cache = fixtures.data_dir.join("reload-cache");
    fill_cache(&dir, &cache)?;
    let mut command = Command::new(HOST);
    command
        .arg("run")
        .arg("--plugins")
        .arg(&dir)
        .arg("--cache-dir")
        .arg(&cache)
        .arg("--no-builtins")
        .arg("--watch");
    let mut host = Host::spawn_command(command)?;
    host.handshake()?;
    let tool = format!("p{:04}_greet", n - 1);
    let mut id = 10_000;
    host.calls(&tool, WARM_UP, id)?;
    id += WARM_UP as u64;
    let baseline = host.calls(&tool, CALLS, id)?;
    id += CALLS as u64;
    host.list_changed = false;
    let component = std::fs::read(fixtures.greet_wasm())?;
    let written = Instant::now();
    // A copy never compiled before (the cache is kept between runs).
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as usize % 90_000);
    std::fs::write(
        dir.join("p0000.wasm"),
        distinct_copy(&component, 10_000 + nonce),
    )?;
    let mut during = Samples::default();
    let mut noticed = None;
    let mut after = 0;
    while after < CALLS && written.elapsed() < Duration::from_secs(60) {
        let samples = host.calls(&tool, 1, id)?;
        id += 1;
        if noticed.is_none() {
            during.extend(&samples);
            if host.list_changed {
                noticed = Some(written.elapsed());
            }
        } else {
            after += 1;
        }
    }
    host.stop(Duration::from_secs(60))?;
    let noticed =
        noticed.context("no notifications/tools/list_changed within 60 s of the change")?;
    println!(
        "  reload of 1 of {n} plugins: list_changed {} after the write; other calls during it: {} ({} calls); before it: {}",
        time(noticed.as_secs_f64()),
        latency(&during),
        during.len(),
        latency(&baseline)
    );
    let p99 = during.p99();
    Ok(vec![
        Row::judged(
            format!("12 hot reload of 1 of {n} plugins: write to list_changed"),
            format!(
                "{} (the watcher polls every 500 ms)",
                time(noticed.as_secs_f64())
            ),
            noticed.as_secs_f64(),
            time(noticed.as_secs_f64()),
            Target::Report,
        ),
        Row::judged(
            format!("12 other calls' p99 during the reload, {n} plugins"),
            format!(
                "{} ({} calls; before: {})",
                latency(&during),
                during.len(),
                latency(&baseline)
            ),
            p99 * 1000.0,
            time(p99),
            Target::AtMost(10.0),
        )
        .with_unit(" ms"),
    ])
}
