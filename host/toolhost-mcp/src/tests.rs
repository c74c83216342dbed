//! Hostile clients against the whole server: one that never reads its answers, one that
//! floods tool calls, one whose ids do not fit a `u64` or an `f64`.

use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::sync::watch;

use toolhost::registry::{
    Arguments, CallContext, Environment, Registry, ToolDefinition, ToolResult,
};

use super::convert::tools_list_result;
use super::limits::{DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_QUEUED_BYTES};
use super::{McpLimits, McpServer, ServeError};

/// An input that hands out `total` numbered request lines made by `line`, one line (or
/// what is left of it) per read, and counts the lines it has handed out completely.
struct Requests {
    line: fn(usize) -> String,
    total: usize,
    next: usize,
    pending: Vec<u8>,
    handed_out: Arc<AtomicUsize>,
}

impl Requests {
    fn new(total: usize, line: fn(usize) -> String) -> (Self, Arc<AtomicUsize>) {
        let handed_out = Arc::new(AtomicUsize::new(0));
        let input = Self {
            line,
            total,
            next: 0,
            pending: Vec::new(),
            handed_out: Arc::clone(&handed_out),
        };
        (input, handed_out)
    }
}

impl AsyncRead for Requests {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.pending.is_empty() {
            if self.next == self.total {
                return Poll::Ready(Ok(()));
            }
            let line = (self.line)(self.next) + "\n";
            self.next += 1;
            self.pending = line.into_bytes();
        }
        let n = self.pending.len().min(buf.remaining());
        buf.put_slice(&self.pending[..n]);
        self.pending.drain(..n);
        if self.pending.is_empty() {
            self.handed_out.fetch_add(1, Ordering::SeqCst);
        }
        Poll::Ready(Ok(()))
    }
}

/// Waits until `counter` has not moved for `quiet` (or `limit` passed), and returns it.
async fn settled(counter: &AtomicUsize, quiet: Duration, limit: Duration) -> usize {
    let started = Instant::now();
    let mut last = counter.load(Ordering::SeqCst);
    let mut since = Instant::now();
    while started.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = counter.load(Ordering::SeqCst);
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() >= quiet {
            break;
        }
    }
    last
}

/// A registry whose one tool has an 8 KiB description, so each `tools/list` answer is a
/// little over 8 KiB.
fn wide_registry() -> Arc<Registry> {
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new("wide", "w".repeat(8 * 1024), json!({"type": "object"})),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new("ok"))
            },
        )
        .unwrap();
    Arc::new(registry)
}

fn list_request(id: usize) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#)
}

/// The size of one `tools/list` answer of [`wide_registry`] with a one-digit id.
fn list_answer_bytes() -> usize {
    let result = tools_list_result(&wide_registry().definitions()).to_string();
    // `{"id":0,"jsonrpc":"2.0","result":` + result + `}` + newline
    r#"{"id":0,"jsonrpc":"2.0","result":"#.len() + result.len() + 2
}

fn limits(max_queued_bytes: usize) -> McpLimits {
    McpLimits {
        max_queued_bytes: NonZeroUsize::new(max_queued_bytes).unwrap(),
        ..McpLimits::default()
    }
}

/// A client that sends `tools/list` after `tools/list` and never reads: the server stops
/// reading once its response queue is full, instead of buffering every answer.
#[tokio::test]
async fn a_client_that_never_reads_stops_the_reading() {
    const REQUESTS: usize = 3000;
    let (input, handed_out) = Requests::new(REQUESTS, list_request);
    // The client's end of stdout, never read: 1 KiB of pipe, then every write blocks.
    let (output, mut client_end) = tokio::io::duplex(1024);
    let server = McpServer::new(wide_registry());
    let watch = server.clone();
    let serving = tokio::spawn(async move { server.serve(input, output).await });

    let read = settled(
        &handed_out,
        Duration::from_millis(500),
        Duration::from_secs(60),
    )
    .await;
    // What was read can only be: answers in the queue (4 MiB by default), one in the
    // writer's hands, what its 8 KiB buffer and the 1 KiB pipe took, and what the line
    // reader's 8 KiB buffer holds ahead (requests of ~45 bytes).
    let cap = DEFAULT_MAX_QUEUED_BYTES.get();
    let answer = list_answer_bytes();
    let bound = cap / answer + 1 + (8 * 1024 + 1024) / answer + 1 + 8 * 1024 / 40 + 1;
    assert!(
        read <= bound,
        "the server read {read} requests while nobody read its answers (bound {bound})"
    );
    assert!(!serving.is_finished(), "the server must wait, not give up");
    let stats = watch.stats();
    assert!(stats.peak_queued_bytes <= cap, "{stats:?}");
    // It is the queue's cap that stopped the reading: the queue is full.
    assert_eq!(stats.queued_answers, cap / answer, "{stats:?}");
    assert!(stats.queued_bytes > cap - answer, "{stats:?}");

    // Once the client reads, every request is answered, in order, and the server ends.
    let mut answers = Vec::new();
    client_end.read_to_end(&mut answers).await.unwrap();
    serving.await.unwrap().unwrap();
    let answers: Vec<Value> = answers
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).unwrap())
        .collect();
    assert_eq!(answers.len(), REQUESTS);
    for (id, answer) in answers.iter().enumerate() {
        assert_eq!(answer["id"], json!(id));
        assert_eq!(answer["result"]["tools"][0]["name"], "wide");
    }
    let stats = watch.stats();
    assert_eq!((stats.queued_bytes, stats.queued_answers), (0, 0));
    assert!(stats.peak_queued_bytes <= cap, "{stats:?}");
}

