//! Figures 5 and 8: the `host run` process (the release binary of this package), spoken to
//! over stdio as an MCP client would.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::fixtures::{Fixtures, COUNTED_FILE, FIVE, FIVE_TOOLS};
use super::report::{bytes, latency, Row, Samples, Target};

const HOST: &str = env!("CARGO_BIN_EXE_host");

/// A running `host run`.
struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    stderr_file: std::path::PathBuf,
}

impl Host {
    /// Starts `host run` on the five plugins with `cache` as the compile cache.
    fn spawn(fixtures: &Fixtures, cache: &Path, extra: &[&str]) -> Result<Host> {
        let stderr_file = fixtures.scratch.path().join("host-stderr.log");
        let stderr = std::fs::File::create(&stderr_file)?;
        let mut child = Command::new(HOST)
            .arg("run")
            .arg("--plugins")
            .arg(&fixtures.five_dir)
            .arg("--cache-dir")
            .arg(cache)
            .arg("--root")
            .arg(&fixtures.root)
            .args(["--plugin-files", "read"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("cannot start {HOST}"))?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("no stdout")?);
        Ok(Host {
            child,
            stdin: Some(stdin),
            stdout,
            stderr_file,
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

    fn request(&mut self, id: u64, method: &str, params: Value) -> Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
    }

    /// Reads messages until the response to one of `ids` arrives; returns it.
    fn response(&mut self) -> Result<Value> {
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line)? == 0 {
                let log = std::fs::read_to_string(&self.stderr_file).unwrap_or_default();
                let tail: String = log.lines().rev().take(20).collect::<Vec<_>>().join("\n");
                bail!("host run closed its stdout; its stderr ends with:\n{tail}");
            }
            let message: Value = serde_json::from_str(&line)
                .with_context(|| format!("host run wrote a non-JSON line: {line}"))?;
            if message.get("id").is_some() {
                return Ok(message);
            }
        }
    }

    /// `initialize`, `notifications/initialized` and `tools/list`, pipelined; returns the
    /// tool names once the `tools/list` answer is in.
    fn handshake(&mut self) -> Result<Vec<String>> {
        self.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
        )?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        self.request(2, "tools/list", json!({}))?;
        loop {
            let message = self.response()?;
            if message["id"] == 2 {
                let tools = message["result"]["tools"]
                    .as_array()
                    .with_context(|| format!("tools/list answered {message}"))?;
                return Ok(tools
                    .iter()
                    .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
                    .collect());
            }
        }
    }

    /// Sends `calls` tools/call requests at once and waits for all answers; returns how
    /// many were errors.
    fn calls(&mut self, first_id: u64, calls: &[(&str, Value)]) -> Result<usize> {
        for (i, (name, arguments)) in calls.iter().enumerate() {
            self.request(
                first_id + i as u64,
                "tools/call",
                json!({"name": name, "arguments": arguments}),
            )?;
        }
        let mut errors = 0;
        for _ in calls {
            let message = self.response()?;
            if message.get("error").is_some() || message["result"]["isError"] == true {
                errors += 1;
            }
        }
        Ok(errors)
    }

    fn status(&self, field: &str) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let line = status
            .lines()
            .find(|line| line.starts_with(field))
            .with_context(|| format!("no {field} in /proc/PID/status"))?;
        let kib: u64 = line
            .split_whitespace()
            .nth(1)
            .context("malformed status line")?
            .parse()?;
        Ok(kib * 1024)
    }

    /// Resets the process's peak RSS (VmHWM) to its current RSS.
    fn reset_peak(&self) -> Result<()> {
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5")
            .context("cannot reset VmHWM through /proc/PID/clear_refs")
    }

    /// Closes stdin (the server exits at end of input) and waits; kills it after 5 s.
    fn stop(mut self) -> Result<()> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.child.kill()?;
        self.child.wait()?;
        bail!("host run did not exit within 5 s of the end of its input")
    }
}

fn check_tools(names: &[String]) -> Result<()> {
    let missing: Vec<&str> = FIVE_TOOLS
        .iter()
        .copied()
        .filter(|tool| !names.iter().any(|name| name == tool))
        .collect();
    if !missing.is_empty() {
        bail!("tools/list lacks the plugin tools {missing:?}; it holds {names:?}");
    }
    Ok(())
}

/// From spawn to the `tools/list` answer.
fn start_once(fixtures: &Fixtures, cache: &Path) -> Result<Duration> {
    let started = Instant::now();
    let mut host = Host::spawn(fixtures, cache, &[])?;
    let names = host.handshake()?;
    let elapsed = started.elapsed();
    check_tools(&names)?;
    host.stop()?;
    Ok(elapsed)
}

