//! The serving loop: read lines, answer requests, run tool calls concurrently, write every
//! response through one writer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use toolhost::registry::{CallContext, Environment, Registry, ToolCall};

use super::convert::{call_params, call_result, initialize_result, tools_list_result};
use super::jsonrpc::{parse_line, response, Incoming, RpcError, INVALID_REQUEST, METHOD_NOT_FOUND};
use super::ServeError;

/// The longest line (one JSON-RPC message) the server reads: 16 MiB. A peer that never
/// sends a newline would otherwise grow the buffer until the process runs out of memory.
/// Tool arguments carry whole files (`write_file`, 1 MiB by default), so the cap is
/// generous; a longer line is answered with an Invalid Request error and skipped.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// An MCP server over one registry. One server is one session: its session id is fixed,
/// and every `tools/call` gets a fresh turn id.
#[derive(Debug, Clone)]
pub struct McpServer {
    registry: Arc<Registry>,
    session: Environment,
    max_line_bytes: usize,
}

/// In-flight tool calls by request id (as JSON text), so `notifications/cancelled` can stop them.
type InFlight = Arc<Mutex<HashMap<String, CancellationToken>>>;

impl McpServer {
    /// A server for `registry` with a fresh session id.
    pub fn new(registry: Arc<Registry>) -> Self {
        Self {
            registry,
            session: Environment::generate(),
            max_line_bytes: MAX_LINE_BYTES,
        }
    }

    /// This server with `session` as its session (its turn id is replaced per call).
    pub fn with_session(mut self, session: Environment) -> Self {
        self.session = session;
        self
    }

    /// This server with `bytes` as the longest line it reads (default [`MAX_LINE_BYTES`]).
    pub fn with_max_line_bytes(mut self, bytes: usize) -> Self {
        self.max_line_bytes = bytes;
        self
    }

    /// The session every call of this server belongs to.
    pub fn session(&self) -> &Environment {
        &self.session
    }

    /// Serves MCP on the process's stdin and stdout until stdin ends.
    ///
    /// # Errors
    /// As [`McpServer::serve`].
    pub async fn serve_stdio(&self) -> Result<(), ServeError> {
        self.serve(tokio::io::stdin(), tokio::io::stdout()).await
    }

