//! The `delete_file` tool.

use super::common::{changes_files, IDEMPOTENT};
use std::sync::Arc;

use serde_json::json;
use toolhost_sdk::schema::{object, string};

use super::common::{checked_path, storage_error};
use super::register_file_tool;
use super::{blocking, FileTools};
use crate::registry::{Arguments, RegisterError, Registry, ToolDefinition, ToolError, ToolResult};
use crate::vfs::StorageError;

const NAME: &str = "delete_file";
/// The display title (MCP `title`), one of [`RESERVED_TOOL_TITLES`](crate::registry::RESERVED_TOOL_TITLES).
const TITLE: &str = "Delete file";

const DESCRIPTION: &str = "Delete one file. Returns {\"path\", \"deleted\": true}. Fails when \
there is no file at the path (call list_files to see what exists) or when the path is a \
directory; it never deletes directories.";

/// Registers `delete_file`.
pub(super) fn register(registry: &Registry, tools: &Arc<FileTools>) -> Result<(), RegisterError> {
    let parameters = object(
        [(
            "path",
            string("Path of the file to delete, relative to the store root."),
        )],
        ["path"],
    );
    register_file_tool(
        registry,
        tools,
        ToolDefinition::new(NAME, DESCRIPTION, parameters)
            .with_title(TITLE)
            .with_annotations(changes_files(IDEMPOTENT)),
        |tools, ctx, args| async move {
            let path = super::common::named_path(&ctx, &args);
            super::common::recorded(&ctx, path, true, run(tools, args)).await
        },
    )
}

async fn run(tools: Arc<FileTools>, args: Arguments) -> Result<ToolResult, ToolError> {
    let path = checked_path(&tools.policy, &args, "path")?;
    blocking(move || {
        tools.storage.delete(&path).map_err(|err| match err {
            StorageError::NotFound { .. } => ToolError::Failed {
                tool: NAME.to_owned(),
                message: format!(
                    "there is no file at \"{path}\", so nothing was deleted; call list_files to see which files exist"
                ),
            },
            other => storage_error(NAME, other),
        })?;
        Ok(ToolResult::new(json!({ "path": path, "deleted": true })))
    })
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::tools::testutil::{backend_tests, failed, invalid_arguments, Backend};

    async fn deletes_one_file(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", "x");
        h.put("dir/b.md", "y");
        assert_eq!(
            h.call("delete_file", json!({"path": "dir/b.md"})).await,
            Ok(json!({"path": "dir/b.md", "deleted": true}))
        );
        assert_eq!(h.paths(), ["a.md"]);
    }

    async fn a_missing_file_is_an_error(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", "x");
        assert_eq!(
            failed(h.call("delete_file", json!({"path": "b.md"})).await),
            "there is no file at \"b.md\", so nothing was deleted; call list_files to see which files exist"
        );
        assert_eq!(h.paths(), ["a.md"]);
    }

    async fn a_directory_is_not_deleted(backend: Backend) {
        let h = backend.default_harness();
        h.put("dir/b.md", "y");
        assert_eq!(
            failed(h.call("delete_file", json!({"path": "dir"})).await),
            "\"dir\" is a directory, not a file; call list_files to see the files in it"
        );
        assert_eq!(h.paths(), ["dir/b.md"]);
    }

    async fn policy_refuses_before_the_store(backend: Backend) {
        let h = backend.harness(|options| {
            options.hide_hidden_paths = true;
            options.allowed_extensions = Some(vec![".md".into()]);
        });
        h.put(".env", "x");
        h.put("a.rs", "x");
        let message = invalid_arguments(h.call("delete_file", json!({"path": ".env"})).await);
        assert!(
            message.starts_with("argument \"path\" is \".env\", a hidden path"),
            "{message}"
        );
        let message = invalid_arguments(h.call("delete_file", json!({"path": "a.rs"})).await);
        assert!(message.contains("extension is not allowed"), "{message}");
        assert_eq!(h.paths(), [".env", "a.rs"]);
    }

    async fn read_only_has_no_delete(backend: Backend) {
        let h = backend.harness(|options| options.read_only = true);
        assert!(!h.registry.has("delete_file"));
    }

    backend_tests!(
        deletes_one_file,
        a_missing_file_is_an_error,
        a_directory_is_not_deleted,
        policy_refuses_before_the_store,
        read_only_has_no_delete,
    );
}
