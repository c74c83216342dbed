//! The `edit_file` tool: replace an exact piece of text in a file; and `apply_edit`, the
//! one replacement rule `multi_edit` shares.
//!
//! Arguments: `path`, `old_string`, `new_string` (required), `replace_all` (default false).
//! Result: `{"path": "a.md", "replacements": 1, "size": 120}`, `size` being the new file
//! size in bytes.
//!
//! Rules:
//! - `old_string` must be non-empty and differ from `new_string` (else InvalidArguments).
//! - Without `replace_all`, `old_string` must start at exactly one position. Overlapping
//!   starts count: `aa` in `aaa` starts at two positions, which is ambiguous.
//! - With `replace_all`, every occurrence is replaced, left to right and non-overlapping
//!   (`aa` in `aaa` is one replacement), and `replacements` says how many.
//! - The edited file must fit `max_file_bytes`; the size is computed before the new
//!   content is built, and a file that would be too large is left as it was
//!   ([`ToolError::FileTooLarge`]). A file already over the cap is not read at all (the
//!   same error, naming its size), so a huge file costs no memory.
//! - The file is matched as bytes, so files that are not UTF-8 can be edited too, and
//!   `\r\n` line ends must appear in `old_string` as they are in the file.
//! - The read and the write are two storage calls, and the write happens only if the file
//!   still holds what was read
//!   ([`Storage::write_if_unchanged`](crate::vfs::Storage::write_if_unchanged)): when
//!   another writer changed it in between, its change is kept and the call fails with
//!   "... changed while it was being edited ...; read the file again and redo the edit".

use super::common::{changes_files, NOT_IDEMPOTENT};
use std::sync::Arc;

use memchr::memmem;
use serde_json::json;
use toolhost_sdk::schema::{boolean, object, string};

use super::common::{checked_path, storage_error};
use super::register_file_tool;
use super::{blocking, FileTools};
use crate::registry::{Arguments, RegisterError, Registry, ToolDefinition, ToolError, ToolResult};

const NAME: &str = "edit_file";
/// The display title (MCP `title`), one of [`RESERVED_TOOL_TITLES`](crate::registry::RESERVED_TOOL_TITLES).
const TITLE: &str = "Edit file";

const DESCRIPTION: &str = "Replace exact text in an existing file. old_string is the text as \
it is in the file now, WITHOUT the line-number prefix (the number and tab) that read_file puts \
before each line; keep the indentation and line breaks exactly. It must occur exactly once in \
the file: include a few surrounding lines to make it unique, or set replace_all to true to \
replace every occurrence (e.g. to rename something). new_string replaces it and must differ \
from old_string; an empty new_string deletes the text. Read the file with read_file first. \
To create a file use write_file; for several changes to one file use multi_edit. \
Returns {\"path\", \"replacements\", \"size\"}.";

/// The schema properties of one edit, shared by edit_file and multi_edit's `edits` items.
pub(super) fn edit_properties() -> [(&'static str, serde_json::Value); 3] {
    [
        (
            "old_string",
            string("Exact text to replace, without read_file's line-number prefixes."),
        ),
        (
            "new_string",
            string("Text to put in its place (must differ; \"\" deletes)."),
        ),
        (
            "replace_all",
            boolean("Replace every occurrence instead of exactly one (default false)."),
        ),
    ]
}

/// Registers `edit_file`.
pub(super) fn register(registry: &Registry, tools: &Arc<FileTools>) -> Result<(), RegisterError> {
    let mut properties = vec![("path", string("File to edit, relative to the store root."))];
    properties.extend(edit_properties());
    let parameters = object(properties, ["path", "old_string", "new_string"]);
    register_file_tool(
        registry,
        tools,
        ToolDefinition::new(NAME, DESCRIPTION, parameters)
            .with_title(TITLE)
            .with_annotations(changes_files(NOT_IDEMPOTENT)),
        |tools, ctx, args| async move {
            let path = super::common::named_path(&ctx, &args);
            super::common::recorded(&ctx, path, true, run(tools, args)).await
        },
    )
}

async fn run(tools: Arc<FileTools>, args: Arguments) -> Result<ToolResult, ToolError> {
    let path = checked_path(&tools.policy, &args, "path")?;
    let edit = Edit {
        old: args.required_str("old_string")?.to_owned(),
        new: args.required_str("new_string")?.to_owned(),
        replace_all: args.optional_bool("replace_all")?.unwrap_or(false),
    };
    edit.check()
        .map_err(|err| err.into_tool_error(NAME, &path, None))?;
    blocking(move || {
        let limit = tools.policy.max_file_bytes;
        let file = tools
            .storage
            .read_capped(&path, limit)
            .map_err(|err| storage_error(NAME, err))?;
        let (content, replacements) = apply_edit(&file.content, &edit, limit)
            .map_err(|err| err.into_tool_error(NAME, &path, None))?;
        tools
            .storage
            .write_if_unchanged(&path, &file.content, &content, &file.content_type)
            .map_err(|err| storage_error(NAME, err))?;
        Ok(ToolResult::new(json!({
            "path": path,
            "replacements": replacements,
            "size": content.len(),
        })))
    })
    .await
}

/// One replacement: edit_file's arguments, or one element of multi_edit's `edits`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Edit {
    /// The exact text to find.
    pub(super) old: String,
    /// The text to put in its place.
    pub(super) new: String,
    /// Replace every occurrence instead of exactly one.
    pub(super) replace_all: bool,
}