/// The queue is bounded in bytes, not in answers: 20 KiB hold two 8 KiB answers.
#[tokio::test]
async fn the_queue_is_bounded_in_bytes() {
    let (input, handed_out) = Requests::new(500, list_request);
    let (output, client_end) = tokio::io::duplex(1024);
    let server = McpServer::new(wide_registry()).with_limits(limits(20 * 1024));
    let watch = server.clone();
    let serving = tokio::spawn(async move { server.serve(input, output).await });
    let read = settled(
        &handed_out,
        Duration::from_millis(500),
        Duration::from_secs(60),
    )
    .await;
    assert!(read < 500, "read {read}");
    let stats = watch.stats();
    assert_eq!(stats.queued_answers, 2, "{stats:?}");
    assert!(
        stats.queued_bytes == 2 * list_answer_bytes() && stats.peak_queued_bytes <= 20 * 1024,
        "{stats:?}"
    );
    drop(client_end);
    assert!(serving.await.unwrap().is_err());
}

/// The client goes away while the server waits for room in the queue: serving ends with
/// the write error, instead of waiting for room forever.
#[tokio::test]
async fn a_client_gone_while_the_queue_is_full_ends_the_session() {
    let (input, handed_out) = Requests::new(100_000, list_request);
    let (output, client_end) = tokio::io::duplex(1024);
    let server = McpServer::new(wide_registry()).with_limits(limits(64 * 1024));
    let serving = tokio::spawn(async move { server.serve(input, output).await });
    settled(
        &handed_out,
        Duration::from_millis(300),
        Duration::from_secs(60),
    )
    .await;
    drop(client_end);
    let ended = tokio::time::timeout(Duration::from_secs(20), serving)
        .await
        .expect("serving ends once the client is gone")
        .unwrap();
    assert!(
        matches!(ended, Err(ServeError::Write(ref e)) if e.kind() == std::io::ErrorKind::BrokenPipe),
        "{ended:?}"
    );
    assert!(handed_out.load(Ordering::SeqCst) < 100_000);
}

/// An answer larger than the whole queue still goes out, alone.
#[tokio::test]
async fn an_answer_larger_than_the_queue_goes_out_alone() {
    let server = McpServer::new(wide_registry()).with_limits(limits(1024));
    let watch = server.clone();
    let mut output = Vec::new();
    let input: String = (0..5).map(|id| list_request(id) + "\n").collect();
    server.serve(input.as_bytes(), &mut output).await.unwrap();
    let lines: Vec<&[u8]> = output
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .collect();
    assert_eq!(lines.len(), 5);
    assert!(lines.iter().all(|line| line.len() > 8 * 1024));
    let stats = watch.stats();
    assert_eq!(
        stats.peak_queued_bytes,
        list_answer_bytes(),
        "one at a time"
    );
}

