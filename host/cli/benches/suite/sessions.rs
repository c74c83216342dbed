//! Figure 17: HTTP sessions. One `host serve --http` on loopback with greet only (warm
//! compile cache); the bench opens 1,000 sessions (each `initialize` and
//! `notifications/initialized` on its own HTTP/1.1 keep-alive connection, a minimal
//! client written here on tokio's `TcpStream`, so no HTTP client crate is needed).
//!
//! - **Idle memory**: the server's RSS after one warm-up session made [`WARM_UP`] calls
//!   and was deleted (0 sessions), then with 100 and 1,000 idle sessions (initialized,
//!   their connections open, no call): the RSS per idle session is the difference over
//!   the count.
//! - **Load**: 1, 100 and 1,000 of those sessions each call greet in a closed loop (the
//!   next call when the answer is read) for [`PHASE`]; the sizes take turns, [`ROUNDS`]
//!   times, so drift hits all alike. Throughput is the calls answered over the phases'
//!   time, latency from writing a request to reading its whole answer.
//!
//! The server gets room for the 1,000 sessions: `--max-connections`, `--max-sessions`
//! and `--max-pending-per-peer` 1,100 (the defaults are 256, 1,024 and 32: the bench's
//! connections all come from 127.0.0.1), `--max-in-flight` 1,100 (past it a call is
//! answered 503); it raises its own open-file limit to its hard limit, and so does the
//! bench for its client sockets. Client and server share the machine's cores: with
//! every session calling, the latency is mostly the queue (Little's law: sessions over
//! throughput), so the targets judge how the figures grow, not their size.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::fixtures::Fixtures;
use super::report::{bytes, latency, time, Row, Samples, Target};
use super::stdio::{process_cpu, process_cpu_since};

const HOST: &str = env!("CARGO_BIN_EXE_host");
/// Concurrent sessions of the load phases.
pub(crate) const SESSIONS: [usize; 3] = [1, 100, 1000];
/// How long each load phase runs.
const PHASE: Duration = Duration::from_secs(2);
/// Load phases per size, the sizes in turn.
const ROUNDS: usize = 2;
/// Calling tasks of the extra phase over the largest size.
const SPREAD_CALLERS: usize = 100;
/// Calls of the warm-up session before the idle RSS is taken.
const WARM_UP: usize = 500;
/// Sessions being opened at once.
const OPENING: usize = 32;
/// The server's connection, session and in-flight limits.
const ROOM: usize = 1100;
const GREETING: &str = "Hello, Ada!";

/// `host serve --http 127.0.0.1:0` with greet only.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn spawn(fixtures: &Fixtures) -> Result<Server> {
        let room = ROOM.to_string();
        let mut child = Command::new(HOST)
            .arg("serve")
            .arg("--http")
            .arg("127.0.0.1:0")
            .arg("--plugins")
            .arg(&fixtures.greet_dir)
            .arg("--cache-dir")
            .arg(&fixtures.cache_dir)
            .arg("--no-builtins")
            .args(["--max-connections", &room])
            .args(["--max-sessions", &room])
            .args(["--max-pending-per-peer", &room])
            .args(["--max-in-flight", &room])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start host serve --http")?;
        let stderr = child.stderr.take().context("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let marker = "Streamable HTTP on http://";
        let mut addr = None;
        // The ready line comes within a few lines (at most 200 read).
        for _ in 0..200 {
            let Some(line) = lines.next() else { break };
            let line = line?;
            if let Some(rest) = line.split(marker).nth(1) {
                addr = rest.split('/').next().map(str::to_owned);
                break;
            }
        }
        // Keep reading its log so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("host serve --http did not announce its address");
        };
        Ok(Server {
            child,
            addr: addr.parse().with_context(|| format!("address {addr:?}"))?,
        })
    }

    fn rss(&self) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let kib: u64 = status
            .lines()
            .find(|line| line.starts_with("VmRSS:"))
            .and_then(|line| line.split_whitespace().nth(1))
            .context("no VmRSS in /proc/PID/status")?
            .parse()?;
        Ok(kib * 1024)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One MCP session on one HTTP/1.1 keep-alive connection.
struct Session {
    addr: SocketAddr,
    stream: TcpStream,
    id: String,
    /// Bytes read past the last answer (none expected: one request at a time).
    buffer: Vec<u8>,
    request: Vec<u8>,
}

/// One HTTP answer.
struct Answer {
    status: u16,
    session: Option<String>,
    body: Vec<u8>,
}

