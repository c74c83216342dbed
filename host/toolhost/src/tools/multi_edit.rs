//! The `multi_edit` tool: several exact replacements in one file, all or nothing.
//!
//! Arguments: `path` and `edits`, an array of `{old_string, new_string, replace_all}`.
//! Result: `{"path": "a.md", "edits": 3, "replacements": 4, "size": 120}`: how many edits
//! were applied, how many replacements they made in all, and the new file size in bytes.
//!
//! Rules:
//! - Every edit follows edit_file's rule (`edit_file::apply_edit`, shared): an exact `old_string`
//!   starting at exactly one position unless `replace_all`, different from `new_string`.
//! - The edits apply in order, each on the result of the ones before, in memory; the file
//!   is written once, after the last edit succeeded. A failing edit writes nothing and its
//!   error names it: `edits[2]: old_string not found in ...`.
//! - Every edit needs `old_string` and `new_string`: an explicit `""` new_string deletes,
//!   a missing or `null` one is InvalidArguments (`argument "edits[1].new_string" is
//!   required`). All edits are checked this way before the file is read.
//! - An edit that would grow the file past `max_file_bytes` fails before it is applied
//!   ([`ToolError::FileTooLarge`]). Every intermediate result must fit the cap. A file
//!   already over the cap (it was lowered, or the file grew outside the tools) is not read
//!   at all: the same error names its size, and nothing is loaded into memory for it.
//! - The write happens only if the file still holds what was read: a change another
//!   writer made in between is kept, and the call fails asking to read the file again
//!   ([`Storage::write_if_unchanged`](crate::vfs::Storage::write_if_unchanged)).

use super::common::{changes_files, NOT_IDEMPOTENT};
use std::sync::Arc;

use serde_json::{json, Value};
use toolhost_sdk::schema::{array, object, string};

use super::common::{checked_path, storage_error};
use super::edit_file::{apply_edit, edit_properties, Edit};
use super::register_file_tool;
use super::{blocking, FileTools};
use crate::registry::{
    json_type, Arguments, RegisterError, Registry, ToolDefinition, ToolError, ToolResult,
};

const NAME: &str = "multi_edit";
/// The display title (MCP `title`), one of [`RESERVED_TOOL_TITLES`](crate::registry::RESERVED_TOOL_TITLES).
const TITLE: &str = "Edit file in several places";

const DESCRIPTION: &str = "Make several exact text replacements in one existing file in one \
call, all or nothing. edits is a list of {old_string, new_string, replace_all}; they apply in \
order, each on the result of the ones before, and the file is written only if every edit \
succeeds (otherwise it is left unchanged and the error names the failing edit, e.g. edits[2]). \
Each edit works like edit_file: old_string is the exact current text WITHOUT read_file's \
line-number prefix (number and tab), it must occur exactly once unless replace_all is true, \
and new_string must differ from it; new_string \"\" deletes the text, and both fields are \
required in every edit. Read the file with read_file first. Returns {\"path\", \"edits\", \
\"replacements\", \"size\"}.";

/// Registers `multi_edit`.
pub(super) fn register(registry: &Registry, tools: &Arc<FileTools>) -> Result<(), RegisterError> {
    let edit = object(edit_properties(), ["old_string", "new_string"]);
    let parameters = object(
        [
            ("path", string("File to edit, relative to the store root.")),
            (
                "edits",
                array(edit, "The replacements, applied in this order."),
            ),
        ],
        ["path", "edits"],
    );
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
    let edits = parse_edits(&args)?;
    for (index, edit) in edits.iter().enumerate() {
        edit.check()
            .map_err(|err| err.into_tool_error(NAME, &path, Some(index)))?;
    }
    blocking(move || {
        let limit = tools.policy.max_file_bytes;
        let file = tools
            .storage
            .read_capped(&path, limit)
            .map_err(|err| storage_error(NAME, err))?;
        // The first edit applies to the content as read, which the write compares with.
        let mut content = std::borrow::Cow::Borrowed(file.content.as_slice());
        let mut replacements = 0;
        for (index, edit) in edits.iter().enumerate() {
            let (next, count) = apply_edit(&content, edit, limit)
                .map_err(|err| err.into_tool_error(NAME, &path, Some(index)))?;
            content = std::borrow::Cow::Owned(next);
            replacements += count;
        }
        tools
            .storage
            .write_if_unchanged(&path, &file.content, &content, &file.content_type)
            .map_err(|err| storage_error(NAME, err))?;
        Ok(ToolResult::new(json!({
            "path": path,
            "edits": edits.len(),
            "replacements": replacements,
            "size": content.len(),
        })))
    })
    .await
}