/// `tools/list` is encoded once and every answer carries the same bytes; a tool added to
/// the registry afterwards is listed (the registry only grows, so its size tells).
#[tokio::test]
async fn tools_list_is_encoded_once() {
    let registry = wide_registry();
    let server = McpServer::new(Arc::clone(&registry));
    let input: String = (0..3).map(|id| list_request(id) + "\n").collect();
    let results = |output: &[u8]| -> Vec<String> {
        std::str::from_utf8(output)
            .unwrap()
            .lines()
            .enumerate()
            .map(|(id, line)| {
                let head = format!(r#"{{"id":{id},"jsonrpc":"2.0","result":"#);
                let result = line.strip_prefix(&head).unwrap();
                result.strip_suffix('}').unwrap().to_owned()
            })
            .collect()
    };
    let mut output = Vec::new();
    server.serve(input.as_bytes(), &mut output).await.unwrap();
    let first = results(&output);
    assert_eq!(first.len(), 3);
    assert!(first.iter().all(|result| result == &first[0]));
    assert_eq!(
        serde_json::from_str::<Value>(&first[0]).unwrap(),
        tools_list_result(&registry.definitions())
    );
    assert_eq!(server.stats().tools_list_encodings, 1);

    registry
        .register(
            ToolDefinition::new("late", "Added later.", json!({"type": "object"})),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new("late"))
            },
        )
        .unwrap();
    let mut output = Vec::new();
    server.serve(input.as_bytes(), &mut output).await.unwrap();
    let second = results(&output);
    assert!(second.iter().all(|result| result == &second[0]));
    let listed: Value = serde_json::from_str(&second[0]).unwrap();
    assert_eq!(listed["tools"][1]["name"], "late");
    assert_eq!(server.stats().tools_list_encodings, 2);
}

/// Counts the calls running in a `hold` tool, which waits for the test to let it go.
struct Holds {
    running: AtomicUsize,
    peak: AtomicUsize,
    release: watch::Sender<bool>,
}

fn holding_registry() -> (Arc<Registry>, Arc<Holds>) {
    let holds = Arc::new(Holds {
        running: AtomicUsize::new(0),
        peak: AtomicUsize::new(0),
        release: watch::channel(false).0,
    });
    let registry = Registry::new();
    let state = Arc::clone(&holds);
    registry
        .register(
            ToolDefinition::new("hold", "Wait to be let go.", json!({"type": "object"})),
            move |_ctx: CallContext, _args: Arguments, _env: Environment| {
                let state = Arc::clone(&state);
                async move {
                    let now = state.running.fetch_add(1, Ordering::SeqCst) + 1;
                    state.peak.fetch_max(now, Ordering::SeqCst);
                    let mut release = state.release.subscribe();
                    let _ = release.wait_for(|&go| go).await;
                    state.running.fetch_sub(1, Ordering::SeqCst);
                    Ok(ToolResult::new("let go"))
                }
            },
        )
        .unwrap();
    (Arc::new(registry), holds)
}

fn hold_request(id: usize) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"hold"}}}}"#)
}

/// 80 slow calls at once: at most 64 (the default limit) run, the rest wait their turn and
/// are all answered once the first ones end.
#[tokio::test]
async fn tool_calls_in_flight_are_capped_at_the_default() {
    const CALLS: usize = 80;
    let (registry, holds) = holding_registry();
    let (input, _) = Requests::new(CALLS, hold_request);
    let mut output = Vec::new();
    let server = McpServer::new(registry);
    let watch = server.clone();
    let serving =
        tokio::spawn(async move { server.serve(input, &mut output).await.map(|()| output) });

    let running = settled(
        &holds.running,
        Duration::from_millis(500),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        running,
        DEFAULT_MAX_IN_FLIGHT.get(),
        "calls running at once"
    );
    assert_eq!(running, 64);
    assert_eq!(watch.stats().calls_running, 64);
    holds.release.send_replace(true);
    let output = serving.await.unwrap().unwrap();
    assert_eq!(holds.peak.load(Ordering::SeqCst), 64);
    let stats = watch.stats();
    assert_eq!((stats.peak_calls_running, stats.calls_running), (64, 0));
    let answers: Vec<Value> = String::from_utf8(output)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(answers.len(), CALLS);
    assert!(answers
        .iter()
        .all(|a| a["result"]["content"][0]["text"] == "let go"));
}