impl Session {
    /// Connects, initializes and sends `notifications/initialized`.
    async fn open(addr: SocketAddr) -> Result<Session> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let mut session = Session {
            addr,
            stream,
            id: String::new(),
            buffer: Vec::with_capacity(4096),
            request: Vec::with_capacity(1024),
        };
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}});
        let answer = session.post("POST", &init.to_string()).await?;
        if answer.status != 200 {
            bail!(
                "initialize answered {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            );
        }
        session.id = answer
            .session
            .context("initialize gave no Mcp-Session-Id")?;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let answer = session.post("POST", &note.to_string()).await?;
        if answer.status != 202 {
            bail!("notifications/initialized answered {}", answer.status);
        }
        Ok(session)
    }

    /// One greet call; checks the greeting.
    async fn greet(&mut self, id: u64) -> Result<()> {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"greet","arguments":{{"name":"Ada"}}}}}}"#
        );
        let answer = self.post("POST", &body).await?;
        let text = String::from_utf8_lossy(&answer.body);
        if answer.status != 200 || !text.contains(GREETING) {
            bail!("greet answered {}: {text:.300}", answer.status);
        }
        Ok(())
    }

    /// Ends the session (`DELETE /mcp`).
    async fn delete(&mut self) -> Result<()> {
        let answer = self.post("DELETE", "").await?;
        if !matches!(answer.status, 200 | 202 | 204) {
            bail!("DELETE answered {}", answer.status);
        }
        Ok(())
    }

    /// Sends one request and reads its answer; reconnects once when the server closed
    /// the kept-alive connection (it does after 10 s idle).
    async fn post(&mut self, method: &str, body: &str) -> Result<Answer> {
        self.request.clear();
        self.request.extend_from_slice(
            format!(
                "{method} /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
                self.addr,
                body.len()
            )
            .as_bytes(),
        );
        if !self.id.is_empty() {
            self.request.extend_from_slice(
                format!(
                    "Mcp-Session-Id: {}\r\nMCP-Protocol-Version: 2025-06-18\r\n",
                    self.id
                )
                .as_bytes(),
            );
        }
        self.request.extend_from_slice(b"\r\n");
        self.request.extend_from_slice(body.as_bytes());
        let mut closed = None;
        for _ in 0..2 {
            let outcome = match self.stream.write_all(&self.request).await {
                Ok(()) => self.read_answer().await,
                Err(err) => Err(err.into()),
            };
            match outcome {
                Ok(answer) => return Ok(answer),
                // Closed before any byte of the answer: a new connection, once.
                Err(err) if self.buffer.is_empty() && closed.is_none() => closed = Some(err),
                Err(err) => return Err(err),
            }
            self.stream = TcpStream::connect(self.addr).await?;
            self.stream.set_nodelay(true)?;
            self.buffer.clear();
        }
        Err(closed.map_or_else(
            || anyhow::anyhow!("no answer"),
            |err| err.context("the connection closed twice"),
        ))
    }

    async fn fill(&mut self) -> Result<()> {
        let mut chunk = [0u8; 8192];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("the server closed the connection");
        }
        self.buffer.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// Reads one answer: its head, then a `Content-Length` or chunked body.
    async fn read_answer(&mut self) -> Result<Answer> {
        let head_end = loop {
            if let Some(at) = find(&self.buffer, b"\r\n\r\n") {
                break at;
            }
            if self.buffer.len() > 64 * 1024 {
                bail!("an answer's head over 64 KiB");
            }
            self.fill().await?;
        };
        let head = String::from_utf8_lossy(&self.buffer[..head_end]).into_owned();
        self.buffer.drain(..head_end + 4);
        let mut lines = head.split("\r\n");
        let status: u16 = lines
            .next()
            .and_then(|line| line.split(' ').nth(1))
            .and_then(|code| code.parse().ok())
            .with_context(|| format!("no status in {head:?}"))?;
        let (mut length, mut chunked, mut session) = (None, false, None);
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.parse::<usize>()?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            } else if name.eq_ignore_ascii_case("mcp-session-id") {
                session = Some(value.to_owned());
            } else if name.eq_ignore_ascii_case("content-type")
                && value.starts_with("text/event-stream")
            {
                bail!("an event stream answered a POST (the bench reads JSON answers only)");
            }
        }
        let body = if chunked {
            let mut body = Vec::new();
            loop {
                let line_end = loop {
                    if let Some(at) = find(&self.buffer, b"\r\n") {
                        break at;
                    }
                    self.fill().await?;
                };
                let size_text = String::from_utf8_lossy(&self.buffer[..line_end]).into_owned();
                let size =
                    usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                        .with_context(|| format!("chunk size {size_text:?}"))?;
                while self.buffer.len() < line_end + 2 + size + 2 {
                    self.fill().await?;
                }
                body.extend_from_slice(&self.buffer[line_end + 2..line_end + 2 + size]);
                self.buffer.drain(..line_end + 2 + size + 2);
                if size == 0 {
                    break body;
                }
            }
        } else {
            let length = length.unwrap_or(0);
            while self.buffer.len() < length {
                self.fill().await?;
            }
            self.buffer.drain(..length).collect()
        };
        Ok(Answer {
            status,
            session,
            body,
        })
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Opens `count` sessions, [`OPENING`] at a time.
async fn open_sessions(addr: SocketAddr, count: usize) -> Result<Vec<Session>> {
    let gate = Arc::new(tokio::sync::Semaphore::new(OPENING));
    let tasks: Vec<_> = (0..count)
        .map(|_| {
            let gate = Arc::clone(&gate);
            tokio::spawn(async move {
                let _permit = gate.acquire().await?;
                Session::open(addr).await
            })
        })
        .collect();
    let mut sessions = Vec::with_capacity(count);
    for task in tasks {
        sessions.push(task.await??);
    }
    Ok(sessions)
}

