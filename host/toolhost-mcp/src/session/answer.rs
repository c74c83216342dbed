//! A `tools/call` result's JSON text, written straight from the call's outcome.
//!
//! [`call_result_for`] builds the result as a JSON tree, which is then encoded and
//! dropped: a map, a vector and a string allocated and freed per call, and the text copied
//! twice. A result of text only (a tool's content as one text block, text blocks, an
//! error's message), which is what most calls give, is written here from the outcome's own
//! strings instead, byte for byte the text of the tree (a test compares the two); anything
//! else (images, links, resources, old revisions' text stand-ins) still goes through the
//! tree.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use toolhost::registry::{ContentBlock, ToolError, ToolResult};

use crate::convert::call_result_for;
use crate::revision::Revision;

/// The result's members, in the order the tree's sorted map writes them.
#[derive(Serialize)]
struct TextResult<'a> {
    content: Vec<TextBlock<'a>>,
    #[serde(rename = "isError")]
    is_error: bool,
    #[serde(rename = "structuredContent", skip_serializing_if = "Option::is_none")]
    structured_content: Option<&'a Value>,
}

/// A text block's members, sorted as the tree's map writes them.
#[derive(Serialize)]
struct TextBlock<'a> {
    text: Cow<'a, str>,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// The JSON text of `call_result_for(outcome, revision)`.
pub(crate) fn call_result_text(
    outcome: &Result<ToolResult, ToolError>,
    revision: Revision,
) -> String {
    let Some(texts) = texts(outcome) else {
        return call_result_for(outcome, revision).to_string();
    };
    let structured_content = match outcome {
        Ok(ToolResult {
            content: content @ Value::Object(_),
            structured: true,
            ..
        }) => Some(content),
        _ => None,
    };
    let result = TextResult {
        content: texts
            .into_iter()
            .map(|text| TextBlock { text, kind: "text" })
            .collect(),
        is_error: outcome.is_err(),
        structured_content,
    };
    // Only a map with keys that are not strings fails to encode; a `Value` has none.
    serde_json::to_string(&result)
        .unwrap_or_else(|_| call_result_for(outcome, revision).to_string())
}

/// The texts of the result's blocks, when every block is text; `None` otherwise.
fn texts(outcome: &Result<ToolResult, ToolError>) -> Option<Vec<Cow<'_, str>>> {
    match outcome {
        Ok(result) if result.blocks.is_empty() => Some(vec![match &result.content {
            Value::String(text) => Cow::Borrowed(text.as_str()),
            other => Cow::Owned(other.to_string()),
        }]),
        Ok(result) => result
            .blocks
            .iter()
            .map(|block| match block {
                ContentBlock::Text { text } => Some(Cow::Borrowed(text.as_str())),
                _ => None,
            })
            .collect(),
        Err(err) => Some(vec![Cow::Owned(err.to_string())]),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolhost::registry::Media;

    use super::*;

    fn structured(content: Value) -> ToolResult {
        let mut result = ToolResult::new(content);
        result.structured = true;
        result
    }

    fn with_blocks(content: Value, blocks: Vec<ContentBlock>) -> ToolResult {
        let mut result = ToolResult::new(content);
        result.blocks = blocks;
        result
    }

    #[test]
    fn written_as_the_tree_writes_it() {
        let outcomes: Vec<Result<ToolResult, ToolError>> = vec![
            Ok(ToolResult::new("Hello, Ada!")),
            // Escapes: quotes, backslashes, control characters, non-ASCII, a line break.
            Ok(ToolResult::new(
                "\"q\" \\ \u{1} \t é 🎉 \u{2028} </script>\nnext",
            )),
            Ok(ToolResult::new("")),
            Ok(ToolResult::new(
                json!({"b": [1, 2.5, null], "a": {"x": "y"}}),
            )),
            Ok(structured(json!({"b": 1, "a": "two", "c": [true]}))),
            // Structured but not an object: no structuredContent.
            Ok(structured(json!([1, 2]))),
            Ok(ToolResult::new(Value::Null)),
            Ok(ToolResult::new(json!(-0.0))),
            Ok(with_blocks(
                Value::Null,
                vec![ContentBlock::text("one"), ContentBlock::text("two \"2\"")],
            )),
            Ok(with_blocks(
                json!({"k": 1}),
                vec![ContentBlock::text("with structured")],
            )),
            Ok(with_blocks(
                Value::Null,
                vec![
                    ContentBlock::text("a picture:"),
                    ContentBlock::Image(Media {
                        data: vec![0, 1, 2],
                        mime_type: "image/png".into(),
                    }),
                ],
            )),
            Err(ToolError::UnknownTool {
                name: "no\"such\ttool".into(),
            }),
            Err(ToolError::InvalidArguments {
                tool: "greet".into(),
                message: "argument \"name\" must be a string".into(),
            }),
        ];
        for outcome in &outcomes {
            for revision in Revision::ALL {
                assert_eq!(
                    call_result_text(outcome, revision),
                    call_result_for(outcome, revision).to_string(),
                    "{outcome:?} at {revision:?}"
                );
            }
        }
    }

    #[test]
    fn text_results_are_written_without_the_tree() {
        let hello = Ok(ToolResult::new("Hello, Ada!"));
        assert!(texts(&hello).is_some());
        assert_eq!(
            call_result_text(&hello, Revision::NEWEST_LEGACY),
            r#"{"content":[{"text":"Hello, Ada!","type":"text"}],"isError":false}"#
        );
        let picture = Ok(with_blocks(
            Value::Null,
            vec![ContentBlock::Image(Media {
                data: vec![7],
                mime_type: "image/gif".into(),
            })],
        ));
        assert!(texts(&picture).is_none());
    }
}