/// A limit of 3: three calls run and the fourth waits in the queue, while a ping sent
/// after it is read and answered at once: calls at the in-flight limit do not stop the
/// reading. Once the calls are let go, the fourth runs too.
#[tokio::test]
async fn the_in_flight_limit_is_configurable_and_calls_past_it_wait_their_turn() {
    let (registry, holds) = holding_registry();
    let server = McpServer::new(registry).with_max_in_flight(NonZeroUsize::new(3).unwrap());
    assert_eq!(server.limits().max_in_flight.get(), 3);
    let watch = server.clone();
    let (mut client, serving) = serve_client(server);
    for id in 0..4 {
        client.send(&hold_request(id)).await;
    }
    client
        .send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        .await;
    assert_eq!(
        client
            .answer_within(Duration::from_secs(5))
            .await
            .as_deref(),
        Some(r#"{"id":"p","jsonrpc":"2.0","result":{}}"#),
        "the ping is answered while the fourth call waits"
    );
    let running = settled(
        &holds.running,
        Duration::from_millis(300),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(running, 3);
    let stats = watch.stats();
    assert_eq!(
        (stats.calls_running, stats.calls_queued),
        (3, 1),
        "{stats:?}"
    );
    holds.release.send_replace(true);
    drop(client.input);
    serving.await.unwrap().unwrap();
    let mut text = String::new();
    client.output.read_to_string(&mut text).await.unwrap();
    let mut ids: Vec<String> = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["id"].to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, ["0", "1", "2", "3"]);
    assert_eq!(holds.peak.load(Ordering::SeqCst), 3);
    assert_eq!(watch.stats().peak_calls_running, 3);
}

/// Calls whose arguments would pass the in-flight byte budget wait like calls over the
/// count: with 10 KiB, two calls carrying 4 KiB run and the third waits; a call carrying
/// more than the whole budget runs alone once the others end.
#[tokio::test]
async fn argument_bytes_in_flight_are_capped() {
    let (registry, holds) = holding_registry();
    let call = |id: usize, pad: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"hold","arguments":{{"pad":"{}"}}}}}}"#,
            "x".repeat(pad)
        ) + "\n"
    };
    let input = call(0, 4096) + &call(1, 4096) + &call(2, 4096) + &call(3, 20 * 1024);
    // What a call holds: its arguments, its tool's name and its id (twice).
    let argument_bytes = r#"{"pad":""}"#.len() + 4096 + "hold".len() + 2;
    let server = McpServer::new(registry).with_limits(McpLimits {
        max_in_flight_bytes: NonZeroUsize::new(10 * 1024).unwrap(),
        ..McpLimits::default()
    });
    let watch = server.clone();
    let serving = tokio::spawn(async move {
        let mut output = Vec::new();
        server
            .serve(input.as_bytes(), &mut output)
            .await
            .map(|()| output)
    });
    let running = settled(
        &holds.running,
        Duration::from_millis(500),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(running, 2);
    let stats = watch.stats();
    assert_eq!(
        (stats.calls_running, stats.call_argument_bytes),
        (2, 2 * argument_bytes)
    );
    holds.release.send_replace(true);
    let output = serving.await.unwrap().unwrap();
    assert_eq!(String::from_utf8(output).unwrap().lines().count(), 4);
    assert_eq!(holds.peak.load(Ordering::SeqCst), 2);
    let stats = watch.stats();
    assert_eq!((stats.calls_running, stats.call_argument_bytes), (0, 0));
}

/// A call keeps its slot until its answer is queued: with one slot, a client that never
/// reads and room for one answer, the first answer sits in the writer, the second call
/// runs and waits for room, and no third call starts (they would pile up behind the full
/// queue, and with one slot their answers could overtake each other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_call_keeps_its_slot_until_its_answer_is_queued() {
    let started = Arc::new(AtomicUsize::new(0));
    let registry = Registry::new();
    let counter = Arc::clone(&started);
    registry
        .register(
            ToolDefinition::new("count", "Count the calls.", json!({"type": "object"})),
            move |_ctx: CallContext, _args: Arguments, _env: Environment| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move { Ok(ToolResult::new("counted")) }
            },
        )
        .unwrap();
    let input: String = (0..6)
        .map(|id| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"count"}}}}"#
            ) + "\n"
        })
        .collect();
    let (output, _client_end) = tokio::io::duplex(16);
    let server = McpServer::new(Arc::new(registry)).with_limits(McpLimits {
        max_in_flight: NonZeroUsize::new(1).unwrap(),
        ..limits(1)
    });
    let serving = tokio::spawn(async move { server.serve(input.as_bytes(), output).await });
    let ran = settled(
        &started,
        Duration::from_millis(500),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(ran, 2, "calls run while an earlier answer waits for room");
    serving.abort();
}

async fn serve_text(registry: Arc<Registry>, input: &str) -> String {
    let mut output = Vec::new();
    McpServer::new(registry)
        .serve(input.as_bytes(), &mut output)
        .await
        .unwrap();
    String::from_utf8(output).unwrap()
}

