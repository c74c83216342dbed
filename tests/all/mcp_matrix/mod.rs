//! The protocol matrix: every feature the MCP server has, on every revision it speaks,
//! over both transports (stdio through `McpServer::serve` on in-memory pipes, Streamable
//! HTTP through the real `HttpServer` on 127.0.0.1:0), each cell asserting what
//! docs/protocol.md promises there (served, refused with its error, or downgraded), and
//! every message the server sent in that cell checked against the revision's official
//! schema. The table in docs/protocol.md ("Matrix: revision × feature × transport") is
//! this file's `expected`.
//!
//! One fresh server per cell, over a Rust-native registry (handlers, a prompt source, a
//! resource source, a memory root): no wasm.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use toolhost::registry::{
    Arguments, CallContext, ContentBlock, EmbeddedResource, Environment, Media, Registry,
    ResourceBody, ResourceLink, TaskSupport, ToolDefinition, ToolResult,
};
use toolhost::tools::VfsToolOptions;
use toolhost::vfs::{MemoryStorage, Storage};
use toolhost_mcp::http::{HttpConfig, HttpServer, Registries, SessionKey};
use toolhost_mcp::{ApprovalPolicy, FileResources, McpServer, Revision};

use crate::mcp_schema::{extra_tool, schema_dir, Schema};
use crate::mcp_schema_catalog::{Docs, Prompts};
use crate::mcp_schema_http::{get, post};

mod client;
mod features;

use client::*;
use features::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Stdio,
    Http,
}

/// The registry every cell serves: a tool per feature, the catalog's prompt and
/// resource sources (namespace `plugin://docs/`).
fn registry() -> Arc<Registry> {
    let registry = Registry::new();
    let tool = |name: &str| ToolDefinition::new(name, name, json!({"type": "object"}));
    registry
        .register(
            tool("echo"),
            |_c: CallContext, _a: Arguments, _e: Environment| async { Ok(ToolResult::new("hi")) },
        )
        .unwrap();
    registry
        .register(
            tool("rich"),
            |_c: CallContext, _a: Arguments, _e: Environment| async {
                let media = |mime: &str| Media {
                    data: vec![1, 2, 3],
                    mime_type: mime.into(),
                };
                Ok(ToolResult::with_blocks(
                    vec![
                        ContentBlock::Image(media("image/png")),
                        ContentBlock::Audio(media("audio/wav")),
                        ContentBlock::ResourceLink(ResourceLink {
                            uri: "plugin://docs/a".into(),
                            name: "a".into(),
                            mime_type: Some("text/plain".into()),
                            description: None,
                        }),
                        ContentBlock::Resource(EmbeddedResource {
                            uri: "plugin://docs/b".into(),
                            mime_type: Some("text/plain".into()),
                            body: ResourceBody::Text("b".into()),
                        }),
                    ],
                    Value::Null,
                ))
            },
        )
        .unwrap();
    registry
        .register(
            tool("stats").with_output_schema(json!({
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            })),
            |_c: CallContext, _a: Arguments, _e: Environment| async {
                Ok(ToolResult::new(json!({"n": 1})))
            },
        )
        .unwrap();
    registry
        .register(
            tool("ask"),
            |ctx: CallContext, _a: Arguments, _e: Environment| async move {
                let answer = match ctx.interaction() {
                    None => "no interaction",
                    Some(asking) => match asking.confirm("Go on?".into()).await {
                        Ok(true) => "confirmed",
                        Ok(false) => "declined",
                        Err(_) => "failed",
                    },
                };
                Ok(ToolResult::new(answer))
            },
        )
        .unwrap();
    registry
        .register(
            tool("sample"),
            |ctx: CallContext, _a: Arguments, _e: Environment| async move {
                let Some(interaction) = ctx.interaction() else {
                    return Ok(ToolResult::new("no interaction"));
                };
                let request = toolhost::registry::SamplingRequest::new(
                    vec![toolhost::registry::SamplingRequest::user_text("Say hi")],
                    20,
                );
                let answer = match interaction.sample(request).await {
                    Ok(answer) => match answer.content {
                        toolhost::registry::ContentBlock::Text { text } => {
                            format!("sampled: {text}")
                        }
                        other => format!("sampled: {other:?}"),
                    },
                    Err(err) => format!("refused: {err}"),
                };
                Ok(ToolResult::new(answer))
            },
        )
        .unwrap();
    registry
        .register(
            tool("choose"),
            |ctx: CallContext, _a: Arguments, _e: Environment| async move {
                let Some(asking) = ctx.interaction() else {
                    return Ok(ToolResult::new("no interaction"));
                };
                let answer = match asking.ask("Which?".into(), multi_select()).await {
                    Ok(Some(values)) => values["colors"].to_string(),
                    Ok(None) => "declined".into(),
                    Err(err) => format!("refused: {err}"),
                };
                Ok(ToolResult::new(answer))
            },
        )
        .unwrap();
    registry
        .register(
            tool("guarded"),
            |_c: CallContext, _a: Arguments, _e: Environment| async { Ok(ToolResult::new("ran")) },
        )
        .unwrap();
    registry
        .register(
            tool("count").with_task_support(TaskSupport::Optional),
            |ctx: CallContext, _a: Arguments, _e: Environment| async move {
                ctx.report_progress(1, Some(2), || Some("half".into()));
                tokio::time::sleep(Duration::from_millis(150)).await;
                ctx.report_progress(2, Some(2), || None);
                Ok(ToolResult::new("counted"))
            },
        )
        .unwrap();
    registry
        .register(
            tool("chatty"),
            |_c: CallContext, _a: Arguments, _e: Environment| async {
                tracing::warn!(target: "plugin", plugin = "chatty", "careful");
                Ok(ToolResult::new("said"))
            },
        )
        .unwrap();
    registry
        .catalog()
        .replace("docs", Some(Arc::new(Prompts)), Some(Arc::new(Docs)), None)
        .unwrap();
    Arc::new(registry)
}

