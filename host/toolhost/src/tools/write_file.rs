//! The `write_file` tool: create or replace a whole file.

use super::common::{changes_files, IDEMPOTENT};
use std::sync::Arc;

use serde_json::json;
use toolhost_sdk::schema::{object, string};

use super::common::{checked_path, policy_error, storage_error};
use super::register_file_tool;
use super::{blocking, FileTools};
use crate::registry::{Arguments, RegisterError, Registry, ToolDefinition, ToolError, ToolResult};
use crate::vfs::content_type_for;

const NAME: &str = "write_file";
/// The display title (MCP `title`), one of [`RESERVED_TOOL_TITLES`](crate::registry::RESERVED_TOOL_TITLES).
const TITLE: &str = "Write file";

/// Registers `write_file`.
pub(super) fn register(registry: &Registry, tools: &Arc<FileTools>) -> Result<(), RegisterError> {
    let description = format!(
        "Create a file, or replace one, with the given content (the whole file; missing \
directories are created). Returns {{\"path\", \"size\", \"created\"}}: created is true for a \
new file and false when an existing one was replaced. A file may hold at most {} bytes; a \
larger content is refused and the old file stays as it was. The content type defaults from \
the extension (text/markdown for an unknown one). For a small change to a large file, prefer \
an edit tool when one is offered.",
        tools.policy.max_file_bytes
    );
    let parameters = object(
        [
            (
                "path",
                string("Path of the file, relative to the store root, e.g. \"notes/todo.md\"."),
            ),
            ("content", string("The file's full new content.")),
            (
                "content_type",
                string("MIME type, e.g. \"text/markdown\". Default: from the extension."),
            ),
        ],
        ["path", "content"],
    );
    register_file_tool(
        registry,
        tools,
        ToolDefinition::new(NAME, description, parameters)
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
    let content = args.required_str("content")?.to_owned();
    let content_type = match args.optional_str("content_type")? {
        Some(given) if !given.trim().is_empty() => given.trim().to_owned(),
        _ => content_type_for(&path).to_owned(),
    };
    let size = content.len() as u64;
    tools
        .policy
        .check_size(&path, size)
        .map_err(|err| policy_error(NAME, err))?;
    blocking(move || {
        let created = !tools
            .storage
            .exists(&path)
            .map_err(|err| storage_error(NAME, err))?;
        tools
            .storage
            .write(&path, content.as_bytes(), &content_type)
            .map_err(|err| storage_error(NAME, err))?;
        Ok(ToolResult::new(json!({
            "path": path,
            "size": size,
            "created": created,
        })))
    })
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::registry::ToolError;
    use crate::tools::testutil::{backend_tests, failed, invalid_arguments, Backend};

    async fn creates_then_replaces(backend: Backend) {
        let h = backend.default_harness();
        assert_eq!(
            h.call(
                "write_file",
                json!({"path": "notes/a.md", "content": "héllo\n"})
            )
            .await,
            Ok(json!({"path": "notes/a.md", "size": 7, "created": true}))
        );
        assert_eq!(h.get("notes/a.md").as_deref(), Some("héllo\n".as_bytes()));
        assert_eq!(
            h.call("write_file", json!({"path": "notes/a.md", "content": ""}))
                .await,
            Ok(json!({"path": "notes/a.md", "size": 0, "created": false}))
        );
        assert_eq!(h.get("notes/a.md").as_deref(), Some(&b""[..]));
    }

    async fn content_type_from_argument_or_extension(backend: Backend) {
        let h = backend.default_harness();
        let call = |args| h.call("write_file", args);
        call(json!({"path": "a.json", "content": "{}"}))
            .await
            .expect("write");
        call(json!({"path": "README", "content": "x"}))
            .await
            .expect("write");
        let stored = |path| h.storage.read(path).expect("read").content_type;
        assert_eq!(stored("a.json"), "application/json");
        assert_eq!(stored("README"), "text/markdown");
        call(json!({"path": "data", "content": "a,b", "content_type": "text/csv"}))
            .await
            .expect("write");
        // osfs derives the type from the extension and does not store the argument.
        let want = match backend {
            Backend::Memory => "text/csv",
            Backend::Os => "text/markdown",
        };
        assert_eq!(stored("data"), want);
    }

    async fn over_the_size_limit_leaves_the_old_file(backend: Backend) {
        let h = backend.harness(|options| options.max_file_bytes = 10);
        h.put("a.md", "old\x00bytes\r\n");
        let exact = h
            .call(
                "write_file",
                json!({"path": "b.md", "content": "0123456789"}),
            )
            .await;
        assert_eq!(
            exact,
            Ok(json!({"path": "b.md", "size": 10, "created": true}))
        );
        let err = h
            .call(
                "write_file",
                json!({"path": "a.md", "content": "01234567890"}),
            )
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ToolError::FileTooLarge {
                tool: "write_file".into(),
                path: "a.md".into(),
                size: 11,
                limit: 10
            }
        );
        assert_eq!(h.get("a.md").as_deref(), Some(&b"old\x00bytes\r\n"[..]));
        // A new file over the limit is not created either.
        let err = h
            .call(
                "write_file",
                json!({"path": "c.md", "content": "x".repeat(11)}),
            )
            .await;
        assert!(matches!(err, Err(ToolError::FileTooLarge { .. })));
        assert_eq!(h.paths(), ["a.md", "b.md"]);
    }

    async fn arguments_and_policy(backend: Backend) {
        let h = backend.harness(|options| {
            options.hide_hidden_paths = true;
            options.allowed_extensions = Some(vec![".md".into()]);
        });
        let cases = [
            (json!({"path": "a.md"}), "argument \"content\" is required"),
            (
                json!({"path": "a.md", "content": 3}),
                "argument \"content\" must be a string, got integer",
            ),
            (
                json!({"path": "a.md", "content": "", "content_type": false}),
                "argument \"content_type\" must be a string, got boolean",
            ),
            (
                json!({"path": ".env", "content": "x"}),
                "argument \"path\" is \".env\", a hidden path (a segment starts with _ or .); hidden paths are not available here, use another path",
            ),
            (
                json!({"path": "a.rs", "content": "x"}),
                "argument \"path\" is \"a.rs\", whose extension is not allowed here; use a path ending in one of: .md",
            ),
        ];
        for (args, message) in cases {
            assert_eq!(invalid_arguments(h.call("write_file", args).await), message);
        }
        assert!(h.paths().is_empty());
    }

    async fn a_directory_cannot_be_replaced(backend: Backend) {
        let h = backend.default_harness();
        h.put("dir/a.md", "x");
        assert_eq!(
            failed(
                h.call("write_file", json!({"path": "dir", "content": "y"}))
                    .await
            ),
            "\"dir\" is a directory, not a file; call list_files to see the files in it"
        );
    }

    async fn read_only_has_no_write(backend: Backend) {
        let h = backend.harness(|options| options.read_only = true);
        for tool in [
            "write_file",
            "delete_file",
            "edit_file",
            "multi_edit",
            "move_file",
        ] {
            assert!(!h.registry.has(tool), "{tool}");
        }
        assert!(h.registry.has("read_file") && h.registry.has("list_files"));
    }

    backend_tests!(
        creates_then_replaces,
        content_type_from_argument_or_extension,
        over_the_size_limit_leaves_the_old_file,
        arguments_and_policy,
        a_directory_cannot_be_replaced,
        read_only_has_no_write,
    );
}
