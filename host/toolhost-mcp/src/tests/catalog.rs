//! The registry's catalog (prompts, resources of plugins) and file subscriptions,
//! served over stdio, against hostile sources and clients: a source that lists a
//! million resources on one page, one that answers outside its namespace, one that
//! returns a 100 MB prompt, one that never answers; a client that forges cursors or
//! subscribes a hundred thousand times.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use toolhost::catalog::{
    PromptArgument, PromptDefinition, PromptMessage, PromptResult, PromptSource, ResourceContents,
    ResourceEntry, ResourceError, ResourcePage, ResourceSource, ResourceTemplate, Role,
    SourceFuture,
};
use toolhost::registry::{
    CallContext, ContentBlock, EmbeddedResource, Environment, Media, Registry, ResourceBody,
    ResourceLink, ToolError,
};
use toolhost::tools::VfsToolOptions;
use toolhost::vfs::{MemoryStorage, Storage};

use super::{serve_client, Client};
use crate::jsonrpc::{INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::limits::{MAX_CATALOG_RESULT_BYTES, MAX_RESOURCE_SUBSCRIPTIONS};
use crate::resources::RESOURCE_NOT_FOUND;
use crate::{FileResources, McpServer};

const INTERNAL_ERROR: i64 = -32603;

/// How a test source behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// As it should.
    Good,
    /// Never answers (but notices its context being cancelled).
    Hangs,
    /// Returns far too much: a 100 MB prompt, a million resources on one page, a 5 MB
    /// read, a thousand completions.
    Floods,
    /// Answers for URIs outside its namespace.
    Strays,
    /// Hands out a 2 KiB cursor.
    LongCursor,
}

struct Prompts {
    mode: Mode,
    /// Set when a call's context was cancelled (a deadline passed).
    cancelled: Arc<AtomicBool>,
}

fn greet() -> PromptDefinition {
    PromptDefinition {
        name: "greet".into(),
        title: Some("Greeting".into()),
        description: Some("Greets someone.".into()),
        arguments: vec![
            PromptArgument {
                name: "who".into(),
                description: Some("Whom to greet.".into()),
                required: true,
            },
            PromptArgument {
                name: "tone".into(),
                description: None,
                required: false,
            },
        ],
    }
}

/// Waits until `ctx` is cancelled, then notes it; never answers.
fn hang<T: Send + 'static, E: Send + 'static>(
    ctx: CallContext,
    cancelled: Arc<AtomicBool>,
) -> SourceFuture<T, E> {
    // The source's future is dropped when its time is up: a task of its own sees the
    // context cancelled, as a plugin's work would.
    tokio::spawn(async move {
        ctx.cancellation().cancelled().await;
        cancelled.store(true, Ordering::SeqCst);
    });
    Box::pin(std::future::pending())
}

impl PromptSource for Prompts {
    fn definitions(&self) -> Vec<PromptDefinition> {
        let mut plain = greet();
        plain.name = "plain".into();
        plain.arguments.clear();
        vec![greet(), plain]
    }

    fn get(
        &self,
        ctx: CallContext,
        name: String,
        arguments: BTreeMap<String, String>,
        _env: Environment,
    ) -> SourceFuture<PromptResult, ToolError> {
        let mode = self.mode;
        if mode == Mode::Hangs {
            return hang(ctx, Arc::clone(&self.cancelled));
        }
        Box::pin(async move {
            let text = match mode {
                Mode::Floods => "x".repeat(100 << 20),
                _ => format!(
                    "Hello, {}! ({name}, {})",
                    arguments.get("who").map_or("nobody", String::as_str),
                    arguments.get("tone").map_or("plain", String::as_str)
                ),
            };
            Ok(PromptResult {
                description: Some("A greeting.".into()),
                messages: vec![
                    PromptMessage {
                        role: Role::User,
                        content: ContentBlock::text(text),
                    },
                    PromptMessage {
                        role: Role::Assistant,
                        content: ContentBlock::Image(Media {
                            data: vec![1, 2, 3],
                            mime_type: "image/png".into(),
                        }),
                    },
                    PromptMessage {
                        role: Role::User,
                        content: ContentBlock::ResourceLink(ResourceLink {
                            uri: "plugin://notes/a".into(),
                            name: "a".into(),
                            mime_type: None,
                            description: Some("Note a.".into()),
                        }),
                    },
                    PromptMessage {
                        role: Role::User,
                        content: ContentBlock::Resource(EmbeddedResource {
                            uri: "plugin://notes/b".into(),
                            mime_type: Some("application/octet-stream".into()),
                            body: ResourceBody::Blob(vec![0xff, 0]),
                        }),
                    },
                ],
            })
        })
    }

