//! File operations for the differential target `vfs_diff`: each one a call of a built-in
//! file tool, over a small alphabet of paths and contents so that operations meet (the
//! same file written, edited, moved, deleted), with a raw path or string now and then.

use arbitrary::{Arbitrary, Unstructured};
use serde_json::{json, Value};

/// Path segments: files and directories that collide (`a` as file and directory), names
/// that differ only in case, hidden names, extensions the content types depend on.
const SEGMENTS: &[&str] = &[
    "a", "b", "A", "B", "dir", "Dir", "x.md", "X.MD", "f.txt", "F.txt", ".h", "_u", "é.md", "É.md",
    "a b", "ß", "SS",
];

/// Content pieces: lines, CRLF, repeats (for ambiguous and overlapping edits), non-ASCII,
/// a NUL (binary files), a lone CR.
const PIECES: &[&str] = &[
    "a", "aa", "b", "\n", "\r\n", "ab\n", "line\n", "é", "x", "\u{0}", "\r", " ", "\t", "A",
];

/// A path from [`SEGMENTS`] (one to three), or an arbitrary string now and then.
pub fn path(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    if u.ratio(1, 32)? {
        return String::arbitrary(u);
    }
    let depth = u.int_in_range(1..=3)?;
    let mut parts = Vec::with_capacity(depth);
    for _ in 0..depth {
        parts.push(*u.choose(SEGMENTS)?);
    }
    Ok(parts.join("/"))
}

/// A short text from [`PIECES`], or an arbitrary string now and then.
pub fn content(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    if u.ratio(1, 16)? {
        return String::arbitrary(u);
    }
    let len = u.int_in_range(0..=6)?;
    let mut text = String::new();
    for _ in 0..len {
        text.push_str(u.choose(PIECES)?);
    }
    Ok(text)
}

/// A glob pattern over the same alphabet.
pub fn glob(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    Ok(match u.int_in_range(0..=7)? {
        0 => "**".to_owned(),
        1 => "**/*.md".to_owned(),
        2 => "*".to_owned(),
        3 => "dir/**".to_owned(),
        4 => "{a,b}/*".to_owned(),
        5 => "?".to_owned(),
        6 => path(u)?,
        _ => String::arbitrary(u)?,
    })
}

/// One operation: a tool and its arguments.
#[derive(Debug, Clone)]
pub struct Op {
    /// The tool.
    pub tool: &'static str,
    /// Its arguments.
    pub arguments: Value,
}

impl<'a> Arbitrary<'a> for Op {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let optional = |u: &mut Unstructured<'a>, lo: i64, hi: i64| -> arbitrary::Result<Value> {
            Ok(if u.arbitrary()? {
                json!(u.int_in_range(lo..=hi)?)
            } else {
                Value::Null
            })
        };
        let (tool, mut arguments) = match u.int_in_range(0..=10)? {
            0 | 1 => (
                "write_file",
                json!({
                    "path": path(u)?,
                    "content": content(u)?,
                    // Explicit types now and then: the memory store keeps them, the disk
                    // store derives every type from the extension (docs/testing.md).
                    "content_type": if u.ratio(1, 8)? { json!("text/x-fuzz") } else { Value::Null },
                }),
            ),
            2 => (
                "read_file",
                json!({
                    "path": path(u)?,
                    "offset": optional(u, -1, 8)?,
                    "limit": optional(u, -1, 8)?,
                    "column": optional(u, -1, 8)?,
                }),
            ),
            3 => (
                "edit_file",
                json!({
                    "path": path(u)?,
                    "old_string": content(u)?,
                    "new_string": content(u)?,
                    "replace_all": u.arbitrary::<bool>()?,
                }),
            ),
            4 => {
                let mut edits = Vec::new();
                for _ in 0..u.int_in_range(0..=3)? {
                    edits.push(json!({
                        "old_string": content(u)?,
                        "new_string": content(u)?,
                        "replace_all": u.arbitrary::<bool>()?,
                    }));
                }
                ("multi_edit", json!({"path": path(u)?, "edits": edits}))
            }
            5 => (
                "move_file",
                json!({
                    "source": path(u)?,
                    "destination": path(u)?,
                    "overwrite": u.arbitrary::<bool>()?,
                }),
            ),
            6 => {
                // A case-only rename (Readme.md -> README.md), or the same name.
                let source = path(u)?;
                let destination = if u.arbitrary()? {
                    source.to_uppercase()
                } else {
                    source.to_lowercase()
                };
                (
                    "move_file",
                    json!({"source": source, "destination": destination, "overwrite": u.arbitrary::<bool>()?}),
                )
            }
            7 => ("delete_file", json!({"path": path(u)?})),
            8 => ("list_files", json!({})),
            9 => ("glob", json!({"pattern": glob(u)?})),
            _ => (
                "grep",
                json!({
                    "pattern": content(u)?,
                    "path_glob": if u.arbitrary()? { json!(glob(u)?) } else { Value::Null },
                    "case_insensitive": u.arbitrary::<bool>()?,
                    "context": optional(u, 0, 6)?,
                    "output_mode": *u.choose(&["content", "files_with_matches", "count", "lines"])?,
                }),
            ),
        };
        // Optional arguments left out rather than sent as null.
        if let Value::Object(map) = &mut arguments {
            map.retain(|_, value| !value.is_null());
        }
        Ok(Self { tool, arguments })
    }
}
