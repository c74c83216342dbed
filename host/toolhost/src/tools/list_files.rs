//! The `list_files` tool: every file the policy lets the model see, with size and time.
//!
//! The store is walked as a stream ([`Storage::visit_files`], in path order) under the
//! [walk budget](super::walks): the entries are built as the walk goes, and once the
//! result's JSON would pass the call's result cap
//! ([`CallContext::result_cap`]) no more are kept; the walk goes on counting bytes only,
//! so the answer is the [`ToolError::ResultTooLarge`] it always was (with the exact
//! size), without the listing of a large tree held in memory to learn it. The walk stops
//! between two files once the call expires or is cancelled.

use crate::registry::ToolAnnotations;
use std::ops::ControlFlow;
use std::sync::Arc;

use crate::vfs::{FileEntry, FilePolicy, Storage, StorageError};

use serde_json::{json, Value};
use toolhost_sdk::schema::object;

use super::common::{rfc3339, storage_error};
use super::register_file_tool;
use super::{stopped, walk, FileTools, VfsToolOptions};
use crate::registry::encoded_len;
use crate::registry::{
    CallContext, RegisterError, Registry, ToolDefinition, ToolError, ToolResult,
};

const NAME: &str = "list_files";
/// The display title (MCP `title`), one of [`RESERVED_TOOL_TITLES`](crate::registry::RESERVED_TOOL_TITLES).
const TITLE: &str = "List files";

const DESCRIPTION: &str = "List every file in the store. Returns {\"files\": [{\"path\", \
\"size\", \"updated_at\"}]}, sorted by path; size is in bytes, updated_at is the last change in \
RFC 3339 UTC (\"2026-12-02T16:14:54Z\"). Paths are relative to the store root and are what the \
other file tools take. Takes no arguments.";

/// `{"files":[` and `]}`: the bytes of the result around its entries.
const FRAME_BYTES: usize = r#"{"files":[]}"#.len();

/// Registers `list_files`.
pub(super) fn register(registry: &Registry, tools: &Arc<FileTools>) -> Result<(), RegisterError> {
    register_file_tool(
        registry,
        tools,
        ToolDefinition::new(NAME, DESCRIPTION, object::<&str, &str>([], []))
            .with_title(TITLE)
            .with_annotations(ToolAnnotations::read_only()),
        |tools, ctx, _args| async move {
            let budget = Arc::clone(&tools.walks);
            walk(&budget, NAME, ctx, move |ctx| list(&tools, ctx)).await
        },
    )
}

fn list(tools: &FileTools, ctx: &CallContext) -> Result<ToolResult, ToolError> {
    let cap = ctx.result_cap();
    let mut files: Vec<Value> = Vec::new();
    let mut size = FRAME_BYTES;
    let mut count = 0usize;
    let mut over = false;
    let mut expired = false;
    let mut sorted = true;
    let mut last = String::new();
    visit_visible(
        &*tools.storage,
        &tools.policy,
        &|| ctx.expired(),
        &mut expired,
        &mut |entry| {
            sorted &= count == 0 || last < entry.path;
            last.clone_from(&entry.path);
            let value = json!({
                "path": entry.path,
                "size": entry.size,
                "updated_at": rfc3339(entry.updated_at),
            });
            size += usize::from(count > 0) + encoded_len(&value);
            count += 1;
            if over {
                // Past the cap: the answer is the size, so the entry is counted only.
            } else if cap.is_some_and(|cap| size > cap) {
                over = true;
                files = Vec::new();
            } else {
                files.push(value);
            }
            ControlFlow::Continue(())
        },
    )
    .map_err(|err| storage_error(NAME, err))?;
    if expired {
        return Err(stopped(ctx, NAME));
    }
    if let (true, Some(cap)) = (over, cap) {
        return Err(ToolError::ResultTooLarge {
            tool: NAME.to_owned(),
            size,
            cap,
        });
    }
    // The storage contract says sorted; sort anyway so the result never depends on a backend.
    if !sorted {
        files.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    }
    Ok(ToolResult::new(json!({ "files": files })))
}

/// The one walk of what `list_files` shows: every file of `storage` that `policy` makes
/// visible, in path order, until `visit` breaks. `stop` is asked before each file (visible
/// or not); when it says yes the walk ends and `expired` is set.
fn visit_visible(
    storage: &dyn Storage,
    policy: &FilePolicy,
    stop: &dyn Fn() -> bool,
    expired: &mut bool,
    visit: &mut dyn FnMut(FileEntry) -> ControlFlow<()>,
) -> Result<(), StorageError> {
    storage.visit_files(&mut |entry| {
        if stop() {
            *expired = true;
            return ControlFlow::Break(());
        }
        if !policy.visible(&entry.path) {
            return ControlFlow::Continue(());
        }
        visit(entry)
    })
}

