//! The registry's catalog (prompts, resources of a source) and file subscriptions over
//! MCP, every answer checked against the official `schema.json` of each revision: a
//! prompt with every kind of content block (those a revision lacks go out as text), the
//! files and a source's resources in one list, templates, reads, completions.

use std::collections::BTreeMap;
use std::sync::Arc;

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
use toolhost_mcp::{FileResources, McpServer, Revision};

use crate::mcp_schema::{schema_dir, Schema};

pub(crate) struct Prompts;

impl PromptSource for Prompts {
    fn definitions(&self) -> Vec<PromptDefinition> {
        vec![PromptDefinition {
            name: "greet".into(),
            title: Some("Greeting".into()),
            description: Some("Greets someone.".into()),
            arguments: vec![PromptArgument {
                name: "who".into(),
                description: Some("Whom to greet.".into()),
                required: true,
            }],
        }]
    }

    fn get(
        &self,
        _ctx: CallContext,
        _name: String,
        arguments: BTreeMap<String, String>,
        _env: Environment,
    ) -> SourceFuture<PromptResult, ToolError> {
        let who = arguments.get("who").cloned().unwrap_or_default();
        let media = |mime: &str| Media {
            data: vec![1, 2, 3],
            mime_type: mime.into(),
        };
        let blocks = vec![
            ContentBlock::text(format!("Hello, {who}!")),
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
                mime_type: None,
                body: ResourceBody::Text("b".into()),
            }),
            ContentBlock::Resource(EmbeddedResource {
                uri: "plugin://docs/c".into(),
                mime_type: Some("application/octet-stream".into()),
                body: ResourceBody::Blob(vec![0xff]),
            }),
        ];
        let messages = blocks
            .into_iter()
            .enumerate()
            .map(|(at, content)| PromptMessage {
                role: if at % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                content,
            })
            .collect();
        Box::pin(async move {
            Ok(PromptResult {
                description: Some("A greeting.".into()),
                messages,
            })
        })
    }

    fn complete(
        &self,
        _ctx: CallContext,
        _name: String,
        _argument: String,
        value: String,
        _context: BTreeMap<String, String>,
        _env: Environment,
    ) -> SourceFuture<Vec<String>, ToolError> {
        Box::pin(async move { Ok(vec![format!("{value}da"), format!("{value}lan")]) })
    }
}

pub(crate) struct Docs;

impl ResourceSource for Docs {
    fn templates(&self) -> Vec<ResourceTemplate> {
        vec![ResourceTemplate {
            uri_template: "plugin://docs/{id}".into(),
            name: "doc".into(),
            title: Some("A doc".into()),
            description: None,
            mime_type: Some("text/plain".into()),
        }]
    }

    fn list(
        &self,
        _ctx: CallContext,
        _cursor: Option<String>,
        _env: Environment,
    ) -> SourceFuture<ResourcePage, ResourceError> {
        Box::pin(async {
            Ok(ResourcePage {
                resources: vec![ResourceEntry {
                    uri: "plugin://docs/a".into(),
                    name: "a".into(),
                    title: Some("Doc a".into()),
                    description: Some("The first doc.".into()),
                    mime_type: Some("text/plain".into()),
                    size: Some(5),
                }],
                next_cursor: None,
            })
        })
    }

    fn read(
        &self,
        _ctx: CallContext,
        uri: String,
        _env: Environment,
    ) -> SourceFuture<Vec<ResourceContents>, ResourceError> {
        Box::pin(async move {
            Ok(vec![ResourceContents {
                uri,
                mime_type: Some("text/plain".into()),
                body: ResourceBody::Text("doc a".into()),
            }])
        })
    }
}

fn server() -> McpServer {
    let registry = Registry::new();
    registry
        .catalog()
        .replace("docs", Some(Arc::new(Prompts)), Some(Arc::new(Docs)), None)
        .unwrap();
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    storage.write("a.md", b"# a\n", "").unwrap();
    McpServer::new(Arc::new(registry))
        .with_list_changed(true)
        .with_resources(FileResources::new(VfsToolOptions::builder(storage).build()))
}

