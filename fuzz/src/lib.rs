//! Shared pieces of the fuzz targets: the runtime, structured JSON for tool arguments,
//! and the registries the targets dispatch through. See `docs/testing.md`.
//!
//! Everything here runs on stable too; only the targets (`fuzz_targets/`) need libFuzzer.

use std::sync::{Arc, OnceLock};

use arbitrary::{Arbitrary, Unstructured};
use serde_json::{Map, Number, Value};
use toolhost::registry::{CallContext, Environment, Registry, ToolCall, ToolError, ToolResult};

pub mod ops;
pub mod paths;

/// The one runtime every target runs its async work on: current-thread (a fuzz run is
/// single-threaded) with timers and the blocking pool the file tools use.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a tokio runtime")
    })
}

/// Dispatches one call and waits for it.
pub fn dispatch(registry: &Registry, name: &str, arguments: &str) -> Result<ToolResult, ToolError> {
    let call = ToolCall::new(name, arguments);
    runtime().block_on(registry.dispatch(&CallContext::new(), &call, &Environment::default()))
}

/// The argument names of the built-in tools, so generated objects hit real fields.
pub const ARGUMENT_NAMES: &[&str] = &[
    "path",
    "offset",
    "limit",
    "column",
    "content",
    "content_type",
    "pattern",
    "path_glob",
    "case_insensitive",
    "context",
    "output_mode",
    "old_string",
    "new_string",
    "replace_all",
    "edits",
    "source",
    "destination",
    "overwrite",
    "query",
    "todos",
    "status",
    "id",
];

/// Strings that mean something to some tool: paths of the seeded files, patterns, modes,
/// statuses, and classic path tricks.
pub const INTERESTING_STRINGS: &[&str] = &[
    "a.md",
    "dir/b.txt",
    "dir/sub/c.rs",
    "A.MD",
    ".hidden/x.md",
    "_drafts/y.md",
    "new.md",
    "dir",
    "",
    "..",
    "../a.md",
    "/etc/passwd",
    "a.md/",
    "C:/x",
    "dir\\b.txt",
    "**",
    "**/*.md",
    "*.{md,txt}",
    "dir/**",
    "[",
    "{",
    "a",
    "^a",
    "$",
    "(a|b)*c",
    ".*",
    "\\b\\w+\\b",
    "(?i)A",
    "content",
    "files_with_matches",
    "count",
    "pending",
    "in_progress",
    "completed",
    "line\nline\n",
    "\u{0}",
    "é",
    "\r\n",
];

/// A JSON value built from fuzzer bytes, biased towards the tools' argument names and
/// meaningful strings.
#[derive(Debug, Clone)]
pub struct Json(pub Value);

impl<'a> Arbitrary<'a> for Json {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        json_value(u, 0).map(Json)
    }
}

/// A string: one of [`INTERESTING_STRINGS`], or arbitrary text.
pub fn text(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    if u.ratio(3, 4)? {
        Ok((*u.choose(INTERESTING_STRINGS)?).to_owned())
    } else {
        String::arbitrary(u)
    }
}

fn json_value(u: &mut Unstructured<'_>, depth: usize) -> arbitrary::Result<Value> {
    let kind = if depth >= 6 {
        u.int_in_range(0..=4)?
    } else {
        u.int_in_range(0..=6)?
    };
    Ok(match kind {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => {
            // Small numbers mostly (offsets, limits, context), extremes sometimes.
            let n: i64 = if u.ratio(3, 4)? {
                u.int_in_range(-3..=2100)?
            } else {
                u.arbitrary()?
            };
            Value::Number(n.into())
        }
        3 => Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
        4 => Value::String(text(u)?),
        5 => {
            let len = u.int_in_range(0..=4)?;
            let mut items = Vec::with_capacity(len);
            for _ in 0..len {
                items.push(json_value(u, depth + 1)?);
            }
            Value::Array(items)
        }
        _ => Value::Object(json_object(u, depth + 1)?),
    })
}

/// An object whose keys are mostly tool argument names.
pub fn json_object(
    u: &mut Unstructured<'_>,
    depth: usize,
) -> arbitrary::Result<Map<String, Value>> {
    let len = u.int_in_range(0..=5)?;
    let mut map = Map::new();
    for _ in 0..len {
        let key = if u.ratio(7, 8)? {
            (*u.choose(ARGUMENT_NAMES)?).to_owned()
        } else {
            String::arbitrary(u)?
        };
        map.insert(key, json_value(u, depth)?);
    }
    Ok(map)
}

/// A registry with every file tool over `storage` and the plan tool.
pub fn file_registry(options: toolhost::tools::VfsToolOptions) -> Arc<Registry> {
    let registry = Registry::new();
    toolhost::tools::register_vfs_tools(&registry, options).expect("the file tools register");
    toolhost::tools::register_plan_tool(&registry).expect("the plan tool registers");
    Arc::new(registry)
}

/// A tool call's outcome in the terms the differential target compares: the result as
/// JSON without modification times (`updated_at`: the two stores' clocks differ), or the
/// error's kind and message.
pub fn normalise(outcome: Result<ToolResult, ToolError>) -> Result<Value, (String, String)> {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.remove("updated_at");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    match outcome {
        Ok(result) => {
            let mut value = result.content;
            strip(&mut value);
            Ok(value)
        }
        Err(err) => Err((err.kind().to_owned(), err.to_string())),
    }
}

/// The text after `#!` when the input starts with it: the seeds' readable form (tool
/// calls as `tool {json}` lines, a path, ...), next to the structured form the fuzzer
/// builds from raw bytes with [`Arbitrary`].
pub fn text_mode(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data.strip_prefix(b"#!")?).ok()
}

/// `tool {json}` lines of a text-mode input: the tool name, then its arguments' text.
pub fn call_lines(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.split_once(' ').unwrap_or((line, "")))
}
