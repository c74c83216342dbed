//! Rich results: the content blocks a tool may answer with besides plain JSON (MCP's
//! `content` array: text, image, audio, resource link, embedded resource).

use serde::{Deserialize, Serialize};

/// One piece of a rich result, as MCP's content blocks. Bytes are kept raw here; the MCP
/// layer base64-encodes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Text for the model.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image(Media),
    /// A sound.
    Audio(Media),
    /// A link to a resource the client may read.
    ResourceLink(ResourceLink),
    /// A resource given whole.
    Resource(EmbeddedResource),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// The bytes this block carries (text, URIs, names, and binary data as its base64
    /// length), for the result cap.
    pub fn payload_len(&self) -> usize {
        let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        match self {
            ContentBlock::Text { text } => text.len(),
            ContentBlock::Image(media) | ContentBlock::Audio(media) => {
                base64_len(media.data.len()) + media.mime_type.len()
            }
            ContentBlock::ResourceLink(link) => {
                link.uri.len() + link.name.len() + opt(&link.mime_type) + opt(&link.description)
            }
            ContentBlock::Resource(resource) => {
                resource.uri.len() + opt(&resource.mime_type) + resource.body.len()
            }
        }
    }
}

/// Bytes of a media type (an image or a sound).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Media {
    /// The raw bytes.
    pub data: Vec<u8>,
    /// The MIME type, e.g. `image/png`.
    pub mime_type: String,
}

/// A pointer to a resource (MCP `resource_link`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceLink {
    /// The resource's URI.
    pub uri: String,
    /// Its name, for people.
    pub name: String,
    /// Its MIME type, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A resource's content: text or bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceBody {
    /// UTF-8 text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

impl ResourceBody {
    /// Its size in bytes as sent (a blob as its base64 length).
    pub fn len(&self) -> usize {
        match self {
            ResourceBody::Text(text) => text.len(),
            ResourceBody::Blob(bytes) => base64_len(bytes.len()),
        }
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A resource given whole inside a result or read (MCP `resource` / resource contents).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbeddedResource {
    /// The resource's URI.
    pub uri: String,
    /// Its MIME type, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its content.
    pub body: ResourceBody,
}

/// The length of `n` bytes in padded base64.
pub(crate) fn base64_len(n: usize) -> usize {
    n.div_ceil(3).saturating_mul(4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{
        CallContext, Environment, Registry, ToolCall, ToolDefinition, ToolError, ToolResult,
    };

    #[tokio::test]
    async fn every_byte_of_a_rich_result_counts_against_the_cap_binary_as_base64() {
        let registry = Registry::new().with_result_cap(1000);
        for (name, bytes) in [("fits", 700usize), ("too_big", 760)] {
            registry
                .register(
                    ToolDefinition::new(name, "Draws.", serde_json::json!({"type": "object"})),
                    move |_ctx: CallContext, _args, _env| async move {
                        Ok(ToolResult::with_blocks(
                            vec![ContentBlock::Image(Media {
                                data: vec![0; bytes],
                                mime_type: "image/png".into(),
                            })],
                            serde_json::Value::Null,
                        ))
                    },
                )
                .unwrap();
        }
        let (ctx, env) = (CallContext::new(), Environment::default());
        // 700 bytes are 936 in base64, plus 9 for the MIME type: under 1000.
        let ok = registry
            .dispatch(&ctx, &ToolCall::new("fits", ""), &env)
            .await
            .unwrap();
        assert_eq!(ok.blocks.len(), 1);
        // 760 bytes are 1016 in base64: over, though the raw bytes are not.
        let err = registry
            .dispatch(&ctx, &ToolCall::new("too_big", ""), &env)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ToolError::ResultTooLarge {
                tool: "too_big".into(),
                size: 1025,
                cap: 1000
            }
        );
    }
}

/// Who says a message: of a prompt ([`catalog::PromptMessage`](super::catalog::PromptMessage))
/// or of a sampling request ([`SamplingMessage`](super::SamplingMessage)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user.
    User,
    /// The assistant.
    Assistant,
}
