//! A 0.3.0 `tool-result` as the registry's [`ToolResult`]: its content blocks converted
//! (media MIME types checked against the allow-list), its structured JSON parsed, its
//! size checked against the plugin's output cap.
//!
//! - Empty `content` with `structured`: the structured JSON is the result, given to the
//!   client as one text block (and as `structuredContent` when the tool declares an
//!   output schema): what 0.2.0's JSON text result was, so a tool moved to 0.3.0
//!   answers exactly as before. Any JSON value is accepted there (the SDK sends a plain
//!   result, a JSON string included, this way); only an object becomes
//!   `structuredContent`.
//! - Non-empty `content`: the blocks, in order, with `structured` (when set) beside them.
//!   Dispatch checks `structured` against the tool's output schema, so a tool that
//!   declares one and returns no `structured` fails there.
//! - Images must be `image/png`, `image/jpeg`, `image/gif` or `image/webp`; audio
//!   `audio/wav` (also `audio/x-wav`, `audio/wave`), `audio/mpeg` (also `audio/mp3`),
//!   `audio/ogg`, `audio/webm` or `audio/flac` (also `audio/x-flac`), compared without
//!   case and parameters. Anything else (`text/html` as an image, `image/svg+xml`,
//!   which can carry script) is refused as a failed call naming the type and the
//!   allowed ones.

use serde_json::Value;
use toolhost::registry::{
    format_bytes, ContentBlock, EmbeddedResource, Limit, Media, ResourceBody, ResourceLink,
    ToolError, ToolResult,
};

use super::bindings::toolhost::plugin::types as wit;
use crate::PluginLimits;

use crate::media::{AUDIO_CANONICAL, AUDIO_TYPES, IMAGE_TYPES};

/// The bytes a result carries (raw, before base64), for the output cap.
fn payload_len(result: &wit::ToolResult) -> usize {
    let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let body = |body: &wit::ResourceBody| match body {
        wit::ResourceBody::Text(text) => text.len(),
        wit::ResourceBody::Blob(bytes) => bytes.len(),
    };
    result
        .content
        .iter()
        .map(|block| match block {
            wit::ContentBlock::Text(text) => text.len(),
            wit::ContentBlock::Image(media) | wit::ContentBlock::Audio(media) => {
                media.data.len() + media.mime_type.len()
            }
            wit::ContentBlock::ResourceLink(link) => {
                link.uri.len() + link.name.len() + opt(&link.mime_type) + opt(&link.description)
            }
            wit::ContentBlock::Resource(resource) => {
                resource.uri.len() + opt(&resource.mime_type) + body(&resource.body)
            }
        })
        .fold(opt(&result.structured), usize::saturating_add)
}

/// `result` of tool `tool` as the registry's result.
///
/// # Errors
/// [`ToolError::LimitExceeded`] (output) when it carries more than the plugin's output
/// cap; [`ToolError::Failed`] when `structured` is not JSON or a media block has a MIME
/// type off the allow-list.
pub(crate) fn convert(
    result: wit::ToolResult,
    tool: &str,
    limits: &PluginLimits,
) -> Result<ToolResult, ToolError> {
    let size = payload_len(&result);
    let cap = limits.max_output_bytes;
    if size > cap {
        return Err(ToolError::LimitExceeded {
            tool: tool.to_owned(),
            limit: Limit::Output { bytes: cap as u64 },
            message: format!(
                "the plugin returned {} of result, over its limit of {}; ask for less (a smaller range, a narrower query)",
                format_bytes(size as u64),
                format_bytes(cap as u64)
            ),
        });
    }
    let structured = match &result.structured {
        Some(text) => serde_json::from_str::<Value>(text).map_err(|err| ToolError::Failed {
            tool: tool.to_owned(),
            message: format!(
                "the plugin returned invalid JSON as its structured result: {err}; this is a fault in the plugin, not in your call"
            ),
        })?,
        None => Value::Null,
    };
    if result.content.is_empty() {
        return Ok(ToolResult::new(structured));
    }
    let blocks = result
        .content
        .into_iter()
        .map(|block| content_block(block, tool))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ToolResult::with_blocks(blocks, structured))
}

/// One content block as the registry's.
pub(crate) fn content_block(
    block: wit::ContentBlock,
    tool: &str,
) -> Result<ContentBlock, ToolError> {
    Ok(match block {
        wit::ContentBlock::Text(text) => ContentBlock::Text { text },
        wit::ContentBlock::Image(media) => ContentBlock::Image(checked_media(
            media,
            "an image",
            IMAGE_TYPES,
            IMAGE_TYPES.len(),
            tool,
        )?),
        wit::ContentBlock::Audio(media) => ContentBlock::Audio(checked_media(
            media,
            "audio",
            AUDIO_TYPES,
            AUDIO_CANONICAL,
            tool,
        )?),
        wit::ContentBlock::ResourceLink(link) => ContentBlock::ResourceLink(ResourceLink {
            uri: link.uri,
            name: link.name,
            mime_type: link.mime_type,
            description: link.description,
        }),
        wit::ContentBlock::Resource(resource) => ContentBlock::Resource(EmbeddedResource {
            uri: resource.uri,
            mime_type: resource.mime_type,
            body: resource_body(resource.body),
        }),
    })
}

/// A resource body as the registry's.
pub(crate) fn resource_body(body: wit::ResourceBody) -> ResourceBody {
    match body {
        wit::ResourceBody::Text(text) => ResourceBody::Text(text),
        wit::ResourceBody::Blob(bytes) => ResourceBody::Blob(bytes),
    }
}

