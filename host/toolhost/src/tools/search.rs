//! The `search` tool, registered when the storage is [`Searchable`](crate::vfs::Searchable).

use crate::registry::ToolAnnotations;
use std::sync::Arc;

use serde_json::json;
use toolhost_sdk::schema::{object, string};

use super::common::storage_error;
use super::register_file_tool;
use super::{blocking, FileTools};
use crate::registry::{Arguments, RegisterError, Registry, ToolDefinition, ToolError, ToolResult};

const NAME: &str = "search";
/// The display title (MCP `title`), one of [`RESERVED_TOOL_TITLES`](crate::registry::RESERVED_TOOL_TITLES).
const TITLE: &str = "Search files";

/// Registers `search`; does nothing for a store that is not searchable.
pub(super) fn register(registry: &Registry, tools: &Arc<FileTools>) -> Result<(), RegisterError> {
    let Some(searchable) = tools.storage.searchable() else {
        return Ok(());
    };
    let description = format!(
        "Find files by a query. Returns {{\"paths\": [...]}}, the matching file paths, sorted; \
read one with read_file. Query syntax: {}",
        searchable.search_syntax()
    );
    let parameters = object(
        [("query", string("What to look for, in the syntax above."))],
        ["query"],
    );
    register_file_tool(
        registry,
        tools,
        ToolDefinition::new(NAME, description, parameters)
            .with_title(TITLE)
            .with_annotations(ToolAnnotations::read_only()),
        |tools, _ctx, args| async move { run(tools, args).await },
    )
}

async fn run(tools: Arc<FileTools>, args: Arguments) -> Result<ToolResult, ToolError> {
    let query = args.required_str("query")?.to_owned();
    blocking(move || {
        let Some(searchable) = tools.storage.searchable() else {
            return Err(ToolError::Failed {
                tool: NAME.to_owned(),
                message: "this store no longer supports search; use list_files instead".to_owned(),
            });
        };
        let mut paths = searchable
            .search(&query)
            .map_err(|err| storage_error(NAME, err))?;
        paths.retain(|path| tools.policy.visible(path));
        paths.sort();
        Ok(ToolResult::new(json!({ "paths": paths })))
    })
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::tools::testutil::{backend_tests, invalid_arguments, Backend};

    /// The memory store is searchable; osfs is not, so it has no search tool.
    async fn registered_only_for_searchable_stores(backend: Backend) {
        let h = backend.default_harness();
        assert_eq!(h.registry.has("search"), backend == Backend::Memory);
        if backend == Backend::Memory {
            let definition = h
                .registry
                .definitions()
                .into_iter()
                .find(|d| d.name == "search")
                .expect("search");
            let syntax = h.storage.searchable().expect("searchable").search_syntax();
            assert!(definition.description.ends_with(&syntax));
            assert_eq!(definition.parameters["required"], json!(["query"]));
        }
    }

    async fn finds_visible_paths(backend: Backend) {
        if backend != Backend::Memory {
            return;
        }
        let h = backend.harness(|options| {
            options.hide_hidden_paths = true;
            options.allowed_extensions = Some(vec![".md".into()]);
        });
        h.put("notes/b.md", "release notes");
        h.put("a.md", "Release plan");
        h.put(".secret.md", "release key");
        h.put("src/release.rs", "fn release() {}");
        h.put("c.md", "nothing here");
        assert_eq!(
            h.call("search", json!({"query": "release"})).await,
            Ok(json!({"paths": ["a.md", "notes/b.md"]}))
        );
        assert_eq!(
            h.call("search", json!({"query": "\"release notes\""}))
                .await,
            Ok(json!({"paths": ["notes/b.md"]}))
        );
        assert_eq!(
            h.call("search", json!({"query": "absent"})).await,
            Ok(json!({"paths": []}))
        );
        assert_eq!(
            invalid_arguments(h.call("search", json!({"query": "  "})).await),
            "invalid search query \"  \": it has no terms; give at least one word to look for"
        );
        assert_eq!(
            invalid_arguments(h.call("search", json!({})).await),
            "argument \"query\" is required"
        );
    }

    backend_tests!(registered_only_for_searchable_stores, finds_visible_paths);
}