    /// Serves MCP, one JSON-RPC message per line, reading `input` and writing `output`,
    /// until `input` ends. Tool calls in flight then finish and are answered before this
    /// returns.
    ///
    /// # Errors
    /// [`ServeError::Read`] or [`ServeError::Write`] on an I/O error (the client went away).
    /// Malformed messages are answered with JSON-RPC errors and are not errors here.
    pub async fn serve<R, W>(&self, input: R, output: W) -> Result<(), ServeError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        info!(
            session_id = %self.session.session_id,
            tools = self.registry.len(),
            "MCP server ready: reading JSON-RPC from stdin, one message per line"
        );
        let (sender, receiver) = mpsc::unbounded_channel();
        let writer_failed = CancellationToken::new();
        let (read, write) = tokio::join!(
            self.read_loop(BufReader::new(input), sender, writer_failed.clone()),
            write_loop(output, receiver, writer_failed),
        );
        write?;
        read?;
        info!(session_id = %self.session.session_id, "stdin closed, MCP server stopped");
        Ok(())
    }

    async fn read_loop<R: AsyncBufRead + Unpin>(
        &self,
        mut input: R,
        sender: mpsc::UnboundedSender<Value>,
        writer_failed: CancellationToken,
    ) -> Result<(), ServeError> {
        let mut tasks = JoinSet::new();
        let in_flight = InFlight::default();
        let mut line = Vec::new();
        let mut discarding = false;
        loop {
            let read = tokio::select! {
                read = read_line(&mut input, &mut line, &mut discarding, self.max_line_bytes) => read,
                () = writer_failed.cancelled() => {
                    tasks.abort_all();
                    return Ok(());
                }
            };
            match read.map_err(ServeError::Read)? {
                Line::Eof => break,
                Line::TooLong => {
                    warn!(
                        limit = self.max_line_bytes,
                        "skipped a message longer than the line limit"
                    );
                    let message = format!(
                        "Invalid Request: the message is longer than {} bytes, the limit for one line; send less per call",
                        self.max_line_bytes
                    );
                    send(
                        &sender,
                        RpcError::new(Value::Null, INVALID_REQUEST, message).to_json(),
                    );
                }
                Line::Complete => {
                    let text = trim_line(&line);
                    if !text.is_empty() {
                        match parse_line(text) {
                            Ok(message) => self.handle(message, &sender, &mut tasks, &in_flight),
                            Err(err) => {
                                debug!(code = err.code, "{}", err.message);
                                send(&sender, err.to_json());
                            }
                        }
                    }
                    line.clear();
                }
            }
            while let Some(joined) = tasks.try_join_next() {
                report_join(joined);
            }
        }
        if !tasks.is_empty() {
            debug!(
                calls = tasks.len(),
                "stdin closed; finishing the tool calls in flight"
            );
        }
        while let Some(joined) = tasks.join_next().await {
            report_join(joined);
        }
        Ok(())
    }

    fn handle(
        &self,
        message: Incoming,
        sender: &mpsc::UnboundedSender<Value>,
        tasks: &mut JoinSet<()>,
        in_flight: &InFlight,
    ) {
        match message {
            Incoming::Request { id, method, params } => {
                debug!(%id, %method, "request");
                let reply = match method.as_str() {
                    "initialize" => Ok(self.initialize(&params)),
                    "ping" => Ok(json!({})),
                    "tools/list" => Ok(tools_list_result(&self.registry.definitions())),
                    "tools/call" => match call_params(&id, &params) {
                        Ok(call) => {
                            self.spawn_call(id, call.name, call.arguments, sender, tasks, in_flight);
                            return;
                        }
                        Err(err) => Err(err),
                    },
                    _ => Err(RpcError::new(
                        id.clone(),
                        METHOD_NOT_FOUND,
                        format!("Method not found: {method}; this server answers initialize, ping, tools/list and tools/call"),
                    )),
                };
                match reply {
                    Ok(result) => send(sender, response(&id, result)),
                    Err(err) => send(sender, err.to_json()),
                }
            }
            Incoming::Notification { method, params } => match method.as_str() {
                "notifications/initialized" => debug!("client initialized"),
                "notifications/cancelled" => cancel(in_flight, &params),
                _ => debug!(%method, "ignored notification"),
            },
            Incoming::Response { id } => {
                debug!(%id, "ignored a response: this server sends no requests")
            }
        }
    }

    fn initialize(&self, params: &Map<String, Value>) -> Value {
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        let result = initialize_result(requested);
        let client = |field: &str| {
            params
                .get("clientInfo")
                .and_then(|info| info.get(field))
                .and_then(|value| value.as_str())
                .unwrap_or("unknown")
                .to_owned()
        };
        let (name, version) = (client("name"), client("version"));
        let protocol = result["protocolVersion"].as_str().unwrap_or_default();
        info!(
            client = %name,
            client_version = %version,
            requested = requested.unwrap_or("none"),
            protocol,
            "initialize"
        );
        result
    }

    fn spawn_call(
        &self,
        id: Value,
        name: String,
        arguments: String,
        sender: &mpsc::UnboundedSender<Value>,
        tasks: &mut JoinSet<()>,
        in_flight: &InFlight,
    ) {
        let env = self.session.next_turn();
        let key = id.to_string();
        let token = CancellationToken::new();
        lock(in_flight).insert(key.clone(), token.clone());
        let (registry, sender, in_flight) = (
            Arc::clone(&self.registry),
            sender.clone(),
            Arc::clone(in_flight),
        );
        info!(session_id = %env.session_id, turn_id = %env.turn_id, tool = %name, request = %key, "tools/call");
        tasks.spawn(async move {
            let started = Instant::now();
            let call = ToolCall {
                id: key.clone(),
                name,
                arguments,
            };
            let ctx = CallContext::new().with_cancellation(token.clone());
            let outcome = registry.dispatch(&ctx, &call, &env).await;
            lock(&in_flight).remove(&key);
            let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
            match &outcome {
                Ok(_) => {
                    info!(turn_id = %env.turn_id, tool = %call.name, elapsed_ms, "tool call ok")
                }
                Err(err) => info!(
                    turn_id = %env.turn_id, tool = %call.name, elapsed_ms, kind = err.kind(),
                    "tool call failed: {err}"
                ),
            }
            if token.is_cancelled() {
                // MCP: the receiver of a cancellation should not answer the cancelled request.
                debug!(request = %key, "not answering a cancelled call");
                return;
            }
            send(&sender, response(&id, call_result(&outcome)));
        });
    }
}

