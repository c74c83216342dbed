//! Rich results: what a tool built with [`Tool::rich`](crate::Tool::rich) returns instead
//! of one JSON value: text, images, audio, links to resources and whole resources, in
//! order, plus optional structured JSON (MCP's `content` and `structuredContent`).
//!
//! ```
//! use toolhost_sdk::{Content, ResourceLink};
//!
//! let png: Vec<u8> = vec![0x89, b'P', b'N', b'G'];
//! let content = Content::new()
//!     .text("The chart:")
//!     .image(png, "image/png")
//!     .resource_link(ResourceLink::new("plugin://charts/sales.csv", "sales.csv").with_mime_type("text/csv"))
//!     .with_structured(serde_json::json!({"points": 12}));
//! assert_eq!(content.blocks().len(), 3);
//! ```
//!
//! The host checks media types against its allow-list (images: `image/png`,
//! `image/jpeg`, `image/gif`, `image/webp`; audio: `audio/wav`, `audio/mpeg`,
//! `audio/ogg`, `audio/webm`, `audio/flac`) and fails the call otherwise. Every byte
//! counts against the plugin's output limit. A tool that declares an output schema must
//! set [`Content::with_structured`]; the host checks it against the schema.

use serde_json::Value;

/// A resource's content: text or bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResourceBody {
    /// UTF-8 text.
    Text(String),
    /// Bytes (the host base64-encodes them for MCP).
    Blob(Vec<u8>),
}

/// A pointer to a resource the client may read (MCP `resource_link`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResourceLink {
    /// The resource's URI.
    pub uri: String,
    /// Its name, for people.
    pub name: String,
    /// Its MIME type, when known.
    pub mime_type: Option<String>,
    /// What it is.
    pub description: Option<String>,
}

impl ResourceLink {
    /// A link to `uri`, called `name`.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            name: name.into(),
            mime_type: None,
            description: None,
        }
    }

    /// This link with the resource's MIME type.
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// This link with a description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

/// One piece of a rich result.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContentBlock {
    /// Text for the model.
    Text(String),
    /// An image: its bytes and MIME type.
    Image {
        /// The raw bytes.
        data: Vec<u8>,
        /// The MIME type, e.g. `image/png`.
        mime_type: String,
    },
    /// A sound: its bytes and MIME type.
    Audio {
        /// The raw bytes.
        data: Vec<u8>,
        /// The MIME type, e.g. `audio/wav`.
        mime_type: String,
    },
    /// A link to a resource.
    ResourceLink(ResourceLink),
    /// A resource given whole.
    Resource {
        /// The resource's URI.
        uri: String,
        /// Its MIME type, when known.
        mime_type: Option<String>,
        /// Its content.
        body: ResourceBody,
    },
}

/// A rich result: content blocks in order, and optional structured JSON.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Content {
    blocks: Vec<ContentBlock>,
    structured: Option<Value>,
}

impl Content {
    /// No blocks, no structured JSON.
    pub fn new() -> Self {
        Self::default()
    }

    /// This content with `block` added.
    pub fn block(mut self, block: ContentBlock) -> Self {
        self.blocks.push(block);
        self
    }

    /// This content with a text block added.
    pub fn text(self, text: impl Into<String>) -> Self {
        self.block(ContentBlock::Text(text.into()))
    }

    /// This content with an image added (`mime_type`: `image/png`, `image/jpeg`,
    /// `image/gif` or `image/webp`).
    pub fn image(self, data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        self.block(ContentBlock::Image {
            data: data.into(),
            mime_type: mime_type.into(),
        })
    }

    /// This content with a sound added (`mime_type`: `audio/wav`, `audio/mpeg`,
    /// `audio/ogg`, `audio/webm` or `audio/flac`).
    pub fn audio(self, data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        self.block(ContentBlock::Audio {
            data: data.into(),
            mime_type: mime_type.into(),
        })
    }

    /// This content with a link to a resource added.
    pub fn resource_link(self, link: ResourceLink) -> Self {
        self.block(ContentBlock::ResourceLink(link))
    }

    /// This content with a whole text resource added.
    pub fn embedded_text(
        self,
        uri: impl Into<String>,
        mime_type: Option<&str>,
        text: impl Into<String>,
    ) -> Self {
        self.block(ContentBlock::Resource {
            uri: uri.into(),
            mime_type: mime_type.map(str::to_owned),
            body: ResourceBody::Text(text.into()),
        })
    }

    /// This content with a whole binary resource added.
    pub fn embedded_blob(
        self,
        uri: impl Into<String>,
        mime_type: Option<&str>,
        data: impl Into<Vec<u8>>,
    ) -> Self {
        self.block(ContentBlock::Resource {
            uri: uri.into(),
            mime_type: mime_type.map(str::to_owned),
            body: ResourceBody::Blob(data.into()),
        })
    }

    /// This content with structured JSON (MCP `structuredContent`, a JSON object;
    /// required when the tool declares an output schema).
    pub fn with_structured(mut self, structured: Value) -> Self {
        self.structured = Some(structured);
        self
    }

    /// The blocks, in order.
    pub fn blocks(&self) -> &[ContentBlock] {
        &self.blocks
    }

    /// The structured JSON, if set.
    pub fn structured(&self) -> Option<&Value> {
        self.structured.as_ref()
    }

    /// The blocks and the structured JSON.
    pub fn into_parts(self) -> (Vec<ContentBlock>, Option<Value>) {
        (self.blocks, self.structured)
    }
}