    fn complete(
        &self,
        _ctx: CallContext,
        _name: String,
        argument: String,
        value: String,
        _context: BTreeMap<String, String>,
        _env: Environment,
    ) -> SourceFuture<Vec<String>, ToolError> {
        let count = if self.mode == Mode::Floods { 1000 } else { 3 };
        Box::pin(async move {
            Ok((0..count)
                .map(|i| format!("{value}{argument}{i}"))
                .collect())
        })
    }
}

struct Resources {
    namespace: &'static str,
    mode: Mode,
    /// Entries per page of its own (its cursor is the index of the next entry).
    per_page: usize,
    /// How many resources it has.
    total: usize,
    cancelled: Arc<AtomicBool>,
}

impl Resources {
    fn entry(&self, at: usize) -> ResourceEntry {
        ResourceEntry {
            uri: format!("{}r{at}", self.namespace),
            name: format!("r{at}"),
            title: None,
            description: None,
            mime_type: Some("text/plain".into()),
            size: Some(1),
        }
    }
}

impl ResourceSource for Resources {
    fn templates(&self) -> Vec<ResourceTemplate> {
        vec![ResourceTemplate {
            uri_template: format!("{}{{id}}", self.namespace),
            name: "item".into(),
            title: None,
            description: Some("An item by id.".into()),
            mime_type: Some("text/plain".into()),
        }]
    }

    fn list(
        &self,
        ctx: CallContext,
        cursor: Option<String>,
        _env: Environment,
    ) -> SourceFuture<ResourcePage, ResourceError> {
        if self.mode == Mode::Hangs {
            return hang(ctx, Arc::clone(&self.cancelled));
        }
        let start = match cursor.as_deref().map(str::parse::<usize>) {
            None => 0,
            Some(Ok(start)) => start,
            Some(Err(_)) => {
                return Box::pin(async { Err(ResourceError::Invalid("not my cursor".into())) })
            }
        };
        let end = (start + self.per_page).min(self.total);
        let mut resources: Vec<ResourceEntry> = (start..end).map(|at| self.entry(at)).collect();
        if self.mode == Mode::Strays {
            resources.insert(
                1,
                ResourceEntry {
                    uri: "file:///etc/passwd".into(),
                    ..self.entry(999)
                },
            );
        }
        let page = ResourcePage {
            resources,
            next_cursor: if self.mode == Mode::LongCursor {
                Some("c".repeat(2048))
            } else {
                (end < self.total).then(|| end.to_string())
            },
        };
        Box::pin(async move { Ok(page) })
    }

    fn read(
        &self,
        ctx: CallContext,
        uri: String,
        _env: Environment,
    ) -> SourceFuture<Vec<ResourceContents>, ResourceError> {
        let mode = self.mode;
        if mode == Mode::Hangs {
            return hang(ctx, Arc::clone(&self.cancelled));
        }
        Box::pin(async move {
            if uri.ends_with("/missing") {
                return Err(ResourceError::NotFound(format!("no {uri}")));
            }
            let (uri, body) = match mode {
                Mode::Strays => (
                    "plugin://other/x".to_owned(),
                    ResourceBody::Text("x".into()),
                ),
                Mode::Floods => (uri, ResourceBody::Blob(vec![7; 5 << 20])),
                _ => (uri.clone(), ResourceBody::Text(format!("text of {uri}"))),
            };
            Ok(vec![ResourceContents {
                uri,
                mime_type: Some("text/plain".into()),
                body,
            }])
        })
    }
}