/// Every id comes back as the exact text the client sent: beyond u64 and i64, fractions,
/// exponents, beyond f64, strings with escapes.
#[tokio::test]
async fn ids_come_back_exactly_as_sent() {
    let ids = [
        "18446744073709551616",
        "-9223372036854775809",
        "1.5",
        "1e400",
        "1.0",
        "0.10",
        "1E2",
        "-0",
        "123456789012345678901234567890",
        r#""x""#,
        r#""\u0078 \"q\"""#,
    ];
    let mut input = String::new();
    let mut expected = String::new();
    for id in ids {
        input += &format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n");
        expected += &format!("{{\"id\":{id},\"jsonrpc\":\"2.0\",\"result\":{{}}}}\n");
    }
    assert_eq!(serve_text(wide_registry(), &input).await, expected);

    // The same in errors and in tool results.
    let id = "18446744073709551616";
    let output = serve_text(
        wide_registry(),
        &format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"nope\"}}\n\
             {{\"jsonrpc\":\"1.0\",\"id\":{id},\"method\":\"ping\"}}\n\
             {{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{}}}}\n\
             {{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"wide\"}}}}\n"
        ),
    )
    .await;
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.len(), 4, "{output}");
    for line in &lines {
        assert!(
            line.contains(&format!(",\"id\":{id},"))
                || line.starts_with(&format!("{{\"id\":{id},")),
            "{line}"
        );
    }
    assert_eq!(
        lines[3],
        format!(
            r#"{{"id":{id},"jsonrpc":"2.0","result":{{"content":[{{"text":"ok","type":"text"}}],"isError":false}}}}"#
        )
    );
}

fn napping_registry() -> Arc<Registry> {
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new("nap", "Nap, unless cancelled.", json!({"type": "object"})),
            |ctx: CallContext, _args: Arguments, _env: Environment| async move {
                tokio::select! {
                    () = ctx.cancellation().cancelled() => Ok(ToolResult::new("cancelled")),
                    () = tokio::time::sleep(Duration::from_millis(300)) => Ok(ToolResult::new("woke")),
                }
            },
        )
        .unwrap();
    Arc::new(registry)
}

/// Two ids that are the same `f64`: cancelling one stops that one, not the other.
#[tokio::test]
async fn cancellation_finds_the_exact_id() {
    let output = serve_text(
        napping_registry(),
        concat!(
            r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"tools/call","params":{"name":"nap"}}"#, "\n",
            r#"{"jsonrpc":"2.0","id":18446744073709551617,"method":"tools/call","params":{"name":"nap"}}"#, "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":18446744073709551616}}"#, "\n",
        ),
    )
    .await;
    assert_eq!(
        output,
        "{\"id\":18446744073709551617,\"jsonrpc\":\"2.0\",\"result\":{\"content\":[{\"text\":\"woke\",\"type\":\"text\"}],\"isError\":false}}\n"
    );
}

/// A client sees the built-in tools' titles and hints in `tools/list`, and a tool with an
/// output schema answers with `structuredContent` next to its text, over the whole server.
#[tokio::test]
async fn metadata_and_structured_content_reach_the_client() {
    let registry = Registry::new();
    toolhost::tools::register_vfs_tools(
        &registry,
        toolhost::tools::VfsToolOptions::new(Arc::new(toolhost::vfs::MemoryStorage::new())),
    )
    .unwrap();
    toolhost::tools::register_plan_tool(&registry).unwrap();
    let output = serve_text(
        Arc::new(registry),
        concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"todo_write","arguments":{"todos":[{"content":"Ship","status":"pending"}]}}}"#,
            "\n",
        ),
    )
    .await;
    let lines: Vec<Value> = output
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let tools = lines[0]["result"]["tools"].as_array().unwrap();
    let tool = |name: &str| {
        tools
            .iter()
            .find(|tool| tool["name"] == name)
            .unwrap_or_else(|| panic!("{name} listed"))
    };
    assert_eq!(tool("read_file")["title"], "Read file");
    assert_eq!(
        tool("read_file")["annotations"],
        json!({"title": "Read file", "readOnlyHint": true, "destructiveHint": false,
               "idempotentHint": true, "openWorldHint": false})
    );
    assert_eq!(tool("delete_file")["annotations"]["destructiveHint"], true);
    assert_eq!(tool("delete_file")["annotations"]["readOnlyHint"], false);
    assert_eq!(tool("read_file").get("outputSchema"), None);
    assert_eq!(
        tool("todo_write")["outputSchema"]["required"],
        json!(["todos"])
    );
    assert_eq!(
        lines[1]["result"],
        json!({
            "content": [{"type": "text", "text": r#"{"todos":[{"content":"Ship","status":"pending"}]}"#}],
            "structuredContent": {"todos": [{"content": "Ship", "status": "pending"}]},
            "isError": false,
        })
    );
}

/// Counts the calls of a `spin` tool, a runaway that never ends by itself (a plugin's
/// endless loop, as the server sees it): how many started, and how many were stopped
/// (their future dropped).
#[derive(Default)]
struct Spins {
    started: AtomicUsize,
    stopped: AtomicUsize,
}

struct Stopped(Arc<Spins>);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.stopped.fetch_add(1, Ordering::SeqCst);
    }
}