/// Why an [`Edit`] cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum EditError {
    /// `old_string` is empty.
    EmptyOld,
    /// `new_string` equals `old_string`.
    Unchanged,
    /// `old_string` does not occur. `crlf` is set when it would occur with its `\n` line
    /// breaks written as `\r\n`.
    NotFound { crlf: bool },
    /// `old_string` starts at `count` positions (overlapping starts included) and
    /// `replace_all` is off.
    Ambiguous { count: usize },
    /// The edited file would be `size` bytes, over `limit`.
    TooLarge { size: u64, limit: u64 },
}

impl Edit {
    /// The checks that need no file content: a non-empty `old`, different from `new`.
    ///
    /// # Errors
    /// [`EditError::EmptyOld`] or [`EditError::Unchanged`].
    pub(super) fn check(&self) -> Result<(), EditError> {
        if self.old.is_empty() {
            Err(EditError::EmptyOld)
        } else if self.old == self.new {
            Err(EditError::Unchanged)
        } else {
            Ok(())
        }
    }
}

/// Applies `edit` to `content` and returns the new content and the number of
/// replacements. The new size is checked against `limit` before the content is built.
///
/// # Errors
/// Every [`EditError`]; `content` is never changed.
pub(super) fn apply_edit(
    content: &[u8],
    edit: &Edit,
    limit: u64,
) -> Result<(Vec<u8>, usize), EditError> {
    edit.check()?;
    let old = edit.old.as_bytes();
    let new = edit.new.as_bytes();
    let finder = memmem::Finder::new(old);
    let positions: Vec<usize> = if edit.replace_all {
        finder.find_iter(content).collect()
    } else {
        let starts = overlapping_starts(&finder, content);
        if starts.len() > 1 {
            return Err(EditError::Ambiguous {
                count: starts.len(),
            });
        }
        starts
    };
    if positions.is_empty() {
        let crlf = edit.old.contains('\n')
            && memmem::find(content, edit.old.replace('\n', "\r\n").as_bytes()).is_some();
        return Err(EditError::NotFound { crlf });
    }
    let count = positions.len() as u64;
    let size = content.len() as u64 - count * old.len() as u64 + count * new.len() as u64;
    if size > limit {
        return Err(EditError::TooLarge { size, limit });
    }
    let mut out = Vec::with_capacity(usize::try_from(size).unwrap_or(content.len()));
    let mut at = 0;
    for &position in &positions {
        out.extend_from_slice(&content[at..position]);
        out.extend_from_slice(new);
        at = position + old.len();
    }
    out.extend_from_slice(&content[at..]);
    Ok((out, positions.len()))
}

/// Every position where the needle starts, overlapping ones included (`aa` in `aaa`: 0, 1).
fn overlapping_starts(finder: &memmem::Finder<'_>, content: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut from = 0;
    while let Some(found) = content.get(from..).and_then(|rest| finder.find(rest)) {
        starts.push(from + found);
        from += found + 1;
    }
    starts
}