/// A form with a multiple choice: 2025-11-25 added those to elicitation's schemas.
fn multi_select() -> Value {
    json!({"type": "object", "properties": {"colors": {
        "type": "array", "items": {"type": "string", "enum": ["red", "green"]}}}})
}

/// The test client's answer to a request of the server: an elicitation's (accept) or a
/// sampling request's (a fixed text from the model); `None` for anything else.
fn reply_to(message: &Value) -> Option<Value> {
    match message["method"].as_str() {
        Some("elicitation/create") => Some(accept(&message["params"])),
        Some("sampling/createMessage") => Some(sampled()),
        _ => None,
    }
}

/// The test client's model's answer.
fn sampled() -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": "Hi there"},
        "model": "matrix-model", "stopReason": "endTurn"})
}

/// The test client's answer to a question: accept, with values for a form.
fn accept(question: &Value) -> Value {
    if question["requestedSchema"]["properties"]
        .get("colors")
        .is_some()
    {
        json!({"action": "accept", "content": {"colors": ["red"]}})
    } else {
        json!({"action": "accept"})
    }
}

/// The root's files (`a.md`), and its storage to change them.
fn files() -> (FileResources, Arc<dyn Storage>) {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    storage.write("a.md", b"# a\n", "text/markdown").unwrap();
    (
        FileResources::new(VfsToolOptions::builder(Arc::clone(&storage)).build()),
        storage,
    )
}

/// How long the servers wait for an answer to a question: long enough for the test
/// client's immediate answers, short for the cell that leaves one unanswered.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(2);

fn approval() -> ApprovalPolicy {
    ApprovalPolicy::new().confirm_tool("guarded")
}

type Lines = tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>;

#[derive(Debug, Clone, Copy)]
enum Feature {
    Tools,
    Rich,
    Structured,
    Prompts,
    Resources,
    Templates,
    Completion,
    Subscribe,
    Elicitation,
    Sampling,
    Form,
    Unanswered,
    Approval,
    Tasks,
    Progress,
    Logging,
    ListChanged,
    CatalogChanged,
}

async fn run(feature: Feature, c: &mut Client) -> String {
    match feature {
        Feature::Tools => tools(c).await,
        Feature::Rich => rich(c).await,
        Feature::Structured => structured(c).await,
        Feature::Prompts => prompts(c).await,
        Feature::Resources => resources(c).await,
        Feature::Templates => templates(c).await,
        Feature::Completion => completion(c).await,
        Feature::Subscribe => subscribe(c).await,
        Feature::Elicitation => elicitation(c).await,
        Feature::Sampling => sampling(c).await,
        Feature::Form => form(c).await,
        Feature::Unanswered => unanswered(c).await,
        Feature::Approval => approval_cell(c).await,
        Feature::Tasks => tasks(c).await,
        Feature::Progress => progress(c).await,
        Feature::Logging => logging(c).await,
        Feature::ListChanged => list_changed(c).await,
        Feature::CatalogChanged => catalog_changed(c).await,
    }
}