/// One load phase: the first `count` sessions call greet for [`PHASE`], from `callers`
/// tasks (each its share of the sessions in turn, one call at a time: `callers` calls
/// in flight at most). Returns the sessions, the latencies and the phase's wall time.
async fn load(
    sessions: Vec<Session>,
    count: usize,
    callers: usize,
    first_id: u64,
) -> Result<(Vec<Session>, Samples, Duration)> {
    let mut sessions = sessions;
    let idle = sessions.split_off(count);
    let callers = callers.clamp(1, count.max(1));
    let mut groups: Vec<Vec<Session>> = (0..callers).map(|_| Vec::new()).collect();
    for (index, session) in sessions.into_iter().enumerate() {
        groups[index % callers].push(session);
    }
    let started = Instant::now();
    let deadline = started + PHASE;
    let tasks: Vec<_> = groups
        .into_iter()
        .enumerate()
        .map(|(index, mut group)| {
            tokio::spawn(async move {
                let mut samples = Samples::with_capacity(1024);
                let mut id = first_id + (index as u64) * 1_000_000;
                let mut turn = 0;
                while Instant::now() < deadline && !group.is_empty() {
                    let began = Instant::now();
                    let at = turn % group.len();
                    group[at].greet(id).await?;
                    samples.push(began.elapsed());
                    id += 1;
                    turn += 1;
                }
                Ok::<_, anyhow::Error>((group, samples))
            })
        })
        .collect();
    let mut samples = Samples::default();
    let mut back = Vec::with_capacity(count + idle.len());
    for task in tasks {
        let (group, own) = task.await??;
        samples.extend(&own);
        back.extend(group);
    }
    let wall = started.elapsed();
    back.extend(idle);
    Ok((back, samples, wall))
}

/// What figure 17 measured at one size.
pub(crate) struct Size {
    pub(crate) sessions: usize,
    /// Calls in flight at most (one per calling task): the sessions, or fewer.
    pub(crate) callers: usize,
    pub(crate) calls: Samples,
    pub(crate) wall: f64,
    /// CPU seconds of the server's threads over the phases.
    pub(crate) server_cpu: f64,
    /// CPU seconds of the bench's own threads (the clients) over the phases.
    pub(crate) client_cpu: f64,
}

impl Size {
    pub(crate) fn throughput(&self) -> f64 {
        self.calls.len() as f64 / self.wall.max(f64::MIN_POSITIVE)
    }

    /// Server and client CPU seconds per call.
    fn cpu_per_call(&self) -> (f64, f64) {
        let calls = self.calls.len().max(1) as f64;
        (self.server_cpu / calls, self.client_cpu / calls)
    }
}

/// The idle RSS figures: (sessions, RSS).
pub(crate) struct Idle {
    pub(crate) base: u64,
    pub(crate) at: Vec<(usize, u64)>,
}

/// Raises this process's soft open-file limit to its hard one (the client's sockets).
fn raise_open_files() {
    if let Some(limit) = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum {
        let _ = rustix::process::setrlimit(
            rustix::process::Resource::Nofile,
            rustix::process::Rlimit {
                current: Some(limit),
                maximum: Some(limit),
            },
        );
    }
}