/// `spin` (runs until stopped) and `greet`, under the 10 s call time limit the issue's
/// plugins had.
fn spinning_registry() -> (Arc<Registry>, Arc<Spins>) {
    let spins: Arc<Spins> = Arc::default();
    let registry = Registry::new();
    let state = Arc::clone(&spins);
    registry
        .register(
            ToolDefinition::new("spin", "Never ends.", json!({"type": "object"})),
            move |_ctx: CallContext, _args: Arguments, _env: Environment| {
                let state = Arc::clone(&state);
                async move {
                    state.started.fetch_add(1, Ordering::SeqCst);
                    let _stopped = Stopped(state);
                    std::future::pending::<()>().await;
                    Ok(ToolResult::new("never"))
                }
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("greet", "Greet.", json!({"type": "object"})),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new("Hello!"))
            },
        )
        .unwrap();
    (
        Arc::new(registry.with_call_timeout(Duration::from_secs(10))),
        spins,
    )
}

fn spin_request(id: usize) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"spin"}}}}"#)
}

fn cancel_line(id: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id},"reason":"user"}}}}"#
    )
}

/// A client's two ends of a server under test: what it writes, and the answer lines.
struct Client {
    input: tokio::io::DuplexStream,
    output: tokio::io::BufReader<tokio::io::DuplexStream>,
}

impl Client {
    async fn send(&mut self, line: &str) {
        use tokio::io::AsyncWriteExt;
        self.input.write_all(line.as_bytes()).await.unwrap();
        self.input.write_all(b"\n").await.unwrap();
    }

    /// The next answer line, or `None` when none comes within `wait`.
    async fn answer_within(&mut self, wait: Duration) -> Option<String> {
        use tokio::io::AsyncBufReadExt;
        let mut line = String::new();
        match tokio::time::timeout(wait, self.output.read_line(&mut line)).await {
            Ok(read) => {
                read.unwrap();
                Some(line.trim_end().to_owned())
            }
            Err(_) => None,
        }
    }
}

/// Serves `server` over in-memory pipes, as a task.
fn serve_client(server: McpServer) -> (Client, tokio::task::JoinHandle<Result<(), ServeError>>) {
    let (client_in, server_in) = tokio::io::duplex(64 * 1024);
    let (server_out, client_out) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn(async move { server.serve(server_in, server_out).await });
    let client = Client {
        input: client_in,
        output: tokio::io::BufReader::new(client_out),
    };
    (client, serving)
}