/// What each cell must give: the table of docs/protocol.md (the same on both transports).
fn expected(feature: Feature, revision: Revision, _transport: Transport) -> String {
    use Revision::*;
    let modern = revision.is_modern();
    let asks = revision >= V2025_06_18;
    match feature {
        Feature::Tools => "served: hi".into(),
        Feature::Rich => match revision {
            V2024_11_05 => "image,text,text,resource",
            V2025_03_26 => "image,audio,text,resource",
            _ => "image,audio,resource_link,resource",
        }
        .into(),
        Feature::Structured => r#"structuredContent {"n":1}"#.into(),
        // The source's blocks: text, image, audio, link, text resource, blob resource.
        Feature::Prompts => match revision {
            V2024_11_05 => r#"served: "Hello, Ada!", text,image,text,text,resource,resource"#,
            V2025_03_26 => r#"served: "Hello, Ada!", text,image,audio,text,resource,resource"#,
            _ => r#"served: "Hello, Ada!", text,image,audio,resource_link,resource,resource"#,
        }
        .into(),
        Feature::Resources => r##"served: "# a\n" "doc a""##.into(),
        Feature::Templates => "served: file:///{path} plugin://docs/{id}".into(),
        Feature::Completion => r#"served: ["Ada","Alan"] ["a.md"]"#.into(),
        Feature::Subscribe if modern => {
            "listen: notifications/resources/updated (source's resource); resources/subscribe error -32601".into()
        }
        Feature::Subscribe => {
            "served: {}, then notifications/resources/updated (file and source's resource)".into()
        }
        // Every revision has sampling (2024-11-05 on).
        Feature::Sampling if modern => "round, sampled: Hi there".into(),
        Feature::Sampling => "sent, sampled: Hi there".into(),
        Feature::Elicitation if modern => "round, confirmed".into(),
        Feature::Elicitation if asks => "asked, confirmed".into(),
        Feature::Form if modern => r#"round, ["red"]"#.into(),
        Feature::Form if revision == V2025_11_25 => r#"asked, ["red"]"#.into(),
        // 2025-06-18's schema has no multiple choice: refused before anything is sent.
        Feature::Form if asks => "refused".into(),
        Feature::Unanswered if modern => "round left unanswered, nothing waits".into(),
        Feature::Unanswered if asks => "asked, failed, question cancelled".into(),
        Feature::Elicitation | Feature::Form | Feature::Unanswered => "no interaction".into(),
        Feature::Approval if modern => "round, ran".into(),
        Feature::Approval if asks => "asked, ran".into(),
        Feature::Approval => "guarded: not run (isError)".into(),
        // A task's call sends no progress; a plain call does.
        Feature::Tasks if modern => {
            "task, completed: counted, no progress, tasks/result error -32601".into()
        }
        Feature::Tasks if revision == V2025_11_25 => "served: counted, no progress".into(),
        Feature::Tasks => {
            "call ran plainly (counted, with progress), tasks/get error -32601".into()
        }
        Feature::Progress => "progress before the answer".into(),
        Feature::Logging if modern => "setLevel error -32601, log lines before the answer".into(),
        Feature::Logging => "setLevel {}, log lines before the answer".into(),
        Feature::ListChanged if modern => "listen: notifications/tools/list_changed".into(),
        Feature::ListChanged => "notifications/tools/list_changed".into(),
        Feature::CatalogChanged => {
            "notifications/prompts/list_changed, notifications/resources/list_changed".into()
        }
    }
}

const FEATURES: [Feature; 18] = [
    Feature::Tools,
    Feature::Rich,
    Feature::Structured,
    Feature::Prompts,
    Feature::Resources,
    Feature::Templates,
    Feature::Completion,
    Feature::Subscribe,
    Feature::Elicitation,
    Feature::Sampling,
    Feature::Form,
    Feature::Unanswered,
    Feature::Approval,
    Feature::Tasks,
    Feature::Progress,
    Feature::Logging,
    Feature::ListChanged,
    Feature::CatalogChanged,
];

#[tokio::test(flavor = "current_thread")]
async fn every_feature_on_every_revision_and_transport() {
    use tracing_subscriber::layer::SubscriberExt;
    // The log layer, so notifications/message reach clients. A current thread runtime:
    // every call runs on this thread, under this subscriber.
    let _default = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(toolhost_mcp::log_layer()),
    );
    let mut wrong = Vec::new();
    for feature in FEATURES {
        for revision in Revision::ALL {
            for transport in [Transport::Stdio, Transport::Http] {
                // Each cell on its own task (on this thread, under this subscriber): a
                // panic is that cell's failure, the others still run.
                let cell = tokio::spawn(async move {
                    let samples = matches!(feature, Feature::Sampling);
                    let mut client = Client::start(revision, transport, samples).await;
                    let got = run(feature, &mut client).await;
                    (got, client.finish().await)
                })
                .await;
                let want = expected(feature, revision, transport);
                let at = format!("{feature:?} {revision} {transport:?}");
                match cell {
                    Err(panicked) => wrong.push(format!("{at}: {panicked}")),
                    Ok((got, invalid)) => {
                        // The cell as the docs table has it (`--nocapture` shows them).
                        println!("{at}: {got}");
                        if got != want {
                            wrong.push(format!("{at}: got {got:?}, want {want:?}"));
                        }
                        for message in invalid {
                            wrong.push(format!("{at}: {message}"));
                        }
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "cells that differ:\n{}", wrong.join("\n"));
}
