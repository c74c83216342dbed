//! Content blocks as MCP encodes them: one function for every place a
//! [`ContentBlock`] goes out (a prompt's messages here; tool results can share it).
//!
//! - text: `{"type": "text", "text"}`;
//! - image and audio: `{"type": "image" | "audio", "data", "mimeType"}` with `data` in
//!   base64;
//! - a link: `{"type": "resource_link", "uri", "name", "mimeType"?, "description"?}`;
//! - a resource given whole: `{"type": "resource", "resource": {"uri", "mimeType"?,
//!   "text" | "blob"}}`, `blob` in base64 ([`resource_contents_json`], which
//!   `resources/read` of a catalog source uses too).

use base64::Engine as _;
use serde_json::{json, Value};

use toolhost::registry::{ContentBlock, ResourceBody};

use crate::revision::Revision;

/// `block` as an MCP content block (see the [module docs](self)).
pub(crate) fn content_block_json(block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text { text } => json!({ "type": "text", "text": text }),
        ContentBlock::Image(media) | ContentBlock::Audio(media) => {
            let kind = if matches!(block, ContentBlock::Image(_)) {
                "image"
            } else {
                "audio"
            };
            json!({
                "type": kind,
                "data": base64::engine::general_purpose::STANDARD.encode(&media.data),
                "mimeType": media.mime_type,
            })
        }
        ContentBlock::ResourceLink(link) => {
            let mut out = json!({ "type": "resource_link", "uri": link.uri, "name": link.name });
            if let Some(mime_type) = &link.mime_type {
                out["mimeType"] = json!(mime_type);
            }
            if let Some(description) = &link.description {
                out["description"] = json!(description);
            }
            out
        }
        ContentBlock::Resource(resource) => json!({
            "type": "resource",
            "resource": resource_contents_json(&resource.uri, resource.mime_type.as_deref(), &resource.body),
        }),
    }
}

/// `block` as a client of `revision` can read it: [`content_block_json`], except that a
/// block the revision has no type for becomes a text block saying what it was (a
/// `resource_link` before 2025-06-18: its name and URI; `audio` before 2025-03-26: its
/// type and size), so every message fits the revision's schema.
pub(crate) fn content_block_json_for(block: &ContentBlock, revision: Revision) -> Value {
    match block {
        ContentBlock::ResourceLink(link) if revision < Revision::V2025_06_18 => json!({
            "type": "text",
            "text": format!("[resource {}: {}]", link.name, link.uri),
        }),
        ContentBlock::Audio(media) if revision < Revision::V2025_03_26 => json!({
            "type": "text",
            "text": format!("[audio {}, {} bytes, not shown: this protocol version has no audio]", media.mime_type, media.data.len()),
        }),
        other => content_block_json(other),
    }
}

/// A resource's contents as MCP encodes them: `{"uri", "mimeType"?, "text"}` or
/// `{"uri", "mimeType"?, "blob"}` (base64).
pub(crate) fn resource_contents_json(
    uri: &str,
    mime_type: Option<&str>,
    body: &ResourceBody,
) -> Value {
    let mut out = json!({ "uri": uri });
    if let Some(mime_type) = mime_type {
        out["mimeType"] = json!(mime_type);
    }
    match body {
        ResourceBody::Text(text) => out["text"] = json!(text),
        ResourceBody::Blob(bytes) => {
            out["blob"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost::registry::{EmbeddedResource, Media, ResourceLink};

    #[test]
    fn every_kind_of_block_as_mcp_has_it() {
        let media = Media {
            data: vec![0, 1, 2, 255],
            mime_type: "image/png".into(),
        };
        assert_eq!(
            content_block_json(&ContentBlock::text("hi")),
            json!({"type": "text", "text": "hi"})
        );
        assert_eq!(
            content_block_json(&ContentBlock::Image(media.clone())),
            json!({"type": "image", "data": "AAEC/w==", "mimeType": "image/png"})
        );
        assert_eq!(
            content_block_json(&ContentBlock::Audio(Media {
                mime_type: "audio/wav".into(),
                ..media
            })),
            json!({"type": "audio", "data": "AAEC/w==", "mimeType": "audio/wav"})
        );
        assert_eq!(
            content_block_json(&ContentBlock::ResourceLink(ResourceLink {
                uri: "plugin://w/a".into(),
                name: "a".into(),
                mime_type: Some("text/plain".into()),
                description: None,
            })),
            json!({"type": "resource_link", "uri": "plugin://w/a", "name": "a", "mimeType": "text/plain"})
        );
        assert_eq!(
            content_block_json(&ContentBlock::Resource(EmbeddedResource {
                uri: "plugin://w/t".into(),
                mime_type: None,
                body: ResourceBody::Text("x".into()),
            })),
            json!({"type": "resource", "resource": {"uri": "plugin://w/t", "text": "x"}})
        );
        assert_eq!(
            content_block_json(&ContentBlock::Resource(EmbeddedResource {
                uri: "plugin://w/b".into(),
                mime_type: Some("application/octet-stream".into()),
                body: ResourceBody::Blob(vec![255]),
            })),
            json!({"type": "resource", "resource": {"uri": "plugin://w/b", "mimeType": "application/octet-stream", "blob": "/w=="}})
        );
    }

    #[test]
    fn blocks_an_older_revision_lacks_become_text() {
        let link = ContentBlock::ResourceLink(ResourceLink {
            uri: "plugin://w/a".into(),
            name: "a".into(),
            mime_type: None,
            description: None,
        });
        let audio = ContentBlock::Audio(Media {
            data: vec![0; 10],
            mime_type: "audio/wav".into(),
        });
        assert_eq!(
            content_block_json_for(&link, Revision::V2025_03_26),
            json!({"type": "text", "text": "[resource a: plugin://w/a]"})
        );
        assert_eq!(
            content_block_json_for(&link, Revision::V2025_06_18),
            content_block_json(&link)
        );
        assert_eq!(
            content_block_json_for(&audio, Revision::V2024_11_05),
            json!({"type": "text", "text": "[audio audio/wav, 10 bytes, not shown: this protocol version has no audio]"})
        );
        assert_eq!(
            content_block_json_for(&audio, Revision::V2025_03_26),
            content_block_json(&audio)
        );
    }
}