/// `media` when its MIME type (without case and parameters) is one of `allowed`.
fn checked_media(
    media: wit::Media,
    what: &str,
    allowed: &[&str],
    named: usize,
    tool: &str,
) -> Result<Media, ToolError> {
    let essence = crate::media::essence(&media.mime_type);
    if !allowed.contains(&essence.as_str()) {
        return Err(ToolError::Failed {
            tool: tool.to_owned(),
            message: format!(
                "the plugin returned {what} of type `{}`, which the host does not pass on; allowed: {}; this is a fault in the plugin, not in your call",
                media.mime_type.escape_debug(),
                allowed[..named].join(", ")
            ),
        });
    }
    Ok(Media {
        data: media.data,
        mime_type: essence,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(mime: &str) -> wit::ContentBlock {
        wit::ContentBlock::Image(wit::Media {
            data: vec![1, 2, 3],
            mime_type: mime.into(),
        })
    }

    fn result(content: Vec<wit::ContentBlock>, structured: Option<&str>) -> wit::ToolResult {
        wit::ToolResult {
            content,
            structured: structured.map(str::to_owned),
        }
    }

    #[test]
    fn blocks_convert_in_order_with_structured_beside_them() {
        let limits = PluginLimits::default();
        let got = convert(
            result(
                vec![
                    wit::ContentBlock::Text("hi".into()),
                    image("IMAGE/PNG; q=1"),
                    wit::ContentBlock::Audio(wit::Media {
                        data: vec![9],
                        mime_type: "audio/x-wav".into(),
                    }),
                    wit::ContentBlock::ResourceLink(wit::ResourceLink {
                        uri: "plugin://p/a".into(),
                        name: "a".into(),
                        mime_type: None,
                        description: Some("d".into()),
                    }),
                    wit::ContentBlock::Resource(wit::EmbeddedResource {
                        uri: "plugin://p/b".into(),
                        mime_type: Some("application/octet-stream".into()),
                        body: wit::ResourceBody::Blob(vec![0, 255]),
                    }),
                ],
                Some(r#"{"n":1}"#),
            ),
            "t",
            &limits,
        )
        .unwrap();
        assert_eq!(got.content, serde_json::json!({"n": 1}));
        assert_eq!(
            got.blocks,
            vec![
                ContentBlock::text("hi"),
                ContentBlock::Image(Media {
                    data: vec![1, 2, 3],
                    mime_type: "image/png".into()
                }),
                ContentBlock::Audio(Media {
                    data: vec![9],
                    mime_type: "audio/x-wav".into()
                }),
                ContentBlock::ResourceLink(ResourceLink {
                    uri: "plugin://p/a".into(),
                    name: "a".into(),
                    mime_type: None,
                    description: Some("d".into()),
                }),
                ContentBlock::Resource(EmbeddedResource {
                    uri: "plugin://p/b".into(),
                    mime_type: Some("application/octet-stream".into()),
                    body: ResourceBody::Blob(vec![0, 255]),
                }),
            ]
        );
    }

    #[test]
    fn empty_content_with_structured_is_the_old_json_result() {
        let limits = PluginLimits::default();
        assert_eq!(
            convert(result(vec![], Some(r#""Hello, Ada!""#)), "t", &limits),
            Ok(ToolResult::new("Hello, Ada!"))
        );
        assert_eq!(
            convert(result(vec![], Some(r#"{"words":3}"#)), "t", &limits),
            Ok(ToolResult::new(serde_json::json!({"words": 3})))
        );
        assert_eq!(
            convert(result(vec![], None), "t", &limits),
            Ok(ToolResult::default())
        );
        let bad = convert(result(vec![], Some("{nope")), "t", &limits).unwrap_err();
        assert!(
            matches!(bad, ToolError::Failed { ref message, .. } if message.starts_with("the plugin returned invalid JSON as its structured result: ")),
            "{bad:?}"
        );
    }

    #[test]
    fn media_types_off_the_allow_list_are_refused_by_name() {
        let limits = PluginLimits::default();
        for mime in ["text/html", "image/svg+xml", ""] {
            let err = convert(result(vec![image(mime)], None), "draw", &limits).unwrap_err();
            assert_eq!(
                err,
                ToolError::Failed {
                    tool: "draw".into(),
                    message: format!("the plugin returned an image of type `{mime}`, which the host does not pass on; allowed: image/png, image/jpeg, image/gif, image/webp; this is a fault in the plugin, not in your call"),
                }
            );
        }
        let audio = wit::ContentBlock::Audio(wit::Media {
            data: vec![],
            mime_type: "image/png".into(),
        });
        let err = convert(result(vec![audio], None), "t", &limits).unwrap_err();
        assert!(
            err.to_string()
                .contains("allowed: audio/wav, audio/mpeg, audio/ogg, audio/webm, audio/flac;"),
            "{err}"
        );
    }

    #[test]
    fn every_byte_counts_against_the_output_cap() {
        let limits = PluginLimits::default().with_max_output_bytes(17);
        let fits = result(vec![image("image/png")], Some("[1,2]"));
        assert!(convert(fits, "t", &limits).is_ok());
        let over = result(
            vec![image("image/png"), wit::ContentBlock::Text("x".into())],
            Some("[1,2]"),
        );
        assert!(matches!(
            convert(over, "t", &limits),
            Err(ToolError::LimitExceeded {
                limit: Limit::Output { bytes: 17 },
                ..
            })
        ));
    }
}