fn cancel(in_flight: &InFlight, params: &Map<String, Value>) {
    let Some(id) = params.get("requestId") else {
        debug!("notifications/cancelled without a requestId");
        return;
    };
    let key = id.to_string();
    match lock(in_flight).get(&key) {
        Some(token) => {
            info!(request = %key, reason = ?params.get("reason"), "client cancelled a tool call");
            token.cancel();
        }
        None => debug!(request = %key, "cancelled a request that is not in flight"),
    }
}

fn lock(in_flight: &InFlight) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
    // The map is only inserted into and removed from; a poisoned lock leaves it usable.
    in_flight.lock().unwrap_or_else(PoisonError::into_inner)
}

fn report_join(joined: Result<(), tokio::task::JoinError>) {
    if let Err(err) = joined {
        if err.is_panic() {
            error!("a tool call task panicked outside the registry; its request was not answered");
        }
    }
}

fn send(sender: &mpsc::UnboundedSender<Value>, message: Value) {
    // The receiver is gone only when the writer failed, which ends the loop anyway.
    let _ = sender.send(message);
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut output: W,
    mut receiver: mpsc::UnboundedReceiver<Value>,
    failed: CancellationToken,
) -> Result<(), ServeError> {
    while let Some(message) = receiver.recv().await {
        // serde_json escapes control characters in strings, so a message is one line.
        let mut bytes = message.to_string().into_bytes();
        bytes.push(b'\n');
        let written = async {
            output.write_all(&bytes).await?;
            output.flush().await
        };
        if let Err(err) = written.await {
            failed.cancel();
            return Err(ServeError::Write(err));
        }
    }
    Ok(())
}

/// What one bounded line read produced.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A whole line is in the buffer (the last one may lack its newline).
    Complete,
    /// The line passed the limit and was dropped.
    TooLong,
    /// The input ended.
    Eof,
}

/// Reads one line into `line`, never letting it grow past `max` bytes. A line over the
/// limit is reported once and its rest is skipped on the following calls (`discarding`).
async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
    discarding: &mut bool,
    max: usize,
) -> std::io::Result<Line> {
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(if line.is_empty() || *discarding {
                Line::Eof
            } else {
                Line::Complete
            });
        }
        let newline = available.iter().position(|&b| b == b'\n');
        let take = newline.map_or(available.len(), |at| at + 1);
        let outcome = if *discarding {
            if newline.is_some() {
                *discarding = false;
            }
            None
        } else if line.len() + take > max + 1 {
            line.clear();
            *discarding = newline.is_none();
            Some(Line::TooLong)
        } else {
            line.extend_from_slice(&available[..take]);
            newline.map(|_| Line::Complete)
        };
        input.consume(take);
        if let Some(outcome) = outcome {
            return Ok(outcome);
        }
    }
}