/// Figure 5: start to the first `tools/list` answer, empty vs filled compile cache.
pub(crate) fn start(fixtures: &Fixtures) -> Result<Vec<Row>> {
    const COLD: usize = 3;
    const WARM: usize = 10;
    let mut cold = Samples::default();
    let mut warm = Samples::default();
    let mut cache = fixtures.scratch.path().join("start-cache-0");
    // One untimed start pages the binary in.
    start_once(
        fixtures,
        &fixtures.scratch.path().join("start-cache-warmup"),
    )?;
    for round in 0..COLD {
        cache = fixtures.scratch.path().join(format!("start-cache-{round}"));
        cold.push(start_once(fixtures, &cache)?);
        for _ in 0..WARM / COLD + 1 {
            if warm.len() < WARM {
                warm.push(start_once(fixtures, &cache)?);
            }
        }
    }
    let cached = std::fs::read_dir(&cache).map_or(0, |dir| dir.count());
    let ratio = warm.p50() / cold.p50();
    println!(
        "  start with {} plugins to tools/list: cold {} ({COLD} runs), warm {} ({WARM} runs); cache dir entries {cached}",
        FIVE.len(),
        latency(&cold),
        latency(&warm)
    );
    Ok(vec![Row::judged(
        "5 start to tools/list, 5 plugins: warm / cold cache",
        format!("cold {}; warm {}", latency(&cold), latency(&warm)),
        ratio,
        format!("{ratio:.3}"),
        Target::AtMost(0.1),
    )])
}

/// Figure 8: RSS of `host run` idle with the five plugins, and its peak during rounds of
/// 8 concurrent calls.
pub(crate) fn memory(fixtures: &Fixtures) -> Result<Vec<Row>> {
    const ROUNDS: usize = 20;
    let cache = fixtures.scratch.path().join("memory-cache");
    start_once(fixtures, &cache)?;
    let mut host = Host::spawn(fixtures, &cache, &["--plugin-timeout", "200ms"])?;
    check_tools(&host.handshake()?)?;
    std::thread::sleep(Duration::from_millis(300));
    let idle = host.status("VmRSS:")?;
    let startup_peak = host.status("VmHWM:")?;

    let reset = host.reset_peak();
    let counted = vec![("wordcount", json!({"path": COUNTED_FILE})); 8];
    let mut errors = 0;
    let mut id = 100;
    for _ in 0..ROUNDS {
        errors += host.calls(id, &counted)?;
        id += 8;
    }
    let peak_counting = host.status("VmHWM:")?;

    // Calls held open together: hostile_loop spins until its 200 ms deadline, yielding
    // at every epoch tick, so all 8 instances are alive at once.
    let held = host.reset_peak();
    let spinning = vec![("hostile_loop", json!({})); 8];
    let timed_out = host.calls(id, &spinning)?;
    let peak_held = host.status("VmHWM:")?;
    let after = host.status("VmRSS:")?;
    host.stop()?;

    let note = match (&reset, &held) {
        (Ok(()), Ok(())) => String::new(),
        (Err(err), _) | (_, Err(err)) => {
            format!(" (peaks include the start-up: {err:#})")
        }
    };
    println!(
        "  host run RSS: idle {}, start-up peak {}; peak during {ROUNDS}x8 wordcount calls of 1 MiB {} ({errors} errors); peak with 8 calls held open {} ({timed_out}/8 timed out as intended); after {}{note}",
        bytes(idle),
        bytes(startup_peak),
        bytes(peak_counting),
        bytes(peak_held),
        bytes(after)
    );
    let mut rows = vec![
        Row::judged(
            "8 RSS idle, 5 plugins loaded (host run)",
            format!("{} (start-up peak {})", bytes(idle), bytes(startup_peak)),
            0.0,
            "-",
            Target::Report,
        ),
        Row::judged(
            "8 peak RSS, 8 concurrent wordcount calls (1 MiB file)",
            format!("{}{note}", bytes(peak_counting)),
            0.0,
            format!("{:.2} x idle", peak_counting as f64 / idle as f64),
            Target::Report,
        ),
        Row::judged(
            "8 peak RSS, 8 calls held open at once",
            format!("{}{note}", bytes(peak_held)),
            0.0,
            format!("{:.2} x idle", peak_held as f64 / idle as f64),
            Target::Report,
        ),
    ];
    if errors > 0 || timed_out != 8 {
        rows.push(Row::failed(
            "8 memory run calls",
            format!("{errors} wordcount calls failed; {timed_out}/8 hostile_loop calls timed out (want 0 and 8)"),
        ));
    }
    Ok(rows)
}