/// A registry whose catalog has prompts (`mode`) and one resource source per
/// `(namespace, mode, per_page, total)`; its call timeout is 300 ms.
pub(crate) fn registry_with(
    prompts: Option<Mode>,
    sources: &[(&'static str, Mode, usize, usize)],
) -> (Arc<Registry>, Arc<AtomicBool>) {
    registry_timed(Duration::from_millis(300), prompts, sources)
}

fn registry_timed(
    timeout: Duration,
    prompts: Option<Mode>,
    sources: &[(&'static str, Mode, usize, usize)],
) -> (Arc<Registry>, Arc<AtomicBool>) {
    let registry = Registry::new().with_call_timeout(timeout);
    let cancelled = Arc::new(AtomicBool::new(false));
    if let Some(mode) = prompts {
        let source: Arc<dyn PromptSource> = Arc::new(Prompts {
            mode,
            cancelled: Arc::clone(&cancelled),
        });
        registry
            .catalog()
            .replace("greeter", Some(source), None, None)
            .unwrap();
    }
    for (at, &(namespace, mode, per_page, total)) in sources.iter().enumerate() {
        let source: Arc<dyn ResourceSource> = Arc::new(Resources {
            namespace,
            mode,
            per_page,
            total,
            cancelled: Arc::clone(&cancelled),
        });
        registry
            .catalog()
            .replace(&format!("owner{at}"), None, Some(source), Some(namespace))
            .unwrap();
    }
    (Arc::new(registry), cancelled)
}

/// Serves `requests` (each given an id from 1 on) followed by a ping, and gives the
/// answers in id order; asserts the ping was answered (the server kept serving).
async fn serve(server: McpServer, requests: &[Value]) -> Vec<Value> {
    let mut input = String::new();
    for (at, request) in requests.iter().enumerate() {
        let mut message = json!({"jsonrpc": "2.0", "id": at + 1});
        for (key, value) in request.as_object().unwrap() {
            message[key] = value.clone();
        }
        input.push_str(&message.to_string());
        input.push('\n');
    }
    input.push_str(r#"{"jsonrpc":"2.0","id":"alive","method":"ping"}"#);
    input.push('\n');
    let mut output = Vec::new();
    server.serve(input.as_bytes(), &mut output).await.unwrap();
    let mut answers: Vec<Value> = std::str::from_utf8(&output)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let alive = answers
        .iter()
        .position(|answer| answer["id"] == "alive")
        .expect("the ping after the requests is answered");
    assert_eq!(answers.remove(alive)["result"], json!({}));
    answers.sort_by_key(|answer| answer["id"].as_u64());
    assert_eq!(answers.len(), requests.len(), "{answers:?}");
    answers
}

fn request(method: &str, params: Value) -> Value {
    json!({"method": method, "params": params})
}

fn assert_refused(answer: &Value, code: i64, words: &[&str]) {
    let got = answer["error"]["code"].as_i64();
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    // A hostile answer can be 100 MB: show its start only.
    let text = answer.to_string();
    let shown: String = text.chars().take(500).collect();
    assert_eq!(got, Some(code), "{shown} ({} bytes)", text.len());
    for word in words {
        assert!(message.contains(word), "{word:?} not in {message:?}");
    }
}

fn modern(mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    params
}

fn memory_files(paths: &[&str]) -> (Arc<MemoryStorage>, FileResources) {
    let storage = Arc::new(MemoryStorage::new());
    for path in paths {
        storage.write(path, b"content", "").unwrap();
    }
    let options = VfsToolOptions::builder(Arc::clone(&storage) as Arc<dyn Storage>).build();
    (storage, FileResources::new(options))
}

#[tokio::test]
async fn prompts_are_listed_and_filled_in_with_every_kind_of_block() {
    let (registry, _) = registry_with(Some(Mode::Good), &[]);
    let answers = serve(
        McpServer::new(registry).with_page_size(1),
        &[
            request("initialize", json!({"protocolVersion": "2025-06-18"})),
            request("prompts/list", json!({})),
            request(
                "prompts/get",
                json!({"name": "greet", "arguments": {"who": "Ada"}}),
            ),
            request(
                "prompts/get",
                json!({"name": "greet", "arguments": {"tone": "warm"}}),
            ),
            request("prompts/get", json!({"name": "nope"})),
            request(
                "prompts/get",
                json!({"name": "greet", "arguments": {"who": 7}}),
            ),
            request(
                "prompts/get",
                json!({"name": "greet", "arguments": ["Ada"]}),
            ),
            request("prompts/get", json!({"arguments": {}})),
            request("prompts/get", json!({"name": "plain"})),
        ],
    )
    .await;
    assert_eq!(
        answers[0]["result"]["capabilities"],
        json!({"tools": {"listChanged": false}, "logging": {}, "prompts": {"listChanged": false}})
    );
    let first = &answers[1]["result"];
    assert_eq!(
        first["prompts"],
        json!([{
            "name": "greet", "title": "Greeting", "description": "Greets someone.",
            "arguments": [
                {"name": "who", "description": "Whom to greet.", "required": true},
                {"name": "tone", "required": false},
            ],
        }])
    );
    let cursor = first["nextCursor"].as_str().unwrap().to_owned();
    assert_eq!(
        answers[2]["result"],
        json!({
            "description": "A greeting.",
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Hello, Ada! (greet, plain)"}},
                {"role": "assistant", "content": {"type": "image", "data": "AQID", "mimeType": "image/png"}},
                {"role": "user", "content": {"type": "resource_link", "uri": "plugin://notes/a", "name": "a", "description": "Note a."}},
                {"role": "user", "content": {"type": "resource", "resource": {"uri": "plugin://notes/b", "mimeType": "application/octet-stream", "blob": "/wA="}}},
            ],
        })
    );
    assert_refused(&answers[3], INVALID_PARAMS, &["needs argument \"who\""]);
    assert_refused(
        &answers[4],
        INVALID_PARAMS,
        &["unknown prompt \"nope\"", "prompts/list"],
    );
    assert_refused(
        &answers[5],
        INVALID_PARAMS,
        &["argument \"who\" must be a string, got a number"],
    );
    assert_refused(
        &answers[6],
        INVALID_PARAMS,
        &["object of strings", "got an array"],
    );
    assert_refused(&answers[7], INVALID_PARAMS, &["\"name\" must be a string"]);
    assert_eq!(
        answers[8]["result"]["messages"].as_array().unwrap().len(),
        4
    );

    // The second page, through the cursor; a tools/list cursor and a forged one are
    // refused, and a prompts/list cursor is refused by tools/list.
    let (registry, _) = registry_with(Some(Mode::Good), &[]);
    let pages = serve(
        McpServer::new(registry).with_page_size(1),
        &[
            request("prompts/list", json!({"cursor": cursor})),
            request("prompts/list", json!({"cursor": "c1.1.6772656574"})),
            request("prompts/list", json!({"cursor": "pc1.1.6e6f7065"})),
            request("tools/list", json!({"cursor": cursor})),
            request("prompts/list", json!({"cursor": 5})),
        ],
    )
    .await;
    assert_eq!(pages[0]["result"]["prompts"][0]["name"], "plain");
    assert_eq!(pages[0]["result"].get("nextCursor"), None);
    assert_refused(
        &pages[1],
        INVALID_PARAMS,
        &["not a cursor this server gave"],
    );
    assert_refused(
        &pages[2],
        INVALID_PARAMS,
        &["prompt list changed", "\"nope\" is gone"],
    );
    assert_refused(
        &pages[3],
        INVALID_PARAMS,
        &["not a cursor this server gave"],
    );
    assert_refused(&pages[4], INVALID_PARAMS, &["\"cursor\" must be a string"]);
}

#[tokio::test]
async fn a_server_without_a_catalog_answers_as_before() {
    let answers = serve(
        McpServer::new(Arc::new(Registry::new())),
        &[
            request("initialize", json!({"protocolVersion": "2025-06-18"})),
            request("prompts/list", json!({})),
            request("prompts/get", json!({"name": "greet"})),
            request("resources/subscribe", json!({"uri": "file:///a.md"})),
        ],
    )
    .await;
    assert_eq!(
        answers[0]["result"]["capabilities"],
        json!({"tools": {"listChanged": false}, "logging": {}})
    );
    for (answer, method) in
        answers[1..]
            .iter()
            .zip(["prompts/list", "prompts/get", "resources/subscribe"])
    {
        assert_refused(
            answer,
            METHOD_NOT_FOUND,
            &[&format!("Method not found: {method}")],
        );
    }
}

#[tokio::test]
async fn a_hundred_megabyte_prompt_is_refused() {
    let (registry, _) = registry_with(Some(Mode::Floods), &[]);
    let answers = serve(
        McpServer::new(registry),
        &[request(
            "prompts/get",
            json!({"name": "greet", "arguments": {"who": "Ada"}}),
        )],
    )
    .await;
    assert_refused(
        &answers[0],
        INTERNAL_ERROR,
        &[
            "prompt \"greet\" gave a result of 104857",
            &format!("over the {MAX_CATALOG_RESULT_BYTES}-byte cap"),
        ],
    );
}

#[tokio::test]
async fn a_source_that_never_answers_is_stopped_at_the_call_timeout() {
    let (registry, cancelled) = registry_with(
        Some(Mode::Hangs),
        &[("plugin://slow/", Mode::Hangs, 10, 10)],
    );
    let started = Instant::now();
    let answers = serve(
        McpServer::new(registry),
        &[
            request("prompts/get", json!({"name": "plain"})),
            request("resources/list", json!({})),
            request("resources/read", json!({"uri": "plugin://slow/r1"})),
        ],
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_refused(
        &answers[0],
        INTERNAL_ERROR,
        &["prompt \"plain\" did not answer within 0.3 s"],
    );
    assert_refused(
        &answers[1],
        INTERNAL_ERROR,
        &["the resource source of plugin://slow/ did not answer within 0.3 s"],
    );
    assert_refused(
        &answers[2],
        INTERNAL_ERROR,
        &["the source of \"plugin://slow/r1\" did not answer within 0.3 s"],
    );
    // The sources' contexts were cancelled: their work stops too.
    assert!(cancelled.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_cancelled_prompt_is_not_answered() {
    let (registry, cancelled) = registry_timed(Duration::from_secs(30), Some(Mode::Hangs), &[]);
    let (mut client, serving) = serve_client(McpServer::new(registry));
    client
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"plain"}}"#)
        .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    client
        .send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#)
        .await;
    client
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .await;
    let answer: Value =
        serde_json::from_str(&client.answer_within(Duration::from_secs(5)).await.unwrap()).unwrap();
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(client.answer_within(Duration::from_millis(300)).await, None);
    for _ in 0..50 {
        if cancelled.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(cancelled.load(Ordering::SeqCst));
    drop(client);
    serving.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_million_resources_on_one_page_go_out_a_page_at_a_time() {
    let (registry, _) = registry_with(None, &[("plugin://big/", Mode::Good, 1_000_000, 1_000_000)]);
    let server = McpServer::new(registry);
    let mut cursor: Option<String> = None;
    for page in 0..3 {
        let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        let answers = serve(server.clone(), &[request("resources/list", params)]).await;
        let result = &answers[0]["result"];
        let resources = result["resources"].as_array().unwrap();
        assert_eq!(resources.len(), 100, "page {page}");
        assert_eq!(resources[0]["uri"], format!("plugin://big/r{}", page * 100));
        assert_eq!(
            resources[99],
            json!({"uri": format!("plugin://big/r{}", page * 100 + 99), "name": format!("r{}", page * 100 + 99), "mimeType": "text/plain", "size": 1})
        );
        cursor = Some(result["nextCursor"].as_str().unwrap().to_owned());
    }
}

#[tokio::test]
async fn files_and_sources_are_one_sequence() {
    let (registry, _) = registry_with(
        None,
        &[
            ("plugin://a/", Mode::Good, 2, 3),
            ("test://b/", Mode::Good, 10, 1),
        ],
    );
    let (_storage, files) = memory_files(&["x.md", "y.md", "z.md"]);
    let server = McpServer::new(registry)
        .with_page_size(2)
        .with_resources(files);
    let mut uris = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        let answers = serve(server.clone(), &[request("resources/list", params)]).await;
        let result = &answers[0]["result"];
        for resource in result["resources"].as_array().unwrap() {
            uris.push(resource["uri"].as_str().unwrap().to_owned());
        }
        match result["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(
        uris,
        [
            "file:///x.md",
            "file:///y.md",
            "file:///z.md",
            "plugin://a/r0",
            "plugin://a/r1",
            "plugin://a/r2",
            "test://b/r0",
        ]
    );
    let gone = "s1.706c7567696e3a2f2f676f6e652f.0.-"; // plugin://gone/
    let answers = serve(
        server,
        &[
            request("resources/templates/list", json!({})),
            request("resources/read", json!({"uri": "plugin://a/r1"})),
            request("resources/read", json!({"uri": "file:///y.md"})),
            request("resources/read", json!({"uri": "plugin://a/missing"})),
            request("resources/read", json!({"uri": "other://x"})),
            request("resources/list", json!({"cursor": gone})),
            request("resources/list", json!({"cursor": "s1.zz.0.-"})),
            request("resources/list", json!({"cursor": "s1.706c7567696e3a2f2f612f.0.7a"})),
            request("completion/complete", json!({"ref": {"type": "ref/resource", "uri": "file:///{path}"}, "argument": {"name": "path", "value": "y"}})),
        ],
    )
    .await;
    assert_eq!(
        answers[0]["result"]["resourceTemplates"],
        json!([
            {"uriTemplate": "file:///{path}", "name": "file", "title": "File under the root", "description": "A file under the server's storage root, by its path relative to the root (e.g. notes/todo.md); completion/complete suggests paths."},
            {"uriTemplate": "plugin://a/{id}", "name": "item", "description": "An item by id.", "mimeType": "text/plain"},
            {"uriTemplate": "test://b/{id}", "name": "item", "description": "An item by id.", "mimeType": "text/plain"},
        ])
    );
    assert_eq!(
        answers[1]["result"],
        json!({"contents": [{"uri": "plugin://a/r1", "mimeType": "text/plain", "text": "text of plugin://a/r1"}]})
    );
    assert_eq!(answers[2]["result"]["contents"][0]["text"], "content");
    assert_refused(&answers[3], RESOURCE_NOT_FOUND, &["no plugin://a/missing"]);
    assert_eq!(
        answers[3]["error"]["data"],
        json!({"uri": "plugin://a/missing"})
    );
    assert_refused(&answers[4], INVALID_PARAMS, &["not a file:/// URI"]);
    assert_refused(
        &answers[5],
        INVALID_PARAMS,
        &["no source owns plugin://gone/", "list again"],
    );
    assert_refused(
        &answers[6],
        INVALID_PARAMS,
        &["not a cursor this server gave"],
    );
    // A cursor the source never gave is the source's to refuse.
    assert_refused(&answers[7], INVALID_PARAMS, &["not my cursor"]);
    assert_eq!(
        answers[8]["result"]["completion"]["values"],
        json!(["y.md"])
    );
}

#[tokio::test]
async fn sources_cannot_answer_outside_their_namespace_or_cap() {
    let (registry, _) = registry_with(
        None,
        &[
            ("plugin://stray/", Mode::Strays, 3, 3),
            ("plugin://big/", Mode::Floods, 3, 3),
        ],
    );
    let answers = serve(
        McpServer::new(registry),
        &[
            request("resources/list", json!({})),
            request("resources/read", json!({"uri": "plugin://stray/r0"})),
            request("resources/read", json!({"uri": "plugin://big/r0"})),
            request("resources/read", json!({"uri": "file:///notes.md"})),
            request(
                "resources/read",
                json!({"uri": format!("plugin://stray/{}", "a".repeat(4000))}),
            ),
            request("resources/read", json!({})),
        ],
    )
    .await;
    let listed: Vec<&str> = answers[0]["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        [
            "plugin://stray/r0",
            "plugin://stray/r1",
            "plugin://stray/r2"
        ]
    );
    assert_refused(
        &answers[1],
        INTERNAL_ERROR,
        &["returned content for \"plugin://other/x\", outside its namespace plugin://stray/"],
    );
    assert_refused(
        &answers[2],
        INTERNAL_ERROR,
        &[&format!("over the {MAX_CATALOG_RESULT_BYTES}-byte cap")],
    );
    assert_refused(
        &answers[3],
        INVALID_PARAMS,
        &["no resource source owns \"file:///notes.md\""],
    );
    assert_refused(&answers[4], INVALID_PARAMS, &["over the 3080-byte limit"]);
    assert_refused(&answers[5], INVALID_PARAMS, &["\"uri\" must be a string"]);
}

#[tokio::test]
async fn prompt_completions_are_capped() {
    let (registry, _) = registry_with(Some(Mode::Floods), &[]);
    let answers = serve(
        McpServer::new(registry),
        &[
            request("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "A"}})),
            request("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "whom", "value": "A"}})),
            request("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "who", "value": ""}})),
            request("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who"}})),
        ],
    )
    .await;
    let completion = &answers[0]["result"]["completion"];
    assert_eq!(completion["values"].as_array().unwrap().len(), 100);
    assert_eq!(completion["values"][99], "Awho99");
    assert_eq!(
        (&completion["total"], &completion["hasMore"]),
        (&json!(1000), &json!(true))
    );
    assert_refused(
        &answers[1],
        INVALID_PARAMS,
        &["has no argument \"whom\"", "[who, tone]"],
    );
    assert_refused(&answers[2], INVALID_PARAMS, &["unknown prompt \"nope\""]);
    assert_refused(&answers[3], INVALID_PARAMS, &["\"argument\" must be"]);
}

#[tokio::test]
async fn the_modern_era_gets_its_result_fields() {
    let (registry, _) = registry_with(Some(Mode::Good), &[("plugin://a/", Mode::Good, 5, 2)]);
    let answers = serve(
        McpServer::new(registry),
        &[
            request("prompts/list", modern(json!({}))),
            request("prompts/get", modern(json!({"name": "plain"}))),
            request("resources/list", modern(json!({}))),
            request("resources/read", modern(json!({"uri": "plugin://a/r0"}))),
            request("resources/templates/list", modern(json!({}))),
            request("server/discover", modern(json!({}))),
            request("resources/subscribe", modern(json!({"uri": "file:///a"}))),
        ],
    )
    .await;
    for (answer, hints) in answers[..5].iter().zip([
        Some((300_000, "public")),
        None,
        Some((0, "private")),
        Some((0, "private")),
        Some((300_000, "public")),
    ]) {
        let result = &answer["result"];
        assert_eq!(result["resultType"], "complete", "{answer}");
        assert_eq!(
            result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "wasm-toolhost"
        );
        match hints {
            Some((ttl, scope)) => {
                assert_eq!(
                    (&result["ttlMs"], &result["cacheScope"]),
                    (&json!(ttl), &json!(scope))
                );
            }
            None => assert_eq!(result.get("ttlMs"), None),
        }
    }
    assert_eq!(
        answers[5]["result"]["capabilities"],
        json!({"tools": {"listChanged": false}, "logging": {}, "prompts": {"listChanged": false}, "resources": {}, "completions": {}})
    );
    assert_refused(&answers[6], METHOD_NOT_FOUND, &["resources/subscribe"]);
}

/// A server with `--watch` over a memory root holding `a.md`.
fn watched() -> (Arc<MemoryStorage>, McpServer) {
    let (storage, files) = memory_files(&["a.md", "b.md"]);
    let server = McpServer::new(Arc::new(Registry::new()))
        .with_list_changed(true)
        .with_resources(files);
    (storage, server)
}

#[tokio::test]
async fn a_subscribe_storm_is_refused_past_the_cap() {
    let (_storage, server) = watched();
    let mut requests = vec![request(
        "initialize",
        json!({"protocolVersion": "2025-06-18"}),
    )];
    requests.extend((0..100_000).map(|i| {
        request(
            "resources/subscribe",
            json!({"uri": format!("file:///f{i}.md")}),
        )
    }));
    requests.extend([
        request("resources/subscribe", json!({"uri": "file:///f0.md"})),
        request("resources/unsubscribe", json!({"uri": "file:///never.md"})),
        request("resources/unsubscribe", json!({"uri": "file:///f1.md"})),
        request("resources/subscribe", json!({"uri": "file:///new.md"})),
        request(
            "resources/subscribe",
            json!({"uri": "file:///../etc/passwd"}),
        ),
        request("resources/subscribe", json!({"uri": "plugin://x/y"})),
        request("resources/subscribe", json!({"uri": 5})),
    ]);
    let answers = serve(server, &requests).await;
    assert_eq!(
        answers[0]["result"]["capabilities"]["resources"],
        json!({"listChanged": true, "subscribe": true})
    );
    let storm = &answers[1..=100_000];
    let accepted = storm.iter().filter(|a| a["result"] == json!({})).count();
    assert_eq!(accepted, MAX_RESOURCE_SUBSCRIPTIONS);
    for answer in &storm[MAX_RESOURCE_SUBSCRIPTIONS..] {
        assert_refused(
            answer,
            INVALID_PARAMS,
            &[
                "subscribed to 64 resources already",
                "resources/unsubscribe one first",
            ],
        );
    }
    let rest = &answers[100_001..];
    // Again to one it holds: no more room taken, fine.
    assert_eq!(rest[0]["result"], json!({}));
    assert_eq!(rest[1]["result"], json!({}));
    assert_eq!(rest[2]["result"], json!({}));
    // One dropped: room for one more.
    assert_eq!(rest[3]["result"], json!({}), "{}", rest[3]);
    assert_refused(&rest[4], INVALID_PARAMS, &["\"..\" segment"]);
    assert_refused(&rest[5], INVALID_PARAMS, &["cannot be subscribed to"]);
    assert_refused(&rest[6], INVALID_PARAMS, &["\"uri\" must be a string"]);
}

async fn next_json(client: &mut Client, wait: Duration) -> Option<Value> {
    client
        .answer_within(wait)
        .await
        .map(|line| serde_json::from_str(&line).unwrap())
}

#[tokio::test]
async fn a_changed_file_is_announced_once() {
    let (storage, server) = watched();
    let (mut client, serving) = serve_client(server);
    client
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#)
        .await;
    next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    client
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"file:///a.md"}}"#)
        .await;
    assert_eq!(
        next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap()["result"],
        json!({})
    );
    // The first poll sees the file as it is; nothing is sent for it.
    assert_eq!(
        next_json(&mut client, Duration::from_millis(1500)).await,
        None
    );
    storage.write("a.md", b"changed", "").unwrap();
    storage.write("b.md", b"not subscribed", "").unwrap();
    let note = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        note,
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a.md"}})
    );
    // Once per change.
    assert_eq!(
        next_json(&mut client, Duration::from_millis(2500)).await,
        None
    );
    storage.delete("a.md").unwrap();
    let note = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(note["params"]["uri"], "file:///a.md");
    client
        .send(r#"{"jsonrpc":"2.0","id":3,"method":"resources/unsubscribe","params":{"uri":"file:///a.md"}}"#)
        .await;
    assert_eq!(
        next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap()["id"],
        3
    );
    storage.write("a.md", b"back", "").unwrap();
    assert_eq!(
        next_json(&mut client, Duration::from_millis(2500)).await,
        None
    );
    drop(client);
    serving.await.unwrap().unwrap();
}

#[tokio::test]
async fn catalog_changes_are_announced() {
    let (registry, _) = registry_with(None, &[]);
    let server = McpServer::new(Arc::clone(&registry)).with_list_changed(true);
    let (mut client, serving) = serve_client(server);
    client
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#)
        .await;
    let init = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        init["result"]["capabilities"],
        json!({"tools": {"listChanged": true}, "logging": {}, "prompts": {"listChanged": true}, "resources": {"listChanged": true, "subscribe": true}, "completions": {}})
    );
    let source: Arc<dyn PromptSource> = Arc::new(Prompts {
        mode: Mode::Good,
        cancelled: Arc::default(),
    });
    registry
        .catalog()
        .replace("greeter", Some(source), None, None)
        .unwrap();
    let note = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(note["method"], "notifications/prompts/list_changed");
    assert_eq!(
        next_json(&mut client, Duration::from_millis(300)).await,
        None
    );
    let source: Arc<dyn ResourceSource> = Arc::new(Resources {
        namespace: "plugin://a/",
        mode: Mode::Good,
        per_page: 1,
        total: 1,
        cancelled: Arc::default(),
    });
    registry
        .catalog()
        .replace("greeter", None, Some(source), Some("plugin://a/"))
        .unwrap();
    let mut methods = vec![
        next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap()["method"]
            .clone(),
        next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap()["method"]
            .clone(),
    ];
    methods.sort_by_key(|m| m.to_string());
    assert_eq!(
        methods,
        [
            json!("notifications/prompts/list_changed"),
            json!("notifications/resources/list_changed")
        ]
    );
    drop(client);
    serving.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_modern_subscription_hears_of_prompt_and_resource_changes() {
    let (registry, _) = registry_with(None, &[]);
    let server = McpServer::new(Arc::clone(&registry)).with_list_changed(true);
    let (mut client, serving) = serve_client(server);
    let listen = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": modern(json!({
        "notifications": {"promptsListChanged": true, "resourcesListChanged": true},
    }))});
    client.send(&listen.to_string()).await;
    let ack = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"promptsListChanged": true, "resourcesListChanged": true})
    );
    let source: Arc<dyn PromptSource> = Arc::new(Prompts {
        mode: Mode::Good,
        cancelled: Arc::default(),
    });
    registry
        .catalog()
        .replace("greeter", Some(source), None, None)
        .unwrap();
    let mut methods = Vec::new();
    for _ in 0..2 {
        let note = next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(
            note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 1,
            "{note}"
        );
        methods.push(note["method"].as_str().unwrap().to_owned());
    }
    methods.sort();
    assert_eq!(
        methods,
        [
            "notifications/prompts/list_changed",
            "notifications/resources/list_changed"
        ]
    );
    // The input ends: the subscription is answered, as a server closing it does.
    tokio::io::AsyncWriteExt::shutdown(&mut client.input)
        .await
        .unwrap();
    let end = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        (&end["id"], &end["result"]["resultType"]),
        (&json!(1), &json!("complete"))
    );
    serving.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_source_cursor_over_a_kilobyte_is_refused() {
    let (registry, _) = registry_with(None, &[("plugin://long/", Mode::LongCursor, 2, 2)]);
    let answers = serve(
        McpServer::new(registry),
        &[request("resources/list", json!({}))],
    )
    .await;
    assert_refused(
        &answers[0],
        INTERNAL_ERROR,
        &["the resource source of plugin://long/ gave a cursor of 2048 bytes, over the 1024-byte limit"],
    );
}

