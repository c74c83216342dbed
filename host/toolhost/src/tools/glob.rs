//! The `glob` tool: the paths matching a glob pattern.
//!
//! Argument: `pattern` (required). Result: `{"paths": ["a.md", "notes/b.md"],
//! "truncated": false}`: the matching files sorted by path, at most [`MAX_PATHS`];
//! `truncated` is true when more matched.
//!
//! The pattern is at most [`MAX_PATTERN_BYTES`](super::MAX_PATTERN_BYTES) long (4 KiB);
//! a longer one is an argument error (see `tools/pattern.rs`).
//!
//! Syntax ([`globset`] with `literal_separator`): `*` matches within one path segment,
//! `**` across segments (`**/*.md` matches `a.md` and `x/y/a.md`), `?` one character,
//! `[ab]` a class, `{a,b}` alternatives, `\` escapes. Only files match (directories are
//! not listed), and only those the path policy shows (hidden paths and disallowed
//! extensions never appear).
//!
//! The store is walked as a stream in path order ([`Storage::visit_paths`](crate::vfs::Storage::visit_paths))
//! under the [walk budget](super::walks): only matches are kept, and the walk stops at
//! the first match past [`MAX_PATHS`], so a call holds at most 501 paths whatever the
//! tree, and stops between two files once it expires or is cancelled.

use crate::registry::ToolAnnotations;
use std::ops::ControlFlow;
use std::sync::Arc;

use serde_json::json;
use toolhost_sdk::schema::{object, string};

use super::register_file_tool;
use super::{stopped, visit_shown, walk, FileTools};
use crate::registry::{
    Arguments, CallContext, RegisterError, Registry, ToolDefinition, ToolError, ToolResult,
};

const NAME: &str = "glob";
/// The display title (MCP `title`), one of [`RESERVED_TOOL_TITLES`](crate::registry::RESERVED_TOOL_TITLES).
const TITLE: &str = "Find files by pattern";

/// At most this many paths in one result. 500 paths of typical length stay well under the
/// 64 KiB result cap; a pattern matching more should be narrowed.
pub const MAX_PATHS: usize = 500;

const DESCRIPTION: &str = "Find files by path pattern. * matches within one path segment (no \
/), ** matches across segments, ? matches one character, [abc] a character class, {a,b} either \
alternative. Examples: \"*.md\" (top level only), \"**/*.md\" (every depth), \
\"docs/**/*.{md,txt}\", \"src/?.rs\". Patterns are matched against whole paths relative to the \
store root, without a leading /. Returns {\"paths\": [...], \"truncated\": bool}: matching \
files sorted by path, at most 500; truncated is true when more matched (narrow the pattern). \
To search file contents use grep.";

/// Registers `glob`.
pub(super) fn register(registry: &Registry, tools: &Arc<FileTools>) -> Result<(), RegisterError> {
    let parameters = object(
        [(
            "pattern",
            string("Glob pattern such as \"**/*.md\" or \"docs/*.{md,txt}\"."),
        )],
        ["pattern"],
    );
    register_file_tool(
        registry,
        tools,
        ToolDefinition::new(NAME, DESCRIPTION, parameters)
            .with_title(TITLE)
            .with_annotations(ToolAnnotations::read_only()),
        |tools, ctx, args| async move { run(tools, ctx, args).await },
    )
}

