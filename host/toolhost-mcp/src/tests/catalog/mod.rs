//! The registry's catalog (prompts, resources of plugins) and file subscriptions,
//! served over stdio, against hostile sources and clients: a source that lists a
//! million resources on one page, one that answers outside its namespace, one that
//! returns a 100 MB prompt, one that never answers; a client that forges cursors or
//! subscribes a hundred thousand times.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
use crate::jsonrpc::INVALID_PARAMS;
use crate::resources::tests::serve;
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

mod changes;
mod served;