#[tokio::test]
async fn a_subscribed_resource_of_a_source_is_told_of_when_its_source_changes() {
    let (registry, _) = registry_with(None, &[("plugin://a/", Mode::Good, 1, 1)]);
    // Without --watch and without a root: the source's resources can still be subscribed
    // to (they change only when the catalog does); other URIs cannot.
    let answers = serve(
        McpServer::new(Arc::clone(&registry)),
        &[
            request("initialize", json!({"protocolVersion": "2025-06-18"})),
            request("resources/subscribe", json!({"uri": "plugin://a/r0"})),
            request("resources/subscribe", json!({"uri": "plugin://b/r0"})),
            request("resources/subscribe", json!({"uri": "file:///a.md"})),
            request("resources/unsubscribe", json!({"uri": "plugin://a/r0"})),
        ],
    )
    .await;
    assert_eq!(
        answers[0]["result"]["capabilities"]["resources"],
        json!({"subscribe": true})
    );
    assert_eq!(answers[1]["result"], json!({}));
    for answer in &answers[2..4] {
        assert_refused(answer, INVALID_PARAMS, &["no resource source owns it"]);
    }
    assert_eq!(answers[4]["result"], json!({}));

    // With --watch: a change of the catalog tells each subscribed resource of it.
    let server = McpServer::new(Arc::clone(&registry)).with_list_changed(true);
    let (mut client, serving) = serve_client(server);
    client
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#)
        .await;
    next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    client
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"plugin://a/r0"}}"#)
        .await;
    assert_eq!(
        next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap()["result"],
        json!({})
    );
    let source: Arc<dyn ResourceSource> = Arc::new(Resources {
        namespace: "plugin://a/",
        mode: Mode::Good,
        per_page: 1,
        total: 2,
        cancelled: Arc::default(),
    });
    registry
        .catalog()
        .replace("owner0", None, Some(source), Some("plugin://a/"))
        .unwrap();
    let mut got = vec![
        next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap(),
        next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap(),
    ];
    got.sort_by_key(|note| note["method"].to_string());
    assert_eq!(
        got,
        [
            json!({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"}),
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "plugin://a/r0"}}),
        ]
    );
    drop(client);
    serving.await.unwrap().unwrap();
}