/// The line without its newline, carriage return and surrounding blanks.
fn trim_line(line: &[u8]) -> &[u8] {
    line.trim_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Result<String, &'static str>> {
        let mut reader = BufReader::with_capacity(4, input);
        let (mut line, mut discarding, mut out) = (Vec::new(), false, Vec::new());
        loop {
            match read_line(&mut reader, &mut line, &mut discarding, max)
                .await
                .unwrap()
            {
                Line::Eof => return out,
                Line::TooLong => out.push(Err("too long")),
                Line::Complete => {
                    out.push(Ok(String::from_utf8(trim_line(&line).to_vec()).unwrap()));
                    line.clear();
                }
            }
        }
    }

    #[tokio::test]
    async fn bounded_lines() {
        assert_eq!(
            lines(b"ab\r\ncdefgh\n\nxyz", 5).await,
            [
                Ok("ab".into()),
                Err("too long"),
                Ok("".into()),
                Ok("xyz".into())
            ]
        );
        // Exactly at the limit (newline not counted) passes; the rest of a long line is skipped.
        assert_eq!(
            lines(b"12345\n123456789012\nok\n", 5).await,
            [Ok("12345".into()), Err("too long"), Ok("ok".into())]
        );
        assert_eq!(lines(b"", 5).await, []);
    }

    fn registry() -> Arc<Registry> {
        use toolhost::registry::{Arguments, ToolDefinition, ToolError, ToolResult};
        use toolhost_sdk::schema::{object, string};
        let registry = Registry::new();
        registry
            .register(
                ToolDefinition::new(
                    "greet",
                    "Greet someone.",
                    object([("name", string("Who."))], ["name"]),
                ),
                |_ctx: CallContext, args: Arguments, _env: Environment| async move {
                    Ok(ToolResult::new(format!(
                        "Hello, {}!",
                        args.required_str("name")?
                    )))
                },
            )
            .unwrap();
        registry
            .register(
                ToolDefinition::new("turn", "Echo the environment.", json!({"type": "object"})),
                |_ctx: CallContext, _args: Arguments, env: Environment| async move {
                    Ok(ToolResult::new(
                        json!({"session": env.session_id, "turn": env.turn_id}),
                    ))
                },
            )
            .unwrap();
        registry
            .register(
                ToolDefinition::new("sleep", "Wait until cancelled.", json!({"type": "object"})),
                |ctx: CallContext, _args: Arguments, _env: Environment| async move {
                    ctx.cancellation().cancelled().await;
                    Err::<ToolResult, _>(ToolError::failed("cancelled"))
                },
            )
            .unwrap();
        Arc::new(registry)
    }

    async fn exchange(input: &str) -> Vec<Value> {
        let server = McpServer::new(registry()).with_session(Environment {
            session_id: "s-1".into(),
            turn_id: String::new(),
        });
        let mut output = Vec::new();
        server.serve(input.as_bytes(), &mut output).await.unwrap();
        String::from_utf8(output)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn answers_each_request_and_keeps_serving() {
        let out = exchange(concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}"#, "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, "\n",
            "garbage\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"nope"}"#, "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#, "\n",
            r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#, "\n",
        ))
        .await;
        assert_eq!(out.len(), 4, "{out:?}");
        assert_eq!(out[0]["result"]["protocolVersion"], "2024-11-05");
        assert_eq!(out[1]["id"], Value::Null);
        assert_eq!(out[1]["error"]["code"], -32700);
        assert_eq!(
            out[2],
            json!({"jsonrpc":"2.0","id":2,"error":{"code":-32601,
                "message":"Method not found: nope; this server answers initialize, ping, tools/list and tools/call"}})
        );
        assert_eq!(out[3], json!({"jsonrpc":"2.0","id":3,"result":{}}));
    }

    #[tokio::test]
    async fn tool_calls_and_errors_as_results() {
        let mut out = exchange(concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}"#, "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{}}}"#, "\n",
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"missing"}}"#, "\n",
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"greet","arguments":[1]}}"#, "\n",
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{}}"#, "\n",
        ))
        .await;
        out.sort_by_key(|m| m["id"].as_i64());
        let text = |m: &Value| {
            (
                m["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                m["result"]["isError"].clone(),
            )
        };
        assert_eq!(text(&out[0]), ("Hello, Ada!".into(), json!(false)));
        assert_eq!(text(&out[1]).1, json!(true));
        assert!(
            text(&out[1]).0.starts_with("greet: "),
            "{}",
            text(&out[1]).0
        );
        assert_eq!(
            text(&out[2]),
            ("unknown tool \"missing\": no tool of that name is registered; call one of the tools you were offered".into(), json!(true))
        );
        assert_eq!(text(&out[3]).1, json!(true));
        assert_eq!(out[4]["error"]["code"], -32602);
    }

    #[tokio::test]
    async fn fresh_turn_per_call_same_session() {
        let out = exchange(concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"turn"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"turn"}}"#,
            "\n",
        ))
        .await;
        let envs: Vec<Value> = out
            .iter()
            .map(|m| {
                serde_json::from_str(m["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
            })
            .collect();
        assert_eq!(
            (envs[0]["session"].clone(), envs[1]["session"].clone()),
            (json!("s-1"), json!("s-1"))
        );
        assert_ne!(envs[0]["turn"], envs[1]["turn"]);
        assert_eq!(envs[0]["turn"].as_str().unwrap().len(), 36);
    }

    #[tokio::test]
    async fn cancelled_call_is_stopped_and_not_answered() {
        let out = exchange(concat!(
            r#"{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"sleep"}}"#, "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"user"}}"#, "\n",
            r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#, "\n",
        ))
        .await;
        assert_eq!(out, [json!({"jsonrpc":"2.0","id":9,"result":{}})]);
    }

    #[tokio::test]
    async fn write_failure_is_an_error() {
        struct Broken;
        impl AsyncWrite for Broken {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
                _: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
            }
            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }
            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }
        }
        let server = McpServer::new(registry());
        let err = server
            .serve(
                &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"[..],
                Broken,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, ServeError::Write(ref e) if e.kind() == std::io::ErrorKind::BrokenPipe),
            "{err:?}"
        );
    }
}
