//! Figure 9: one `tools/call` of greet through `host run` over a pipe, against the same
//! call dispatched in process.
//!
//! The client is raw JSON-RPC: request lines are formatted once and written as bytes,
//! answers are read line by line and checked for the greeting and their id, so the
//! client's own cost stays small next to the host's. Latency is from writing a request
//! to reading its answer; CPU per call is the `host run` process's CPU time (the sum
//! over its threads of `/proc/PID/task/TID/schedstat`) over the calls of a phase,
//! divided by their number. The in-process figure is `Registry::dispatch` of the same
//! greet plugin (fresh instance, as shipped) on this thread: its CPU time per call
//! (`/proc/thread-self/schedstat`) and latency. The floor the stdio call is judged
//! against (at most 1.5x, latency and CPU) adds to that a pipe round trip of the same
//! request line through `cat` as an echo server, measured in the same run with the
//! client and both servers on known CPUs ([`super::stdio_floor`]).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use toolhost::registry::{CallContext, Environment, ToolCall};

use super::calls::greet_registry;
use super::fixtures::Fixtures;
use super::placement;
use super::report::{latency, time, Row, Samples, Target};
use super::stdio_floor::{self, Echo};

pub(crate) const HOST: &str = env!("CARGO_BIN_EXE_host");
const GREETING: &str = "Hello, Ada!";
/// Calls of each timed phase.
pub(crate) const CALLS: usize = 2000;
/// Timed phases of each kind (sequential, in flight), interleaved with the baseline's.
const ROUNDS: usize = 2;
/// Requests kept outstanding in the concurrent phase.
const IN_FLIGHT: usize = 8;
/// The target's slack on top of twice the in-process CPU per call (docs/benchmarks.md).
const SLACK_US: f64 = 30.0;
/// In-process calls made one per wake-up, for the reference row.
const SPACED_CALLS: usize = 2000;
/// How long the thread sleeps before each of them: about a sequential stdio round trip.
const SPACING: Duration = Duration::from_micros(100);

