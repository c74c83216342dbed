//! Figure 13: what the operator's view costs a call. The stdio round trip of figure 9
//! (greet through `host run`, sequential and 8 in flight) with the audit log, the metrics
//! listener and trace export all on (`--audit-log`, `--metrics`, `--otlp-endpoint` to a
//! loopback collector that answers 200 to every export), against all off, in interleaved
//! phases of the same run. Targets (docs/benchmarks.md): p50 and host CPU per call with
//! everything on at most 1.10x of everything off. Every server runs on one CPU and the
//! client on another (one CPU for all where the bench has only one): unpinned, two
//! servers of the same run could be placed differently and differ by a cross-CPU
//! wake-up, not by what they do ([`super::stdio_floor`]).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use anyhow::Result;

use super::fixtures::Fixtures;
use super::placement::{allowed_cpus, ThreadPin};
use super::report::{time, Row, Samples, Target};
use super::stdio::{phase, Server, CALLS, HOST};

/// Timed phases of each kind per server, interleaved.
const ROUNDS: usize = 3;
/// Requests kept outstanding in the concurrent phase.
const IN_FLIGHT: usize = 8;

/// A loopback OTLP collector answering 200 to every export, in a thread that lives as
/// long as the process (the bench exits after its figures). Its base URL.
fn collector() -> Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || {
                let Ok(mut writer) = stream.try_clone() else {
                    return;
                };
                let mut reader = BufReader::new(stream);
                // Keep-alive: one request after another on the connection.
                loop {
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        match reader.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        let line = line.trim_end().to_ascii_lowercase();
                        if line.is_empty() {
                            break;
                        }
                        if let Some(value) = line.strip_prefix("content-length:") {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length.min(64 << 20)];
                    if reader.read_exact(&mut body).is_err()
                        || writer
                            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                            .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    Ok(url)
}

/// Latencies and host CPU of one server's phases.
#[derive(Default)]
struct Measured {
    sequential: Samples,
    sequential_cpu: f64,
    parallel: Samples,
    parallel_cpu: f64,
}

/// Figure 13.
pub(crate) fn observe(fixtures: &Fixtures) -> Result<Vec<Row>> {
    let dir = tempfile::tempdir()?;
    let audit = dir.path().join("audit.jsonl");
    let audit_flags: Vec<OsString> = vec!["--audit-log".into(), audit.clone().into()];
    let metrics_flags: Vec<OsString> = vec!["--metrics".into(), "127.0.0.1:0".into()];
    let trace_flags: Vec<OsString> = vec!["--otlp-endpoint".into(), collector()?.into()];
    let all: Vec<OsString> = [&audit_flags[..], &metrics_flags[..], &trace_flags[..]].concat();
    // Everything off, everything on, then each alone (to say where the cost is).
    let configs: [(&str, &[OsString]); 5] = [
        ("off", &[]),
        ("all on", &all),
        ("audit log", &audit_flags),
        ("metrics", &metrics_flags),
        ("traces", &trace_flags),
    ];
    let host = std::path::Path::new(HOST);
    let cpus = allowed_cpus()?;
    let (client_cpu, server_cpu) = (cpus[0], cpus.get(1).copied().unwrap_or(cpus[0]));
    let _client = ThreadPin::to(client_cpu)?;
    println!("  the client on CPU {client_cpu}, every server on CPU {server_cpu}");
    let mut servers = configs
        .iter()
        .map(|(_, flags)| Server::spawn_pinned(host, fixtures, flags, server_cpu))
        .collect::<Result<Vec<_>>>()?;
    let mut measured: Vec<Measured> = configs.iter().map(|_| Measured::default()).collect();
    for server in &mut servers {
        phase(server, 1_000_000, IN_FLIGHT, &mut Samples::default())?;
    }
    let mut id = 1;
    for _ in 0..ROUNDS {
        for (server, m) in servers.iter_mut().zip(&mut measured) {
            m.sequential_cpu += phase(server, id, 1, &mut m.sequential)?;
            id += CALLS as u64;
            m.parallel_cpu += phase(server, id, IN_FLIGHT, &mut m.parallel)?;
            id += CALLS as u64;
        }
    }
    for server in servers {
        server.stop()?;
    }
    // Every call was audited, by the two servers that audit: warm-up and timed phases.
    let records = std::fs::read_to_string(&audit)?.lines().count();
    let calls = 2 * CALLS * (1 + 2 * ROUNDS);
    anyhow::ensure!(
        records >= calls,
        "the audit log has {records} records for {calls} calls"
    );
    let per_call = (CALLS * ROUNDS) as f64;
    let off = &measured[0];
    for ((name, _), m) in configs.iter().zip(&measured) {
        println!(
            "  {name:>9}: sequential p50 {} ({} host CPU/call, {:+.1} µs); {IN_FLIGHT} in flight p50 {}",
            time(m.sequential.p50()),
            time(m.sequential_cpu / per_call),
            (m.sequential_cpu - off.sequential_cpu) / per_call * 1e6,
            time(m.parallel.p50()),
        );
    }
    let on = &measured[1];
    let p50 = on.sequential.p50() / off.sequential.p50();
    let cpu = on.sequential_cpu / off.sequential_cpu;
    let p50_8 = on.parallel.p50() / off.parallel.p50();
    let mut rows = vec![
        Row::judged(
            "13 audit+metrics+traces on / off: stdio p50, sequential",
            format!(
                "p50 {} vs {}",
                time(on.sequential.p50()),
                time(off.sequential.p50())
            ),
            p50,
            format!("{p50:.2}"),
            Target::AtMost(1.10),
        ),
        Row::judged(
            "13 audit+metrics+traces on / off: host CPU per call, sequential",
            format!(
                "{} vs {}",
                time(on.sequential_cpu / per_call),
                time(off.sequential_cpu / per_call)
            ),
            cpu,
            format!("{cpu:.2}"),
            Target::AtMost(1.10),
        ),
        Row::judged(
            format!("13 audit+metrics+traces on / off: stdio p50, {IN_FLIGHT} in flight"),
            format!(
                "p50 {} vs {}",
                time(on.parallel.p50()),
                time(off.parallel.p50())
            ),
            p50_8,
            format!("{p50_8:.2}"),
            Target::Report,
        ),
    ];
    for ((name, _), m) in configs.iter().zip(&measured).skip(2) {
        let ratio = m.sequential_cpu / off.sequential_cpu;
        rows.push(Row::judged(
            format!("13 {name} alone / off: host CPU per call, sequential"),
            format!(
                "{} vs {}",
                time(m.sequential_cpu / per_call),
                time(off.sequential_cpu / per_call)
            ),
            ratio,
            format!("{ratio:.2}"),
            Target::Report,
        ));
    }
    Ok(rows)
}