/// Figure 17: measures, then the rows (and the data for its picture).
pub(crate) fn sessions(
    rt: &tokio::runtime::Runtime,
    fixtures: &Fixtures,
) -> Result<(Vec<Row>, Vec<Size>, Idle)> {
    raise_open_files();
    let server = Server::spawn(fixtures)?;
    let addr = server.addr;
    let (sizes, idle) = rt.block_on(async {
        // Warm-up: code, allocator, the plugin's instance pool; then no session.
        let mut warm = Session::open(addr).await?;
        for id in 0..WARM_UP as u64 {
            warm.greet(10 + id).await?;
        }
        warm.delete().await?;
        drop(warm);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let base = server.rss()?;
        let mut sessions = Vec::new();
        let mut at = Vec::new();
        let largest = SESSIONS[SESSIONS.len() - 1];
        for count in [100, largest] {
            let more = open_sessions(addr, count - sessions.len()).await?;
            sessions.extend(more);
            tokio::time::sleep(Duration::from_millis(500)).await;
            at.push((count, server.rss()?));
        }
        // Each size with every session calling, and the largest again with only 100
        // calling at a time (each caller taking its 10 sessions in turn): the same
        // sessions and connections, a tenth of the calls in flight.
        let shapes = SESSIONS
            .iter()
            .map(|&n| (n, n))
            .chain(std::iter::once((largest, SPREAD_CALLERS)));
        let mut sizes: Vec<Size> = shapes
            .map(|(sessions, callers)| Size {
                sessions,
                callers,
                calls: Samples::default(),
                wall: 0.0,
                server_cpu: 0.0,
                client_cpu: 0.0,
            })
            .collect();
        // An untimed phase at the largest size first (every session's first call).
        let (back, _, _) = load(sessions, largest, largest, 1).await?;
        sessions = back;
        let mut first_id = 1;
        for _ in 0..ROUNDS {
            for size in &mut sizes {
                first_id += 1;
                let (server_cpu, client_cpu) = (
                    process_cpu(server.child.id())?,
                    process_cpu(std::process::id())?,
                );
                let (back, samples, wall) =
                    load(sessions, size.sessions, size.callers, first_id << 40).await?;
                size.server_cpu += process_cpu_since(server.child.id(), &server_cpu)?;
                size.client_cpu += process_cpu_since(std::process::id(), &client_cpu)?;
                sessions = back;
                size.calls.extend(&samples);
                size.wall += wall.as_secs_f64();
            }
        }
        drop(sessions);
        Ok::<_, anyhow::Error>((sizes, Idle { base, at }))
    })?;
    drop(server);
    for size in &sizes {
        let (server_cpu, client_cpu) = size.cpu_per_call();
        println!(
            "  {} sessions, {} calling at a time: {:.0} calls/s, {} ({} calls); CPU per call: server {}, bench client {}",
            size.sessions,
            size.callers,
            size.throughput(),
            latency(&size.calls),
            size.calls.len(),
            time(server_cpu),
            time(client_cpu)
        );
    }
    let per = |(count, rss): (usize, u64)| rss.saturating_sub(idle.base) as f64 / count as f64;
    let steps: Vec<String> = idle
        .at
        .iter()
        .map(|&(count, rss)| {
            format!(
                "{count}: {} ({:.1} KiB/session)",
                bytes(rss),
                per((count, rss)) / 1024.0
            )
        })
        .collect();
    println!(
        "  idle RSS: 0 sessions {}; {}",
        bytes(idle.base),
        steps.join("; ")
    );
    pictures(&sizes, &idle)?;
    Ok((rows_of(&sizes, &idle), sizes, idle))
}