/// Walks the files `list_files` would show under `options` (every stored file its
/// [policy](VfsToolOptions::policy) makes visible: hidden paths and other extensions
/// left out), in path order, calling `visit` with `state` and each file until it
/// breaks; gives the state back. For a front end that offers the same files another way
/// (MCP resources): it sees exactly what the model sees through the tools.
///
/// The walk is one of the tools' walks: it takes a walker of the options'
/// [walk budget](super::walks) first (`caller` names it in the busy error), runs on the
/// blocking pool, and stops between two files when this future is dropped. Nothing of
/// the listing is held but what `visit` keeps in `state`.
///
/// ```
/// use std::ops::ControlFlow;
/// use std::sync::Arc;
/// use toolhost::tools::{list_files::visit_listed_files, VfsToolOptions};
/// use toolhost::vfs::{MemoryStorage, Storage};
///
/// let storage = Arc::new(MemoryStorage::new());
/// for path in ["a.md", ".env", "b/c.txt"] {
///     storage.write(path, b"x", "")?;
/// }
/// let options = VfsToolOptions::builder(storage).hide_hidden_paths(true).build();
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// let paths = visit_listed_files(&options, "example", Vec::new(), |paths: &mut Vec<String>, file| {
///     paths.push(file.path);
///     ControlFlow::Continue(())
/// })
/// .await?;
/// assert_eq!(paths, ["a.md", "b/c.txt"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`ToolError::LimitExceeded`] when the walk budget has no walker for it (see
/// [`WalkBudget`](super::WalkBudget)), and the storage's errors as `list_files` gives
/// them (for `caller`).
pub async fn visit_listed_files<S, F>(
    options: &VfsToolOptions,
    caller: &str,
    state: S,
    mut visit: F,
) -> Result<S, ToolError>
where
    S: Send + 'static,
    F: FnMut(&mut S, FileEntry) -> ControlFlow<()> + Send + 'static,
{
    let storage = Arc::clone(&options.storage);
    let policy = options.policy();
    let name = caller.to_owned();
    walk(
        &options.walk_budget,
        caller,
        CallContext::new(),
        move |ctx| {
            let mut state = state;
            let mut expired = false;
            visit_visible(
                &*storage,
                &policy,
                &|| ctx.expired(),
                &mut expired,
                &mut |entry| visit(&mut state, entry),
            )
            .map_err(|err| storage_error(&name, err))?;
            if expired {
                return Err(stopped(ctx, &name));
            }
            Ok(state)
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use serde_json::json;

    use crate::tools::testutil::{backend_tests, Backend};

    async fn sorted_with_size_and_time(backend: Backend) {
        let h = backend.default_harness();
        let before = SystemTime::now() - Duration::from_secs(2);
        h.put("b.md", "bee");
        h.put("a/z.txt", "");
        h.put("a.md", "hello");
        let result = h.call("list_files", json!({})).await.expect("list");
        let files = result["files"].as_array().expect("files");
        let shape: Vec<_> = files
            .iter()
            .map(|f| (f["path"].as_str().unwrap(), f["size"].as_u64().unwrap()))
            .collect();
        assert_eq!(shape, [("a.md", 5), ("a/z.txt", 0), ("b.md", 3)]);
        for file in files {
            let object = file.as_object().expect("object");
            assert_eq!(object.len(), 3, "{file}");
            let stamp = file["updated_at"].as_str().expect("updated_at");
            assert_eq!(stamp.len(), 20, "{stamp}");
            assert!(
                stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
                "{stamp}"
            );
            assert!(
                stamp >= crate::tools::common::rfc3339(before).as_str(),
                "{stamp}"
            );
        }
        // Arguments are ignored; an empty argument text counts as {}.
        assert_eq!(h.call_raw("list_files", "").await.expect("list"), result);
    }

    async fn empty_store(backend: Backend) {
        let h = backend.default_harness();
        assert_eq!(
            h.call("list_files", json!({})).await.expect("list"),
            json!({"files": []})
        );
    }

    async fn hidden_and_disallowed_files_disappear(backend: Backend) {
        let h = backend.harness(|options| {
            options.hide_hidden_paths = true;
            options.allowed_extensions = Some(vec![".md".into(), "txt".into()]);
        });
        for path in [
            ".env",
            "_drafts/a.md",
            "a.rs",
            "docs/.cache/x.md",
            "A.MD",
            "b.txt",
            "c",
        ] {
            h.put(path, "x");
        }
        let result = h.call("list_files", json!({})).await.expect("list");
        let paths: Vec<_> = result["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|f| f["path"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(paths, ["A.MD", "b.txt"]);
    }

    /// Past the result cap the walk keeps no entries, yet the answer is the same
    /// ResultTooLarge, with the exact size of the result it would have been.
    async fn over_the_result_cap_is_refused_with_the_exact_size(backend: Backend) {
        use crate::registry::{CallContext, Environment, Registry, ToolCall, ToolError};
        use crate::tools::{register_vfs_tools, VfsToolOptions};

        let h = backend.default_harness();
        for i in 0..40 {
            h.put(&format!("d{}/f\"{i:02}\".md", i % 3), "x".repeat(i));
        }
        let full = h.call("list_files", json!({})).await.expect("list");
        let size = serde_json::to_string(&full).unwrap().len();
        for (cap, fits) in [(size, true), (size - 1, false), (200, false)] {
            let registry = Registry::new().with_result_cap(cap);
            register_vfs_tools(
                &registry,
                VfsToolOptions::new(std::sync::Arc::clone(&h.storage)),
            )
            .unwrap();
            let outcome = registry
                .dispatch(
                    &CallContext::new(),
                    &ToolCall::new("list_files", "{}"),
                    &Environment::default(),
                )
                .await
                .map(|result| result.content);
            if fits {
                assert_eq!(outcome, Ok(full.clone()));
            } else {
                assert_eq!(
                    outcome,
                    Err(ToolError::ResultTooLarge {
                        tool: "list_files".into(),
                        size,
                        cap
                    })
                );
            }
        }
    }

    backend_tests!(
        over_the_result_cap_is_refused_with_the_exact_size,
        sorted_with_size_and_time,
        empty_store,
        hidden_and_disallowed_files_disappear
    );
}