/// The `edits` argument, every element checked for shape and types.
fn parse_edits(args: &Arguments) -> Result<Vec<Edit>, ToolError> {
    let items = args.required_array("edits")?;
    if items.is_empty() {
        return Err(args.invalid(
            "argument \"edits\" is empty; give at least one {old_string, new_string} edit",
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let Value::Object(fields) = item else {
                return Err(args.wrong_type(&format!("edits[{index}]"), "an object", item));
            };
            let field = |name: &str| fields.get(name).filter(|value| !value.is_null());
            let text = |name: &str| {
                let full = format!("edits[{index}].{name}");
                match field(name) {
                    None => Err(args.missing(&full)),
                    Some(Value::String(text)) => Ok(text.clone()),
                    Some(other) => Err(args.wrong_type(&full, "a string", other)),
                }
            };
            let replace_all = match field("replace_all") {
                None => false,
                Some(Value::Bool(flag)) => *flag,
                Some(other) => {
                    return Err(args.invalid(format!(
                        "argument \"edits[{index}].replace_all\" must be a boolean, got {}",
                        json_type(other)
                    )))
                }
            };
            Ok(Edit {
                old: text("old_string")?,
                new: text("new_string")?,
                replace_all,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::testutil::{backend_tests, failed, invalid_arguments, Backend};

    const ORIGINAL: &str = "alpha\nbeta\ngamma\n";

    async fn edits_apply_in_order(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", ORIGINAL);
        let result = h
            .call(
                "multi_edit",
                json!({"path": "a.md", "edits": [
                    {"old_string": "alpha", "new_string": "ALPHA"},
                    {"old_string": "ALPHA\nbeta", "new_string": "one\ntwo"},
                    {"old_string": "a", "new_string": "A", "replace_all": true},
                ]}),
            )
            .await
            .unwrap();
        assert_eq!(
            result,
            json!({"path": "a.md", "edits": 3, "replacements": 4, "size": 14})
        );
        assert_eq!(h.get("a.md").unwrap(), b"one\ntwo\ngAmmA\n");
    }

    async fn failing_third_edit_writes_nothing(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", ORIGINAL);
        let message = failed(
            h.call(
                "multi_edit",
                json!({"path": "a.md", "edits": [
                    {"old_string": "alpha", "new_string": "one"},
                    {"old_string": "beta", "new_string": "two"},
                    {"old_string": "alpha", "new_string": "three"},
                ]}),
            )
            .await,
        );
        assert_eq!(
            message,
            "edits[2]: old_string not found in \"a.md\" (the edits apply in order, so it must match the text as the edits before it left it); read the file with read_file and copy the text exactly, without the line-number prefix and tab read_file puts before each line"
        );
        assert_eq!(h.get("a.md").unwrap(), ORIGINAL.as_bytes());
    }

    async fn ambiguous_edit_is_named(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", ORIGINAL);
        let message = failed(
            h.call(
                "multi_edit",
                json!({"path": "a.md", "edits": [{"old_string": "a\n", "new_string": "A\n"}]}),
            )
            .await,
        );
        assert_eq!(
            message,
            "edits[0]: old_string occurs at 3 positions in \"a.md\"; include more surrounding text to make it unique, or set replace_all to true to replace every occurrence"
        );
        assert_eq!(h.get("a.md").unwrap(), ORIGINAL.as_bytes());
    }

    async fn explicit_empty_new_string_deletes(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", ORIGINAL);
        let result = h
            .call(
                "multi_edit",
                json!({"path": "a.md", "edits": [{"old_string": "beta\n", "new_string": ""}]}),
            )
            .await
            .unwrap();
        assert_eq!(
            result,
            json!({"path": "a.md", "edits": 1, "replacements": 1, "size": 12})
        );
        assert_eq!(h.get("a.md").unwrap(), b"alpha\ngamma\n");
    }

    async fn missing_or_null_new_string_is_refused(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", ORIGINAL);
        for second in [
            json!({"old_string": "beta"}),
            json!({"old_string": "beta", "new_string": null}),
        ] {
            let message = invalid_arguments(
                h.call(
                    "multi_edit",
                    json!({"path": "a.md", "edits": [
                        {"old_string": "alpha", "new_string": "one"},
                        second,
                    ]}),
                )
                .await,
            );
            assert_eq!(message, "argument \"edits[1].new_string\" is required");
        }
        assert_eq!(h.get("a.md").unwrap(), ORIGINAL.as_bytes());
    }

    async fn malformed_edits_are_refused(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", ORIGINAL);
        let cases = [
            (
                json!([]),
                "argument \"edits\" is empty; give at least one {old_string, new_string} edit",
            ),
            (json!("x"), "argument \"edits\" must be an array, got string"),
            (
                json!([{"old_string": "a", "new_string": "b"}, 3]),
                "argument \"edits[1]\" must be an object, got integer",
            ),
            (
                json!([{"new_string": "b"}]),
                "argument \"edits[0].old_string\" is required",
            ),
            (
                json!([{"old_string": 1, "new_string": "b"}]),
                "argument \"edits[0].old_string\" must be a string, got integer",
            ),
            (
                json!([{"old_string": "alpha", "new_string": "b", "replace_all": "yes"}]),
                "argument \"edits[0].replace_all\" must be a boolean, got string",
            ),
            (
                json!([{"old_string": "alpha", "new_string": "b"}, {"old_string": "", "new_string": "c"}]),
                "argument \"edits[1].old_string\" is empty; give the exact text to replace (to create a file use write_file)",
            ),
            (
                json!([{"old_string": "alpha", "new_string": "alpha"}]),
                "argument \"edits[0].new_string\" is the same as \"edits[0].old_string\", so nothing would change; put the new text in \"edits[0].new_string\"",
            ),
        ];
        for (edits, expected) in cases {
            let message = invalid_arguments(
                h.call("multi_edit", json!({"path": "a.md", "edits": edits}))
                    .await,
            );
            assert_eq!(message, expected);
        }
        assert_eq!(h.get("a.md").unwrap(), ORIGINAL.as_bytes());
    }

    async fn growth_past_the_cap_fails_before_apply(backend: Backend) {
        let h = backend.harness(|options| options.max_file_bytes = 20);
        h.put("a.md", ORIGINAL);
        // The first edit brings the file to 20 bytes (the cap), the second would pass it.
        let err = h
            .call(
                "multi_edit",
                json!({"path": "a.md", "edits": [
                    {"old_string": "beta", "new_string": "beta!!!"},
                    {"old_string": "gamma", "new_string": "gamma!"},
                ]}),
            )
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ToolError::FileTooLarge {
                tool: "multi_edit".into(),
                path: "a.md".into(),
                size: 21,
                limit: 20
            }
        );
        assert_eq!(h.get("a.md").unwrap(), ORIGINAL.as_bytes());
    }

    async fn file_over_the_cap_is_not_read(backend: Backend) {
        // The file (17 bytes) is over a cap lowered after it was written: it is refused
        // before it is read, even though the first edit would bring it under the cap.
        let h = backend.harness(|options| options.max_file_bytes = 12);
        h.put("a.md", ORIGINAL);
        let err = h
            .call(
                "multi_edit",
                json!({"path": "a.md", "edits": [
                    {"old_string": "gamma\n", "new_string": ""},
                    {"old_string": "beta", "new_string": "beta!"},
                ]}),
            )
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ToolError::FileTooLarge {
                tool: "multi_edit".into(),
                path: "a.md".into(),
                size: 17,
                limit: 12
            }
        );
        assert_eq!(h.get("a.md").unwrap(), ORIGINAL.as_bytes());
    }

    backend_tests!(
        edits_apply_in_order,
        failing_third_edit_writes_nothing,
        ambiguous_edit_is_named,
        explicit_empty_new_string_deletes,
        missing_or_null_new_string_is_refused,
        malformed_edits_are_refused,
        growth_past_the_cap_fails_before_apply,
        file_over_the_cap_is_not_read,
    );
}