/// Serves `requests` (method, params; ids from 1) and gives each answer with the method
/// it answers, in order.
async fn serve(revision: Revision, requests: &[(&str, Value)]) -> Vec<(String, Value)> {
    let mut input = String::new();
    if !revision.is_modern() {
        input.push_str(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": revision.as_str(), "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string(),
        );
        input.push('\n');
    }
    for (at, (method, params)) in requests.iter().enumerate() {
        let mut params = params.clone();
        if revision.is_modern() {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            });
        }
        input.push_str(
            &json!({"jsonrpc": "2.0", "id": at + 1, "method": method, "params": params})
                .to_string(),
        );
        input.push('\n');
    }
    let mut output = Vec::new();
    server().serve(input.as_bytes(), &mut output).await.unwrap();
    let mut answers: Vec<Value> = std::str::from_utf8(&output)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    answers.sort_by_key(|answer| answer["id"].as_u64());
    answers
        .into_iter()
        .map(|answer| {
            let id = answer["id"].as_u64().unwrap() as usize;
            let method = if id == 0 {
                "initialize"
            } else {
                requests[id - 1].0
            };
            (method.to_owned(), answer)
        })
        .collect()
}

fn result_def(method: &str) -> &'static str {
    match method {
        "initialize" => "InitializeResult",
        "prompts/list" => "ListPromptsResult",
        "prompts/get" => "GetPromptResult",
        "completion/complete" => "CompleteResult",
        "resources/list" => "ListResourcesResult",
        "resources/templates/list" => "ListResourceTemplatesResult",
        "resources/read" => "ReadResourceResult",
        "resources/subscribe" | "resources/unsubscribe" => "EmptyResult",
        other => panic!("no result type for {other}"),
    }
}

#[tokio::test]
async fn catalog_answers_fit_the_schema_of_their_revision() {
    let dir = schema_dir();
    for revision in Revision::ALL {
        let schema = Schema::load(&dir, revision);
        let mut requests = vec![
            ("prompts/list", json!({})),
            (
                "prompts/get",
                json!({"name": "greet", "arguments": {"who": "Ada"}}),
            ),
            ("prompts/get", json!({"name": "greet"})),
            (
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "A"}}),
            ),
            ("resources/list", json!({})),
            ("resources/templates/list", json!({})),
            ("resources/read", json!({"uri": "plugin://docs/a"})),
            ("resources/read", json!({"uri": "file:///a.md"})),
        ];
        if !revision.is_modern() {
            requests.push(("resources/subscribe", json!({"uri": "file:///a.md"})));
            requests.push(("resources/unsubscribe", json!({"uri": "file:///a.md"})));
        }
        let mut answers = serve(revision, &requests).await;
        // The files come first; their last page leads on to the source's resources.
        let list = answers
            .iter()
            .find(|(method, _)| method == "resources/list")
            .map(|(_, answer)| answer["result"].clone())
            .unwrap();
        assert_eq!(list["resources"][0]["uri"], "file:///a.md", "{revision}");
        let cursor = list["nextCursor"].as_str().unwrap().to_owned();
        let next = serve(revision, &[("resources/list", json!({"cursor": cursor}))]).await;
        assert_eq!(
            next.last().unwrap().1["result"]["resources"][0]["uri"],
            "plugin://docs/a",
            "{revision}"
        );
        answers.extend(next);
        let (result_message, error_message) = if schema.has("JSONRPCResultResponse") {
            ("JSONRPCResultResponse", "JSONRPCErrorResponse")
        } else {
            ("JSONRPCResponse", "JSONRPCError")
        };
        let (mut results, mut errors) = (0, 0);
        for (method, answer) in &answers {
            if let Some(result) = answer.get("result") {
                schema.check(result_message, answer);
                schema.check(result_def(method), result);
                results += 1;
            } else {
                // The prompt without its required argument.
                assert_eq!(answer["error"]["code"], -32602, "{answer}");
                schema.check(error_message, answer);
                errors += 1;
            }
        }
        let expected = if revision.is_modern() { 8 } else { 12 };
        assert_eq!((results, errors), (expected, 1), "{revision}");
        let get = &answers
            .iter()
            .find(|(method, answer)| method == "prompts/get" && answer.get("result").is_some())
            .unwrap()
            .1["result"];
        let kinds: Vec<&str> = get["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"]["type"].as_str().unwrap())
            .collect();
        let expected_kinds: &[&str] = match revision {
            Revision::V2024_11_05 => &["text", "image", "text", "text", "resource", "resource"],
            Revision::V2025_03_26 => &["text", "image", "audio", "text", "resource", "resource"],
            _ => &[
                "text",
                "image",
                "audio",
                "resource_link",
                "resource",
                "resource",
            ],
        };
        assert_eq!(kinds, expected_kinds, "{revision}");
    }
}
