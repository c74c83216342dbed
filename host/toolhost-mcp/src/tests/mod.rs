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

mod cancel;
pub(crate) mod catalog;
pub(crate) mod elicit;
mod in_flight;
pub(crate) mod sampling;

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
