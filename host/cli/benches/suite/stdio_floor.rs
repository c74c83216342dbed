//! Figure 9's floor: what the stdio round trip is judged against, measured with the
//! client and the server on known CPUs.
//!
//! The floor is the same greet dispatched in process plus a pipe round trip of the same
//! request line through `cat` as an echo server. A round trip's cost depends on where
//! the client and the server run (placement.rs: on this guest a cross-CPU wake-up costs
//! ~40 µs), and unpinned, `host run` and `cat` were often placed differently: p50 20 µs
//! in one run and 60 µs in the next for the same binary (docs/benchmarks.md, figure 9).
//! The judged rows therefore run both servers the same way, once on the client's CPU
//! and once on another, and compare each host figure with the floor of the same
//! placement. The unpinned figures are reported beside them.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::fixtures::Fixtures;
use super::placement::{allowed_cpus, pinned, ThreadPin};
use super::report::{latency, time, Row, Samples, Target};
use super::stdio::{phase, process_cpu, process_cpu_since, request, Server, CALLS, HOST};

/// Timed phases of each kind per placement, the host's and the echo's interleaved.
const ROUNDS: usize = 2;
/// The target: the host's p50 and CPU per call at most this times the floor's.
const OVER_FLOOR: f64 = 1.5;

/// Where the client (the bench's thread) and the server (`host run` or `cat`) run.
#[derive(Clone, Copy)]
enum Placement {
    /// Both on one CPU: a request and its answer wake a thread on the CPU they were
    /// written on.
    OneCpu { cpu: usize },
    /// The client on one CPU, every thread of the server on another: each request and
    /// each answer wakes the other CPU.
    TwoCpus { client: usize, server: usize },
}

impl Placement {
    fn client(self) -> usize {
        match self {
            Placement::OneCpu { cpu } => cpu,
            Placement::TwoCpus { client, .. } => client,
        }
    }

    fn server(self) -> usize {
        match self {
            Placement::OneCpu { cpu } => cpu,
            Placement::TwoCpus { server, .. } => server,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Placement::OneCpu { .. } => "client and server on one CPU",
            Placement::TwoCpus { .. } => "client and server on two CPUs",
        }
    }
}

/// One host figure (sequential calls) and the floor it is judged against.
struct Compared {
    host_p50: f64,
    host_cpu: f64,
    echo: Samples,
    echo_cpu: f64,
}

/// The floor rows: the host's sequential p50 and CPU per call over the floor's, for each
/// placement this machine allows (two CPUs only where the bench may use two), judged at
/// most 1.5x; and the unpinned figures measured by the caller, reported.
pub(crate) fn rows(
    fixtures: &Fixtures,
    in_process: (f64, f64),
    unpinned_host: (&Samples, f64),
    unpinned_echo: (&Samples, f64),
) -> Result<Vec<Row>> {
    let cpus = allowed_cpus()?;
    let first = cpus[0];
    let mut placements = vec![Placement::OneCpu { cpu: first }];
    if let Some(&second) = cpus.get(1) {
        placements.push(Placement::TwoCpus {
            client: first,
            server: second,
        });
    }
    let mut rows = Vec::new();
    for placement in placements {
        let measured = measure(fixtures, placement);
        let compared = measured.with_context(|| format!("figure 9, {}", placement.label()))?;
        rows.extend(judged(placement.label(), in_process, &compared, true));
    }
    if cpus.len() < 2 {
        rows.push(Row::skipped(
            "9 stdio sequential / floor, client and server on two CPUs",
            "the bench may use one CPU only",
        ));
    }
    let unpinned = Compared {
        host_p50: unpinned_host.0.p50(),
        host_cpu: unpinned_host.1,
        echo: unpinned_echo.0.clone(),
        echo_cpu: unpinned_echo.1,
    };
    rows.extend(judged(
        "as the kernel places them (the host's and cat's placements may differ)",
        in_process,
        &unpinned,
        false,
    ));
    Ok(rows)
}

/// The host's and the echo's sequential round trips with this thread and both servers
/// pinned as `placement` says.
fn measure(fixtures: &Fixtures, placement: Placement) -> Result<Compared> {
    let _client = ThreadPin::to(placement.client())?;
    measure_pinned(fixtures, placement.server())
}