/// `host run` with greet only, warm compile cache.
pub(crate) struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Server {
    fn spawn(binary: &Path, fixtures: &Fixtures) -> Result<Server> {
        Self::spawn_with(binary, fixtures, &[])
    }

    /// [`Server::spawn`] with `extra` flags.
    pub(crate) fn spawn_with(
        binary: &Path,
        fixtures: &Fixtures,
        extra: &[std::ffi::OsString],
    ) -> Result<Server> {
        Self::start(Self::command(Command::new(binary), fixtures, extra), binary)
    }

    /// [`Server::spawn_with`] with every thread of the process on `cpu`.
    pub(crate) fn spawn_pinned(
        binary: &Path,
        fixtures: &Fixtures,
        extra: &[std::ffi::OsString],
        cpu: usize,
    ) -> Result<Server> {
        let command = Self::command(placement::pinned(binary.as_os_str(), cpu), fixtures, extra);
        Self::start(command, binary)
            .with_context(|| format!("pinned to CPU {cpu} by taskset (util-linux)"))
    }

    /// `command` (the host binary, perhaps behind a wrapper) with `host run`'s arguments.
    fn command(mut command: Command, fixtures: &Fixtures, extra: &[std::ffi::OsString]) -> Command {
        command
            .arg("run")
            .arg("--plugins")
            .arg(&fixtures.greet_dir)
            .arg("--cache-dir")
            .arg(&fixtures.cache_dir)
            .arg("--no-builtins")
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        command
    }

    /// Starts `command` and initializes its MCP session.
    fn start(mut command: Command, binary: &Path) -> Result<Server> {
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("no stdout")?);
        let mut server = Server {
            child,
            stdin,
            stdout,
            line: String::new(),
        };
        server.write(
            br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
"#,
        )?;
        server.answer()?;
        Ok(server)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.stdin.write_all(bytes)?;
        self.stdin.flush()?;
        Ok(())
    }

    /// The next answer's id (after checking it is a greeting, for ids > 0).
    fn answer(&mut self) -> Result<u64> {
        self.line.clear();
        if self.stdout.read_line(&mut self.line)? == 0 {
            bail!("host run closed its stdout");
        }
        let line = self.line.as_str();
        let id = line
            .split_once("\"id\":")
            .and_then(|(_, rest)| {
                let digits = rest.trim_start();
                let end = digits
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(digits.len());
                digits[..end].parse::<u64>().ok()
            })
            .with_context(|| format!("an answer without a numeric id: {line}"))?;
        if id > 0 && (!line.contains(GREETING) || line.contains("\"isError\":true")) {
            bail!("greet answered {line}");
        }
        Ok(id)
    }

    /// CPU seconds of each of the process's threads so far, by thread id
    /// (`/proc/PID/task/TID/schedstat`: nanoseconds on the CPU). Per thread and in
    /// nanoseconds, since `/proc/PID/stat` counts 10 ms ticks, too coarse for a few
    /// thousand calls; a thread that ends during a phase loses its share (tokio's
    /// workers and the blocking pool's threads live for seconds).
    fn cpu(&self) -> Result<HashMap<u64, f64>> {
        process_cpu(self.child.id())
    }

    /// CPU seconds the process's threads spent since `before` ([`Server::cpu`]).
    fn cpu_since(&self, before: &HashMap<u64, f64>) -> Result<f64> {
        process_cpu_since(self.child.id(), before)
    }

    pub(crate) fn stop(mut self) -> Result<()> {
        drop(self.stdin);
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

/// CPU seconds of each of process `pid`'s threads so far, by thread id
/// (`/proc/PID/task/TID/schedstat`: nanoseconds on the CPU). Per thread and in
/// nanoseconds, since `/proc/PID/stat` counts 10 ms ticks, too coarse for a few
/// thousand calls; a thread that ends during a phase loses its share (tokio's
/// workers and the blocking pool's threads live for seconds).
pub(crate) fn process_cpu(pid: u32) -> Result<HashMap<u64, f64>> {
    let mut threads = HashMap::new();
    for tid in thread_ids(pid)? {
        let schedstat = format!("/proc/{pid}/task/{tid}/schedstat");
        let Ok(stat) = std::fs::read_to_string(schedstat) else {
            continue;
        };
        if let Some(ns) = stat
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<f64>().ok())
        {
            threads.insert(tid, ns / 1e9);
        }
    }
    Ok(threads)
}

/// The ids of process `pid`'s threads now (`/proc/PID/task`).
pub(crate) fn thread_ids(pid: u32) -> Result<Vec<u64>> {
    let mut ids = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        if let Some(tid) = task?.file_name().to_str().and_then(|t| t.parse().ok()) {
            ids.push(tid);
        }
    }
    Ok(ids)
}

/// CPU seconds process `pid`'s threads spent since `before` ([`process_cpu`]).
pub(crate) fn process_cpu_since(pid: u32, before: &HashMap<u64, f64>) -> Result<f64> {
    Ok(process_cpu(pid)?
        .iter()
        .map(|(tid, now)| now - before.get(tid).copied().unwrap_or(0.0))
        .sum())
}

pub(crate) fn request(id: u64) -> Vec<u8> {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"greet\",\"arguments\":{{\"name\":\"Ada\"}}}}}}\n"
    )
    .into_bytes()
}

/// One phase: `CALLS` calls, `in_flight` outstanding at a time. Adds the latencies to
/// `samples` and returns the host's CPU seconds spent.
pub(crate) fn phase(
    server: &mut Server,
    first_id: u64,
    in_flight: usize,
    samples: &mut Samples,
) -> Result<f64> {
    let requests: Vec<Vec<u8>> = (0..CALLS as u64).map(|i| request(first_id + i)).collect();
    let mut sent_at: HashMap<u64, Instant> = HashMap::with_capacity(in_flight * 2);
    let cpu = server.cpu()?;
    let mut answered = 0;
    let mut next = 0;
    while next < in_flight.min(CALLS) {
        sent_at.insert(first_id + next as u64, Instant::now());
        server.write(&requests[next])?;
        next += 1;
    }
    while answered < CALLS {
        let id = server.answer()?;
        answered += 1;
        let started = sent_at
            .remove(&id)
            .with_context(|| format!("an answer to id {id}, which is not outstanding"))?;
        samples.push(started.elapsed());
        if next < CALLS {
            sent_at.insert(first_id + next as u64, Instant::now());
            server.write(&requests[next])?;
            next += 1;
        }
    }
    server.cpu_since(&cpu)
}