async fn run(
    tools: Arc<FileTools>,
    ctx: CallContext,
    args: Arguments,
) -> Result<ToolResult, ToolError> {
    let pattern = args.required_str("pattern")?;
    let matcher = super::pattern::glob_matcher(&args, "pattern", pattern)?;
    let budget = Arc::clone(&tools.walks);
    walk(&budget, NAME, ctx, move |ctx| {
        let mut paths: Vec<String> = Vec::new();
        let mut truncated = false;
        let wanted = |path: &str| matcher.is_match(path);
        let expired = visit_shown(&tools, ctx, NAME, wanted, |path| {
            // In path order: the first MAX_PATHS matches are the answer, and one more
            // says it is cut.
            if paths.len() == MAX_PATHS {
                truncated = true;
                return ControlFlow::Break(());
            }
            paths.push(path);
            ControlFlow::Continue(())
        })?;
        if expired {
            return Err(stopped(ctx, NAME));
        }
        paths.sort_unstable();
        Ok(ToolResult::new(
            json!({"paths": paths, "truncated": truncated}),
        ))
    })
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::tools::testutil::{backend_tests, invalid_arguments, Backend, Harness};

    const TREE: [&str; 8] = [
        "README.md",
        "a.md",
        "b.txt",
        "docs/guide.md",
        "docs/deep/x.md",
        "docs/notes.txt",
        "src/a.rs",
        "src/ab.rs",
    ];

    fn tree(backend: Backend) -> Harness {
        let h = backend.default_harness();
        for path in TREE {
            h.put(path, "x");
        }
        h
    }

    async fn glob(h: &Harness, pattern: &str) -> Value {
        h.call("glob", json!({ "pattern": pattern })).await.unwrap()
    }

    fn paths(list: &[&str]) -> Value {
        json!({"paths": list, "truncated": false})
    }

    async fn star_stays_in_one_segment(backend: Backend) {
        let h = tree(backend);
        assert_eq!(glob(&h, "*.md").await, paths(&["README.md", "a.md"]));
        assert_eq!(
            glob(&h, "docs/*").await,
            paths(&["docs/guide.md", "docs/notes.txt"])
        );
    }

    async fn double_star_crosses_segments(backend: Backend) {
        let h = tree(backend);
        assert_eq!(
            glob(&h, "**/*.md").await,
            paths(&["README.md", "a.md", "docs/deep/x.md", "docs/guide.md"])
        );
        assert_eq!(
            glob(&h, "docs/**").await,
            paths(&["docs/deep/x.md", "docs/guide.md", "docs/notes.txt"])
        );
    }

    async fn question_mark_is_one_character(backend: Backend) {
        let h = tree(backend);
        assert_eq!(glob(&h, "src/?.rs").await, paths(&["src/a.rs"]));
        assert_eq!(glob(&h, "src/??.rs").await, paths(&["src/ab.rs"]));
        assert_eq!(glob(&h, "?.md").await, paths(&["a.md"]));
    }

    async fn braces_are_alternatives(backend: Backend) {
        let h = tree(backend);
        assert_eq!(
            glob(&h, "**/*.{txt,rs}").await,
            paths(&["b.txt", "docs/notes.txt", "src/a.rs", "src/ab.rs"])
        );
        assert_eq!(glob(&h, "{a,b}.*").await, paths(&["a.md", "b.txt"]));
    }

    async fn no_match_is_empty(backend: Backend) {
        let h = tree(backend);
        assert_eq!(glob(&h, "**/*.pdf").await, paths(&[]));
    }

    async fn more_than_500_are_cut_sorted(backend: Backend) {
        let h = backend.default_harness();
        // Written in reverse so the order of the answer cannot come from the order of writes.
        for i in (0..501).rev() {
            h.put(&format!("d{}/f{i:03}.md", i % 3), "x");
        }
        h.put("d0/other.txt", "x");
        let result = glob(&h, "**/*.md").await;
        assert_eq!(result["truncated"], true);
        let listed: Vec<&str> = result["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        let mut expected: Vec<String> =
            (0..501).map(|i| format!("d{}/f{i:03}.md", i % 3)).collect();
        expected.sort();
        expected.truncate(500);
        assert_eq!(listed, expected);
        // Exactly 500 is not truncated.
        h.storage.delete(&expected[0]).unwrap();
        let result = glob(&h, "**/*.md").await;
        assert_eq!(result["truncated"], false);
        assert_eq!(result["paths"].as_array().unwrap().len(), 500);
    }

    async fn policy_hides_paths(backend: Backend) {
        let h = backend.harness(|options| {
            options.hide_hidden_paths = true;
            options.allowed_extensions = Some(vec![".md".into()]);
        });
        for path in ["a.md", ".hidden.md", "_drafts/b.md", "c.txt", "d/e.MD"] {
            h.put(path, "x");
        }
        assert_eq!(glob(&h, "**").await, paths(&["a.md", "d/e.MD"]));
    }

    async fn invalid_pattern_is_refused(backend: Backend) {
        let h = tree(backend);
        let message = invalid_arguments(h.call("glob", json!({"pattern": "docs/{a,b"})).await);
        assert!(
            message.starts_with("argument \"pattern\" is not a valid glob: "),
            "{message}"
        );
        assert!(message.contains("unclosed alternate group"), "{message}");
        let message = invalid_arguments(h.call("glob", json!({})).await);
        assert_eq!(message, "argument \"pattern\" is required");
    }

    backend_tests!(
        star_stays_in_one_segment,
        double_star_crosses_segments,
        question_mark_is_one_character,
        braces_are_alternatives,
        no_match_is_empty,
        more_than_500_are_cut_sorted,
        policy_hides_paths,
        invalid_pattern_is_refused,
    );
}