/// docs/benchmarks/sessions-{throughput,latency,rss}.svg: figure 17's curves.
fn pictures(sizes: &[Size], idle: &Idle) -> Result<()> {
    use super::plot::{Chart, Scale, Series};
    let curve = |of: &dyn Fn(&Size) -> f64| -> Vec<(f64, f64)> {
        sizes
            .iter()
            .filter(|s| s.callers == s.sessions)
            .map(|s| (s.sessions as f64, of(s)))
            .collect()
    };
    Chart {
        title: "HTTP: greet calls answered per second".to_owned(),
        x_label: "sessions calling at once".to_owned(),
        y_label: "calls/s".to_owned(),
        x_scale: Scale::Log,
        y_scale: Scale::Linear,
        series: vec![Series::new("throughput", curve(&Size::throughput))],
    }
    .write("sessions-throughput")?;
    Chart {
        title: "HTTP: call latency with every session calling".to_owned(),
        x_label: "sessions calling at once".to_owned(),
        y_label: "ms".to_owned(),
        x_scale: Scale::Log,
        y_scale: Scale::Log,
        series: vec![
            Series::new("p99", curve(&|s| s.calls.p99() * 1e3)),
            Series::new("p50", curve(&|s| s.calls.p50() * 1e3)),
        ],
    }
    .write("sessions-latency")?;
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    let rss = std::iter::once((0.0, mib(idle.base)))
        .chain(
            idle.at
                .iter()
                .map(|&(count, bytes)| (count as f64, mib(bytes))),
        )
        .collect();
    Chart {
        title: "HTTP: server RSS with idle sessions".to_owned(),
        x_label: "idle sessions (initialized, connection open)".to_owned(),
        y_label: "MiB".to_owned(),
        x_scale: Scale::Linear,
        y_scale: Scale::Linear,
        series: vec![Series::new("RSS", rss)],
    }
    .write("sessions-rss")?;
    Ok(())
}

fn rows_of(sizes: &[Size], idle: &Idle) -> Vec<Row> {
    let mut rows: Vec<Row> = sizes
        .iter()
        .map(|size| {
            Row::judged(
                if size.callers == size.sessions {
                    format!("17 HTTP, {} sessions calling greet", size.sessions)
                } else {
                    format!(
                        "17 HTTP, {} sessions, {} calling at a time",
                        size.sessions, size.callers
                    )
                },
                format!(
                    "{:.0} calls/s; {} ({} calls); CPU/call server {}, client {}",
                    size.throughput(),
                    latency(&size.calls),
                    size.calls.len(),
                    time(size.cpu_per_call().0),
                    time(size.cpu_per_call().1)
                ),
                0.0,
                "-",
                Target::Report,
            )
        })
        .collect();
    // The judged sizes: every session calling, the two largest.
    let full: Vec<&Size> = sizes.iter().filter(|s| s.callers == s.sessions).collect();
    let (mid, last) = (full[full.len() - 2], full[full.len() - 1]);
    // With every session calling, a call waits behind the others: p99 grows with the
    // sessions (Little's law), linearly at worst. Judged: p99 per session at 1,000
    // over at 100 (1 or less is linear or better).
    let growth =
        (last.calls.p99() / last.sessions as f64) / (mid.calls.p99() / mid.sessions as f64);
    rows.push(Row::judged(
        format!(
            "17 HTTP p99 per session, {} / {} sessions",
            last.sessions, mid.sessions
        ),
        format!(
            "p99 {} vs {}",
            time(last.calls.p99()),
            time(mid.calls.p99())
        ),
        growth,
        format!("{growth:.2}"),
        Target::AtMost(1.0),
    ));
    // Throughput holds as sessions are added: at 1,000 at least 80 % of at 100.
    let held = last.throughput() / mid.throughput();
    rows.push(Row::judged(
        format!(
            "17 HTTP throughput, {} / {} sessions",
            last.sessions, mid.sessions
        ),
        format!(
            "{:.0} vs {:.0} calls/s",
            last.throughput(),
            mid.throughput()
        ),
        held,
        format!("{held:.2}"),
        Target::AtLeast(0.8),
    ));
    let per = |(count, rss): (usize, u64)| rss.saturating_sub(idle.base) as f64 / count as f64;
    if let &[small, large] = &idle.at[..] {
        let growth = per(large) / per(small).max(1.0);
        rows.push(Row::judged(
            format!(
                "17 HTTP RSS per idle session, {} / {} sessions",
                large.0, small.0
            ),
            format!(
                "{:.1} vs {:.1} KiB per session (0 sessions: {}, {}: {})",
                per(large) / 1024.0,
                per(small) / 1024.0,
                bytes(idle.base),
                large.0,
                bytes(large.1)
            ),
            growth,
            format!("{growth:.2}"),
            Target::AtMost(1.0),
        ));
        rows.push(
            Row::judged(
                format!("17 HTTP RSS per idle session, {} sessions", large.0),
                format!("({} - {}) / {}", bytes(large.1), bytes(idle.base), large.0),
                per(large) / 1024.0,
                format!("{:.1} KiB", per(large) / 1024.0),
                Target::AtMost(64.0),
            )
            .with_unit(" KiB"),
        );
    }
    rows
}