/// A server whose in-flight limit of 4 is filled by runaway calls 0-3, with calls 4 and
/// 5 queued behind them, and a ping sent then answered meanwhile.
async fn runaways_fill_the_limit() -> (
    Client,
    tokio::task::JoinHandle<Result<(), ServeError>>,
    McpServer,
    Arc<Spins>,
) {
    let (registry, spins) = spinning_registry();
    let server = McpServer::new(registry).with_max_in_flight(NonZeroUsize::new(4).unwrap());
    let watch = server.clone();
    let (mut client, serving) = serve_client(server);
    for id in 0..6 {
        client.send(&spin_request(id)).await;
    }
    settled(
        &spins.started,
        Duration::from_millis(300),
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(spins.started.load(Ordering::SeqCst), 4);
    let stats = watch.stats();
    assert_eq!(
        (stats.calls_running, stats.calls_queued),
        (4, 2),
        "{stats:?}"
    );

    client
        .send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        .await;
    assert_eq!(
        client
            .answer_within(Duration::from_secs(5))
            .await
            .as_deref(),
        Some(r#"{"id":"p","jsonrpc":"2.0","result":{}}"#),
        "a ping is answered while the calls fill the limit"
    );
    (client, serving, watch, spins)
}

/// Sends a cancellation for each of `ids`, then a `greet` call: it is answered first
/// (the cancelled calls are not answered) and at once, not when the runaways reach
/// their 10 s limit.
async fn cancel_then_greet(client: &mut Client, ids: impl IntoIterator<Item = usize>) {
    let started = Instant::now();
    for id in ids {
        client.send(&cancel_line(id)).await;
    }
    client
        .send(r#"{"jsonrpc":"2.0","id":"g","method":"tools/call","params":{"name":"greet"}}"#)
        .await;
    assert_eq!(
        client
            .answer_within(Duration::from_secs(5))
            .await
            .as_deref(),
        Some(
            r#"{"id":"g","jsonrpc":"2.0","result":{"content":[{"text":"Hello!","type":"text"}],"isError":false}}"#
        ),
        "the call after the cancellations is answered first, and at once"
    );
    let answered = started.elapsed();
    assert!(answered < Duration::from_secs(5), "{answered:?}");
}

/// Every call is over and nothing is held; the cancelled calls get no answer: after the
/// end of input, nothing more comes.
async fn all_over_and_unanswered(
    client: Client,
    serving: tokio::task::JoinHandle<Result<(), ServeError>>,
    watch: &McpServer,
) {
    let stats = watch.stats();
    assert_eq!(
        (
            stats.calls_running,
            stats.calls_queued,
            stats.queued_call_bytes
        ),
        (0, 0, 0),
        "{stats:?}"
    );
    let Client { input, mut output } = client;
    drop(input);
    serving.await.unwrap().unwrap();
    let mut rest = String::new();
    output.read_to_string(&mut rest).await.unwrap();
    assert_eq!(rest, "");
}

/// Runaway calls fill the in-flight limit and more wait behind them: a ping is still
/// answered, the client's cancellations are read and stop every call (the waiting ones
/// never start), and the next call is answered at once, not when the runaways reach
/// their 10 s limit. The cancelled calls are not answered (MCP).
///
/// The waiting calls are cancelled first: a waiting call never starts once its
/// cancellation is read, and here no place frees before it is (the reader handles the
/// lines in order, and only a later cancellation stops a running call). Cancelled after
/// a running one, a waiting call may start in the place that call freed before its own
/// cancellation is read: see the next test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellations_and_pings_are_read_while_calls_fill_the_limit() {
    let (mut client, serving, watch, spins) = runaways_fill_the_limit().await;
    cancel_then_greet(&mut client, [4, 5, 0, 1, 2, 3]).await;
    // The runaways were stopped (their futures dropped) and gave their slots back; the
    // waiting ones never ran.
    let stopped = settled(
        &spins.stopped,
        Duration::from_millis(200),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(stopped, 4);
    assert_eq!(spins.started.load(Ordering::SeqCst), 4);
    all_over_and_unanswered(client, serving, &watch).await;
}

/// The same calls cancelled in the order sent (running calls 0-3, then waiting 4 and
/// 5): a waiting call may start in a place a cancelled runaway freed before the reader
/// has read its own cancellation (the server cannot know it is coming), and is then
/// stopped when it is read. Whatever the timing, every call that started is stopped,
/// none is answered, and the call after them is answered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellations_in_the_order_sent_stop_every_call_that_started() {
    let (mut client, serving, watch, spins) = runaways_fill_the_limit().await;
    cancel_then_greet(&mut client, 0..6).await;
    let stopped = settled(
        &spins.stopped,
        Duration::from_millis(200),
        Duration::from_secs(5),
    )
    .await;
    let started = spins.started.load(Ordering::SeqCst);
    assert!((4..=6).contains(&started), "{started}");
    assert_eq!(stopped, started, "every call that started was stopped");
    all_over_and_unanswered(client, serving, &watch).await;
}

/// A limit of 1 and a queue of 2: one call runs, two wait, and the fourth call is read
/// but finds the queue full, so the ping behind it is not read (the backpressure). Once
/// the calls are let go, every call is answered in the order sent, then the ping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_full_call_queue_stops_the_reading() {
    let (registry, holds) = holding_registry();
    let server = McpServer::new(registry).with_limits(McpLimits {
        max_in_flight: NonZeroUsize::new(1).unwrap(),
        max_queued_calls: NonZeroUsize::new(2).unwrap(),
        ..McpLimits::default()
    });
    assert_eq!(server.limits().max_queued_calls.get(), 2);
    let watch = server.clone();
    let (mut client, serving) = serve_client(server);
    for id in 0..4 {
        client.send(&hold_request(id)).await;
    }
    client
        .send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        .await;
    assert_eq!(
        client.answer_within(Duration::from_millis(500)).await,
        None,
        "the ping waits behind the call that found the queue full"
    );
    let stats = watch.stats();
    assert_eq!(
        (
            stats.calls_running,
            stats.calls_queued,
            stats.peak_calls_queued
        ),
        (1, 2, 2),
        "{stats:?}"
    );
    assert_eq!(holds.running.load(Ordering::SeqCst), 1);
    holds.release.send_replace(true);
    let mut ids = Vec::new();
    for _ in 0..5 {
        let line = client
            .answer_within(Duration::from_secs(20))
            .await
            .expect("an answer");
        ids.push(serde_json::from_str::<Value>(&line).unwrap()["id"].to_string());
    }
    let calls: Vec<&String> = ids.iter().filter(|id| *id != "\"p\"").collect();
    assert_eq!(calls, ["0", "1", "2", "3"], "calls start in the order sent");
    assert!(ids.contains(&"\"p\"".to_owned()), "{ids:?}");
    assert_eq!(holds.peak.load(Ordering::SeqCst), 1);
    drop(client.input);
    serving.await.unwrap().unwrap();
    let stats = watch.stats();
    assert_eq!(
        (
            stats.calls_running,
            stats.calls_queued,
            stats.queued_call_bytes
        ),
        (0, 0, 0),
        "{stats:?}"
    );
}

/// A cancelled call that waits in the queue leaves it at once: it never runs, is not
/// answered, and its place takes the next call (a queue of 1 would otherwise be full).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_queued_call_never_runs_and_frees_its_place() {
    let (registry, holds) = holding_registry();
    let server = McpServer::new(registry).with_limits(McpLimits {
        max_in_flight: NonZeroUsize::new(1).unwrap(),
        max_queued_calls: NonZeroUsize::new(1).unwrap(),
        ..McpLimits::default()
    });
    let watch = server.clone();
    let (mut client, serving) = serve_client(server);
    client.send(&hold_request(0)).await;
    client.send(&hold_request(1)).await;
    client.send(&cancel_line(1)).await;
    client.send(&hold_request(2)).await;
    client
        .send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        .await;
    assert_eq!(
        client
            .answer_within(Duration::from_secs(5))
            .await
            .as_deref(),
        Some(r#"{"id":"p","jsonrpc":"2.0","result":{}}"#),
        "the cancelled call's place went to call 2, and the reading went on"
    );
    let stats = watch.stats();
    assert_eq!(
        (stats.calls_running, stats.calls_queued),
        (1, 1),
        "{stats:?}"
    );
    holds.release.send_replace(true);
    let first = client.answer_within(Duration::from_secs(20)).await.unwrap();
    let second = client.answer_within(Duration::from_secs(20)).await.unwrap();
    let id = |line: &str| serde_json::from_str::<Value>(line).unwrap()["id"].clone();
    assert_eq!((id(&first), id(&second)), (json!(0), json!(2)));
    drop(client.input);
    serving.await.unwrap().unwrap();
    let mut rest = String::new();
    client.output.read_to_string(&mut rest).await.unwrap();
    assert_eq!(rest, "", "the cancelled call is not answered");
    assert_eq!(holds.peak.load(Ordering::SeqCst), 1);
    assert_eq!(watch.stats().peak_calls_queued, 1);
}

/// A batch (2025-03-26) cannot hide a call from the queue's bound, and a cancellation
/// in a later batch takes a queued member out: the batch is answered without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_member_waits_in_the_queue_and_can_be_cancelled() {
    let (registry, holds) = holding_registry();
    let server = McpServer::new(registry).with_limits(McpLimits {
        max_in_flight: NonZeroUsize::new(1).unwrap(),
        ..McpLimits::default()
    });
    let watch = server.clone();
    let (mut client, serving) = serve_client(server);
    client
        .send(r#"{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-03-26"}}"#)
        .await;
    let init = client.answer_within(Duration::from_secs(5)).await.unwrap();
    assert!(init.contains(r#""protocolVersion":"2025-03-26""#), "{init}");
    client
        .send(&format!("[{},{}]", hold_request(0), hold_request(1)))
        .await;
    client
        .send(&format!(
            r#"[{},{{"jsonrpc":"2.0","id":"p","method":"ping"}}]"#,
            cancel_line(1)
        ))
        .await;
    assert_eq!(
        client
            .answer_within(Duration::from_secs(5))
            .await
            .as_deref(),
        Some(r#"[{"id":"p","jsonrpc":"2.0","result":{}}]"#)
    );
    // The ping's answer may come out before the reader has pruned the queue.
    let started = Instant::now();
    while watch.stats().calls_queued != 0 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the cancelled member left the queue"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    holds.release.send_replace(true);
    let answer = client.answer_within(Duration::from_secs(20)).await.unwrap();
    assert_eq!(
        answer,
        r#"[{"id":0,"jsonrpc":"2.0","result":{"content":[{"text":"let go","type":"text"}],"isError":false}}]"#
    );
    drop(client.input);
    serving.await.unwrap().unwrap();
    assert_eq!(holds.peak.load(Ordering::SeqCst), 1);
}