impl EditError {
    /// The tool error for this failure on `path`. `index` is the position in multi_edit's
    /// `edits` (`None` for edit_file): it prefixes argument names (`edits[2].old_string`)
    /// and messages (`edits[2]: old_string not found ...`).
    pub(super) fn into_tool_error(self, tool: &str, path: &str, index: Option<usize>) -> ToolError {
        let field = |name: &str| match index {
            Some(i) => format!("edits[{i}].{name}"),
            None => name.to_owned(),
        };
        let prefix = index.map(|i| format!("edits[{i}]: ")).unwrap_or_default();
        let earlier = if index.is_some_and(|i| i > 0) {
            " (the edits apply in order, so it must match the text as the edits before it left it)"
        } else {
            ""
        };
        let invalid = |message: String| ToolError::InvalidArguments {
            tool: tool.to_owned(),
            message,
        };
        let failed = |message: String| ToolError::Failed {
            tool: tool.to_owned(),
            message,
        };
        match self {
            Self::EmptyOld => invalid(format!(
                "argument \"{}\" is empty; give the exact text to replace (to create a file use write_file)",
                field("old_string")
            )),
            Self::Unchanged => invalid(format!(
                "argument \"{}\" is the same as \"{}\", so nothing would change; put the new text in \"{}\"",
                field("new_string"),
                field("old_string"),
                field("new_string")
            )),
            Self::NotFound { crlf: true } => failed(format!(
                "{prefix}old_string not found in \"{path}\"{earlier}; the file has Windows line ends: write each line break in old_string and new_string as \\r\\n"
            )),
            Self::NotFound { crlf: false } => failed(format!(
                "{prefix}old_string not found in \"{path}\"{earlier}; read the file with read_file and copy the text exactly, without the line-number prefix and tab read_file puts before each line"
            )),
            Self::Ambiguous { count } => failed(format!(
                "{prefix}old_string occurs at {count} positions in \"{path}\"; include more surrounding text to make it unique, or set replace_all to true to replace every occurrence"
            )),
            Self::TooLarge { size, limit } => ToolError::FileTooLarge {
                tool: tool.to_owned(),
                path: path.to_owned(),
                size,
                limit,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::testutil::{backend_tests, failed, invalid_arguments, Backend};

    fn edit(old: &str, new: &str, replace_all: bool) -> Edit {
        Edit {
            old: old.into(),
            new: new.into(),
            replace_all,
        }
    }

    #[test]
    fn overlapping_starts_are_ambiguous() {
        assert_eq!(
            apply_edit(b"aaa", &edit("aa", "b", false), 100),
            Err(EditError::Ambiguous { count: 2 })
        );
        assert_eq!(
            apply_edit(b"aaa", &edit("aa", "b", true), 100),
            Ok((b"ba".to_vec(), 1))
        );
        assert_eq!(
            apply_edit(b"xaay", &edit("aa", "b", false), 100),
            Ok((b"xby".to_vec(), 1))
        );
    }

    #[test]
    fn size_is_checked_before_the_content_is_built() {
        assert_eq!(
            apply_edit(b"abc", &edit("b", "1234", false), 5),
            Err(EditError::TooLarge { size: 6, limit: 5 })
        );
        assert_eq!(
            apply_edit(b"abc", &edit("b", "123", false), 5),
            Ok((b"a123c".to_vec(), 1))
        );
    }

    #[test]
    fn crlf_files_get_a_hint() {
        assert_eq!(
            apply_edit(b"a\r\nb\r\n", &edit("a\nb", "c", false), 100),
            Err(EditError::NotFound { crlf: true })
        );
        assert_eq!(
            apply_edit(b"a\r\nb\r\n", &edit("a\r\nb", "c", false), 100),
            Ok((b"c\r\n".to_vec(), 1))
        );
    }

    async fn single_replacement(backend: Backend) {
        let h = backend.default_harness();
        h.put("notes/a.md", "one\ntwo\nthree\n");
        let result = h
            .call(
                "edit_file",
                json!({"path": "notes/a.md", "old_string": "two", "new_string": "2"}),
            )
            .await
            .unwrap();
        assert_eq!(
            result,
            json!({"path": "notes/a.md", "replacements": 1, "size": 12})
        );
        assert_eq!(h.get("notes/a.md").unwrap(), b"one\n2\nthree\n");
    }

    async fn overlapping_match_is_ambiguous(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", "aaa");
        let message = failed(
            h.call(
                "edit_file",
                json!({"path": "a.md", "old_string": "aa", "new_string": "b"}),
            )
            .await,
        );
        assert_eq!(
            message,
            "old_string occurs at 2 positions in \"a.md\"; include more surrounding text to make it unique, or set replace_all to true to replace every occurrence"
        );
        assert_eq!(h.get("a.md").unwrap(), b"aaa");
    }

    async fn not_found_suggests_read_file(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", "alpha\n");
        let message = failed(
            h.call(
                "edit_file",
                json!({"path": "a.md", "old_string": "     1\talpha", "new_string": "beta"}),
            )
            .await,
        );
        assert_eq!(
            message,
            "old_string not found in \"a.md\"; read the file with read_file and copy the text exactly, without the line-number prefix and tab read_file puts before each line"
        );
        assert_eq!(h.get("a.md").unwrap(), b"alpha\n");
    }

    async fn same_and_empty_strings_are_refused(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", "alpha\n");
        let message = invalid_arguments(
            h.call(
                "edit_file",
                json!({"path": "a.md", "old_string": "alpha", "new_string": "alpha"}),
            )
            .await,
        );
        assert_eq!(
            message,
            "argument \"new_string\" is the same as \"old_string\", so nothing would change; put the new text in \"new_string\""
        );
        let message = invalid_arguments(
            h.call(
                "edit_file",
                json!({"path": "a.md", "old_string": "", "new_string": "x"}),
            )
            .await,
        );
        assert_eq!(
            message,
            "argument \"old_string\" is empty; give the exact text to replace (to create a file use write_file)"
        );
        let message = invalid_arguments(
            h.call("edit_file", json!({"path": "a.md", "old_string": "alpha"}))
                .await,
        );
        assert_eq!(message, "argument \"new_string\" is required");
        assert_eq!(h.get("a.md").unwrap(), b"alpha\n");
    }

    async fn replace_all_counts(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", "x = 1; x = 2; xx");
        let result = h
            .call(
                "edit_file",
                json!({"path": "a.md", "old_string": "x", "new_string": "yy", "replace_all": true}),
            )
            .await
            .unwrap();
        assert_eq!(
            result,
            json!({"path": "a.md", "replacements": 4, "size": 20})
        );
        assert_eq!(h.get("a.md").unwrap(), b"yy = 1; yy = 2; yyyy");
    }

    async fn delete_with_empty_new_string(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", "keep drop keep");
        let result = h
            .call(
                "edit_file",
                json!({"path": "a.md", "old_string": " drop", "new_string": ""}),
            )
            .await
            .unwrap();
        assert_eq!(result["size"], 9);
        assert_eq!(h.get("a.md").unwrap(), b"keep keep");
    }

    async fn too_large_leaves_file_intact(backend: Backend) {
        let h = backend.harness(|options| options.max_file_bytes = 10);
        h.put("a.md", "0123456789");
        let err = h
            .call(
                "edit_file",
                json!({"path": "a.md", "old_string": "5", "new_string": "55"}),
            )
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ToolError::FileTooLarge {
                tool: "edit_file".into(),
                path: "a.md".into(),
                size: 11,
                limit: 10
            }
        );
        assert_eq!(h.get("a.md").unwrap(), b"0123456789");
    }

    async fn missing_file_and_bad_paths(backend: Backend) {
        let h = backend.harness(|options| options.hide_hidden_paths = true);
        let message = failed(
            h.call(
                "edit_file",
                json!({"path": "nope.md", "old_string": "a", "new_string": "b"}),
            )
            .await,
        );
        assert_eq!(
            message,
            "no file at \"nope.md\"; call list_files to see what exists"
        );
        let message = invalid_arguments(
            h.call(
                "edit_file",
                json!({"path": "../x.md", "old_string": "a", "new_string": "b"}),
            )
            .await,
        );
        assert!(message.starts_with("argument \"path\" contains a \"..\" segment"));
        let message = invalid_arguments(
            h.call(
                "edit_file",
                json!({"path": ".env", "old_string": "a", "new_string": "b"}),
            )
            .await,
        );
        assert!(message.starts_with("argument \"path\" is \".env\", a hidden path"));
    }

    /// A store where "another process" appends to a file right after its first read: the
    /// edit tools' read and write are two storage calls, and the append lands between them.
    struct AppendsAfterRead {
        inner: Arc<dyn crate::vfs::Storage>,
        /// The osfs root, to append the way another process would; `None` on memory.
        root: Option<std::path::PathBuf>,
        appended: std::sync::atomic::AtomicBool,
    }

    /// What the other writer appends.
    const APPENDED: &[u8] = b"appended by another writer\n";

    impl AppendsAfterRead {
        fn append(&self, path: &str) {
            match &self.root {
                Some(root) => {
                    use std::io::Write;
                    let mut file = std::fs::OpenOptions::new()
                        .append(true)
                        .open(root.join(path))
                        .expect("open for append");
                    file.write_all(APPENDED).expect("append");
                }
                None => {
                    let mut content = self.inner.read(path).expect("read").content;
                    content.extend_from_slice(APPENDED);
                    self.inner.write(path, &content, "").expect("write");
                }
            }
        }
    }

    impl crate::vfs::Storage for AppendsAfterRead {
        fn read(&self, path: &str) -> Result<crate::vfs::FileContent, crate::vfs::StorageError> {
            let file = self.inner.read(path)?;
            if !self
                .appended
                .swap(true, std::sync::atomic::Ordering::SeqCst)
            {
                self.append(path);
            }
            Ok(file)
        }
        fn write(
            &self,
            path: &str,
            content: &[u8],
            content_type: &str,
        ) -> Result<(), crate::vfs::StorageError> {
            self.inner.write(path, content, content_type)
        }
        /// The wrapped store's own check: the one under test.
        fn write_if_unchanged(
            &self,
            path: &str,
            expected: &[u8],
            content: &[u8],
            content_type: &str,
        ) -> Result<(), crate::vfs::StorageError> {
            self.inner
                .write_if_unchanged(path, expected, content, content_type)
        }
        fn delete(&self, path: &str) -> Result<(), crate::vfs::StorageError> {
            self.inner.delete(path)
        }
        fn list(&self) -> Result<Vec<crate::vfs::FileEntry>, crate::vfs::StorageError> {
            self.inner.list()
        }
    }

    async fn a_concurrent_append_is_not_lost(backend: Backend) {
        let calls = [
            (
                "edit_file",
                json!({"path": "a.md", "old_string": "two", "new_string": "2"}),
            ),
            (
                "multi_edit",
                json!({"path": "a.md", "edits": [{"old_string": "two", "new_string": "2"}]}),
            ),
        ];
        for (tool, args) in calls {
            let h = backend.default_harness();
            h.put("a.md", "one\ntwo\n");
            let storage = Arc::new(AppendsAfterRead {
                inner: Arc::clone(&h.storage),
                root: h.dir.as_ref().map(|dir| dir.path().to_owned()),
                appended: false.into(),
            });
            let registry = crate::registry::Registry::new();
            crate::tools::register_vfs_tools(&registry, crate::tools::VfsToolOptions::new(storage))
                .expect("register");
            let result = registry
                .dispatch(
                    &crate::registry::CallContext::new(),
                    &crate::registry::ToolCall::new(tool, args.to_string()),
                    &crate::registry::Environment::default(),
                )
                .await
                .map(|result| result.content);
            assert_eq!(
                failed(result),
                "\"a.md\" changed while it was being edited (another writer changed or deleted it after it was read), so nothing was written and the other change is kept; read the file again and redo the edit",
                "{tool}"
            );
            let mut want = b"one\ntwo\n".to_vec();
            want.extend_from_slice(APPENDED);
            assert_eq!(h.get("a.md").unwrap(), want, "{tool}");
        }
    }

    backend_tests!(
        a_concurrent_append_is_not_lost,
        single_replacement,
        overlapping_match_is_ambiguous,
        not_found_suggests_read_file,
        same_and_empty_strings_are_refused,
        replace_all_counts,
        delete_with_empty_new_string,
        too_large_leaves_file_intact,
        missing_file_and_bad_paths,
    );
}