fn measure_pinned(fixtures: &Fixtures, server_cpu: usize) -> Result<Compared> {
    let mut host = Server::spawn_pinned(HOST.as_ref(), fixtures, &[], server_cpu)?;
    let mut echo = Echo::spawn(Some(server_cpu))?;
    // Warm-up: code, allocator and pool slots.
    phase(&mut host, 1_000_000, 1, &mut Samples::default())?;
    echo.phase(1_000_000, &mut Samples::default())?;
    let (mut host_samples, mut host_cpu) = (Samples::with_capacity(CALLS * ROUNDS), 0.0);
    let (mut echoed, mut echo_cpu) = (Samples::with_capacity(CALLS * ROUNDS), 0.0);
    let mut id = 1;
    for _ in 0..ROUNDS {
        host_cpu += phase(&mut host, id, 1, &mut host_samples)?;
        id += CALLS as u64;
        echo_cpu += echo.phase(id, &mut echoed)?;
        id += CALLS as u64;
    }
    echo.stop()?;
    host.stop()?;
    let calls = (CALLS * ROUNDS) as f64;
    Ok(Compared {
        host_p50: host_samples.p50(),
        host_cpu: host_cpu / calls,
        echo: echoed,
        echo_cpu: echo_cpu / calls,
    })
}

/// The p50 and CPU rows of one placement: judged at most [`OVER_FLOOR`], or reported.
fn judged(
    label: &str,
    (inproc_p50, inproc_cpu): (f64, f64),
    c: &Compared,
    judge: bool,
) -> Vec<Row> {
    let floor_p50 = inproc_p50 + c.echo.p50();
    let floor_cpu = inproc_cpu + c.echo_cpu;
    println!(
        "  {label}: host sequential p50 {}, CPU {}; floor: in process p50 {} + echo {} = {}; CPU {} + {} = {}",
        time(c.host_p50),
        time(c.host_cpu),
        time(inproc_p50),
        latency(&c.echo),
        time(floor_p50),
        time(inproc_cpu),
        time(c.echo_cpu),
        time(floor_cpu)
    );
    let target = if judge {
        Target::AtMost(OVER_FLOOR)
    } else {
        Target::Report
    };
    let (over_p50, over_cpu) = (c.host_p50 / floor_p50, c.host_cpu / floor_cpu);
    let us = |s: f64| s * 1e6;
    vec![
        Row::judged(
            format!("9 stdio sequential p50 / floor, {label}"),
            format!(
                "p50 {} vs {} in process + {} echo",
                time(c.host_p50),
                time(inproc_p50),
                time(c.echo.p50())
            ),
            if judge { over_p50 } else { 0.0 },
            format!("{over_p50:.2}"),
            target,
        ),
        Row::judged(
            format!("9 stdio host CPU per call / floor, {label}"),
            format!(
                "{:.1} µs vs {:.1} in process + {:.1} µs echo",
                us(c.host_cpu),
                us(inproc_cpu),
                us(c.echo_cpu)
            ),
            if judge { over_cpu } else { 0.0 },
            format!("{over_cpu:.2}"),
            target,
        ),
    ]
}

/// The pipe round trip's floor: `cat` as an echo server, sent the same request lines
/// one at a time (each read back whole before the next is written).
pub(crate) struct Echo {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Echo {
    /// `cat`, on `cpu` if one is given.
    pub(crate) fn spawn(cpu: Option<usize>) -> Result<Echo> {
        let mut command = match cpu {
            Some(cpu) => pinned("cat".as_ref(), cpu),
            None => Command::new("cat"),
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start cat (the echo server of the pipe round trip)")?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("no stdout")?);
        Ok(Echo {
            child,
            stdin,
            stdout,
            line: String::new(),
        })
    }

    /// [`CALLS`] sequential round trips; adds their latencies to `samples` and returns
    /// the echo server's CPU seconds.
    pub(crate) fn phase(&mut self, first_id: u64, samples: &mut Samples) -> Result<f64> {
        let requests: Vec<Vec<u8>> = (0..CALLS as u64).map(|i| request(first_id + i)).collect();
        let cpu = process_cpu(self.child.id())?;
        for request in &requests {
            let started = Instant::now();
            self.stdin.write_all(request)?;
            self.stdin.flush()?;
            self.line.clear();
            if self.stdout.read_line(&mut self.line)? == 0 {
                bail!("the echo server closed its stdout");
            }
            samples.push(started.elapsed());
            if self.line.as_bytes() != request.as_slice() {
                bail!("the echo server answered {:?}", self.line);
            }
        }
        process_cpu_since(self.child.id(), &cpu)
    }

    pub(crate) fn stop(mut self) -> Result<()> {
        drop(self.stdin);
        self.child.wait()?;
        Ok(())
    }
}