/// What one build gave: latencies and host CPU per call, sequential and in flight.
struct Measured {
    sequential: Samples,
    sequential_cpu: f64,
    parallel: Samples,
    parallel_cpu: f64,
}

/// This thread's CPU time in seconds (`CLOCK_THREAD_CPUTIME_ID`: exact, where
/// `/proc/thread-self/schedstat` only moves at scheduler ticks for a running thread).
fn thread_cpu() -> f64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    now.tv_sec as f64 + now.tv_nsec as f64 / 1e9
}

/// Figure 9.
pub(crate) fn stdio(fixtures: &Fixtures) -> Result<Vec<Row>> {
    // In process: the same greet, dispatched on this thread (current-thread runtime,
    // so the CPU time of this thread is the call's).
    let (_host, registry) = greet_registry(fixtures, true)?;
    let local = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (ctx, env) = (CallContext::new(), Environment::generate());
    let call = ToolCall::new("greet", r#"{"name":"Ada"}"#);
    let (inproc, inproc_cpu, spaced_cpu) = local.block_on(async {
        for _ in 0..500 {
            registry.dispatch(&ctx, &call, &env).await?;
        }
        let mut samples = Samples::with_capacity(CALLS);
        let cpu = thread_cpu();
        for _ in 0..CALLS {
            let started = Instant::now();
            let result = registry.dispatch(&ctx, &call, &env).await?;
            samples.push(started.elapsed());
            if result.content != GREETING {
                bail!("greet returned {}", result.content);
            }
        }
        let hot = (thread_cpu() - cpu) / CALLS as f64;
        // The same calls one at a time with the thread asleep in between, as a server
        // waits for its client's next request: each call starts on cold caches after a
        // wake-up. The gap between this and the hot loop is what any round trip pays.
        let cpu = thread_cpu();
        for _ in 0..SPACED_CALLS {
            std::thread::sleep(SPACING);
            registry.dispatch(&ctx, &call, &env).await?;
        }
        let spaced = (thread_cpu() - cpu) / SPACED_CALLS as f64;
        Ok::<_, anyhow::Error>((samples, hot, spaced))
    })?;

    let binaries: Vec<std::path::PathBuf> = std::iter::once(HOST.into())
        .chain(super::process::baseline())
        .collect();
    let mut servers = binaries
        .iter()
        .map(|binary| Server::spawn(binary, fixtures))
        .collect::<Result<Vec<_>>>()?;
    let mut measured: Vec<Measured> = servers
        .iter()
        .map(|_| Measured {
            sequential: Samples::with_capacity(CALLS * ROUNDS),
            sequential_cpu: 0.0,
            parallel: Samples::with_capacity(CALLS * ROUNDS),
            parallel_cpu: 0.0,
        })
        .collect();
    // Warm-up: code, allocator and pool slots.
    for server in &mut servers {
        phase(server, 1_000_000, IN_FLIGHT, &mut Samples::default())?;
    }
    let mut echo = Echo::spawn(None)?;
    let (mut echoed, mut echo_cpu) = (Samples::with_capacity(CALLS * ROUNDS), 0.0);
    echo.phase(1_000_000, &mut Samples::default())?;
    let mut id = 1;
    for _ in 0..ROUNDS {
        for (server, m) in servers.iter_mut().zip(&mut measured) {
            m.sequential_cpu += phase(server, id, 1, &mut m.sequential)?;
            id += CALLS as u64;
            m.parallel_cpu += phase(server, id, IN_FLIGHT, &mut m.parallel)?;
            id += CALLS as u64;
        }
        echo_cpu += echo.phase(id, &mut echoed)?;
        id += CALLS as u64;
    }
    echo.stop()?;
    for server in servers {
        server.stop()?;
    }
    let per_call = (CALLS * ROUNDS) as f64;
    let echo_cpu = echo_cpu / per_call;
    let (seq_cpu, par_cpu) = (
        measured[0].sequential_cpu / per_call,
        measured[0].parallel_cpu / per_call,
    );
    let (sequential, parallel) = (&measured[0].sequential, &measured[0].parallel);
    let wall_8 = parallel.total() / IN_FLIGHT as f64;

    let us = |s: f64| s * 1e6;
    println!(
        "  greet over stdio, {} calls each: sequential {} ({} host CPU/call); {IN_FLIGHT} in flight {} ({} host CPU/call, ~{:.0} calls/s); in process {} ({} CPU/call)",
        CALLS * ROUNDS,
        latency(sequential),
        time(seq_cpu),
        latency(parallel),
        time(par_cpu),
        per_call / wall_8.max(f64::MIN_POSITIVE),
        latency(&inproc),
        time(inproc_cpu),
    );
    let budget = 2.0 * inproc_cpu + SLACK_US * 1e-6;
    let mut rows = vec![
        Row::judged(
            "9 stdio round trip: greet via host run, sequential",
            format!(
                "p50 {} p99 {}; in process p50 {}",
                time(sequential.p50()),
                time(sequential.p99()),
                time(inproc.p50())
            ),
            0.0,
            format!("{:.1}x in process", sequential.p50() / inproc.p50()),
            Target::Report,
        ),
        Row::judged(
            format!("9 stdio round trip: greet via host run, {IN_FLIGHT} in flight"),
            format!("p50 {} p99 {}", time(parallel.p50()), time(parallel.p99())),
            0.0,
            format!("{:.1}x sequential p50", parallel.p50() / sequential.p50()),
            Target::Report,
        ),
        Row::judged(
            "9 stdio host CPU per call (sequential) / (2 x in process + 30 µs)",
            format!(
                "stdio {:.1} µs ({IN_FLIGHT} in flight {:.1} µs); in process {:.1} µs; budget {:.1} µs",
                us(seq_cpu),
                us(par_cpu),
                us(inproc_cpu),
                us(budget)
            ),
            seq_cpu / budget,
            format!("{:.2} ({:+.1} µs)", seq_cpu / budget, us(seq_cpu - budget)),
            Target::AtMost(1.0),
        ),
        Row::judged(
            "9 reference: in process, one call per wake-up (100 µs asleep between calls)",
            format!(
                "{:.1} µs CPU/call against {:.1} µs back to back; stdio sequential {:.1} µs",
                us(spaced_cpu),
                us(inproc_cpu),
                us(seq_cpu)
            ),
            0.0,
            format!("stdio - this: {:+.1} µs", us(seq_cpu - spaced_cpu)),
            Target::Report,
        ),
    ];
    // The floor: the same dispatch in process plus a pipe round trip to an echo server,
    // judged with both servers pinned (stdio_floor.rs says why).
    rows.extend(stdio_floor::rows(
        fixtures,
        (inproc.p50(), inproc_cpu),
        (sequential, seq_cpu),
        (&echoed, echo_cpu),
    )?);
    if let Some(base) = measured.get(1) {
        let ratio = sequential.p50() / base.sequential.p50();
        println!(
            "  baseline {}: sequential {} ({} host CPU/call); {IN_FLIGHT} in flight {} ({} host CPU/call)",
            binaries[1].display(),
            latency(&base.sequential),
            time(base.sequential_cpu / per_call),
            latency(&base.parallel),
            time(base.parallel_cpu / per_call),
        );
        rows.push(Row::judged(
            "9 stdio p50 latency, sequential: this build / baseline",
            format!(
                "p50 {} vs {}; {IN_FLIGHT} in flight {} vs {}",
                time(sequential.p50()),
                time(base.sequential.p50()),
                time(parallel.p50()),
                time(base.parallel.p50())
            ),
            ratio,
            format!("{ratio:.2}"),
            Target::AtMost(0.7),
        ));
    } else {
        rows.push(Row::skipped(
            "9 stdio p50 latency, sequential: this build / baseline",
            "no baseline build (set BENCH_BASELINE_HOST; see docs/benchmarks.md)",
        ));
    }
    Ok(rows)
}
