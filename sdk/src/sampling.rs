//! Asking the client's language model for a completion during a call (MCP sampling).
//!
//! Sampling spends the user's tokens and money, so it is a grant of its own: the
//! plugin's manifest must ask for it, with its bounds, and the operator must allow it:
//!
//! ```toml
//! # summarise.toml, next to summarise.wasm; the host runs with --plugin-sampling
//! [grants]
//! sampling = { max_requests = 2, max_tokens = 300 }  # or `sampling = true`: 4 and 1024
//! ```
//!
//! ```no_run
//! use toolhost_sdk::sampling::{self, Message, Request};
//! use toolhost_sdk::ToolError;
//!
//! fn summarise(text: &str) -> Result<String, ToolError> {
//!     let request = Request::new(vec![Message::user(format!("Summarise:\n{text}"))], 300)
//!         .with_system_prompt("Answer in one sentence.");
//!     let answer = sampling::create_message(request)?;
//!     Ok(answer.text().unwrap_or_default().to_owned())
//! }
//! ```
//!
//! The host refuses, before anything reaches the client: a plugin without the grant
//! (`not-allowed`), more requests in one call than the grant's `max_requests` (at most
//! 16), `max_tokens` of 0 or above the grant's (at most 32,768), a request without
//! messages or of more than 64 KiB (texts, media as base64, system prompt, stop
//! sequences, model hints), media of a type it does not pass (images: png, jpeg, gif,
//! webp; audio: wav, mpeg, ogg, webm, flac) (`invalid`). A client that did not declare
//! sampling, or a call run as a task, is `unsupported`; no answer in time is
//! `timed-out`; an answer over 1 MiB or not shaped as one is `invalid`.

use crate::bindings::toolhost::plugin::sampling as wit;
use crate::bindings::toolhost::plugin::types::Media as WitMedia;
pub use crate::interaction::InteractionError;

/// Who says a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// The user (the plugin's prompt).
    User,
    /// The assistant (the model).
    Assistant,
}

/// What a message says.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SamplingContent {
    /// Text.
    Text(String),
    /// An image (`image/png`, `image/jpeg`, `image/gif` or `image/webp`).
    Image {
        /// The raw bytes.
        data: Vec<u8>,
        /// The MIME type.
        mime_type: String,
    },
    /// A sound (`audio/wav`, `audio/mpeg`, `audio/ogg`, `audio/webm` or `audio/flac`).
    Audio {
        /// The raw bytes.
        data: Vec<u8>,
        /// The MIME type.
        mime_type: String,
    },
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Message {
    /// Who says it.
    pub role: Role,
    /// What is said.
    pub content: SamplingContent,
}

impl Message {
    /// A text message from the user.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: SamplingContent::Text(text.into()),
        }
    }

    /// A text message from the assistant (an earlier answer, for context).
    pub fn assistant(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: SamplingContent::Text(text.into()),
        }
    }

    /// A message of `role` saying `content`.
    pub fn new(role: Role, content: SamplingContent) -> Self {
        Self { role, content }
    }
}

/// What to ask the model.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Request {
    /// The conversation, in order.
    pub messages: Vec<Message>,
    /// A system prompt the client may use.
    pub system_prompt: Option<String>,
    /// The most tokens the answer may have (at most the grant's `max_tokens`).
    pub max_tokens: u32,
    /// Sampling temperature, when the plugin has a preference.
    pub temperature: Option<f64>,
    /// Sequences that end the answer.
    pub stop_sequences: Vec<String>,
    /// Model names the plugin would like, best first; the client decides.
    pub model_hints: Vec<String>,
}

impl Request {
    /// A request of `messages` for at most `max_tokens` tokens.
    pub fn new(messages: Vec<Message>, max_tokens: u32) -> Self {
        Self {
            messages,
            system_prompt: None,
            max_tokens,
            temperature: None,
            stop_sequences: Vec::new(),
            model_hints: Vec::new(),
        }
    }

    /// This request with a system prompt.
    #[must_use]
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// This request with a temperature.
    #[must_use]
    pub fn with_temperature(mut self, temperature: f64) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// This request with a stop sequence added.
    #[must_use]
    pub fn with_stop_sequence(mut self, stop: impl Into<String>) -> Self {
        self.stop_sequences.push(stop.into());
        self
    }

    /// This request with a model hint added (best first).
    #[must_use]
    pub fn with_model_hint(mut self, model: impl Into<String>) -> Self {
        self.model_hints.push(model.into());
        self
    }
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Response {
    /// Who says it (normally [`Role::Assistant`]).
    pub role: Role,
    /// What the model answered.
    pub content: SamplingContent,
    /// The model that answered, as the client names it.
    pub model: String,
    /// Why the answer ended (`endTurn`, `stopSequence`, `maxTokens`, ...), when the
    /// client says.
    pub stop_reason: Option<String>,
}

impl Response {
    /// The answer's text, when it is text.
    pub fn text(&self) -> Option<&str> {
        match &self.content {
            SamplingContent::Text(text) => Some(text),
            _ => None,
        }
    }
}

fn to_wit_content(content: SamplingContent) -> wit::SamplingContent {
    match content {
        SamplingContent::Text(text) => wit::SamplingContent::Text(text),
        SamplingContent::Image { data, mime_type } => {
            wit::SamplingContent::Image(WitMedia { data, mime_type })
        }
        SamplingContent::Audio { data, mime_type } => {
            wit::SamplingContent::Audio(WitMedia { data, mime_type })
        }
    }
}

fn from_wit_role(role: wit::Role) -> Role {
    match role {
        wit::Role::User => Role::User,
        wit::Role::Assistant => Role::Assistant,
    }
}

/// Asks the client's model for a completion of `request`.
///
/// # Errors
/// See [`InteractionError`] and the module's docs: `NotAllowed` without the grant,
/// `Invalid` for a request over the grant's bounds or the host's limits (or an answer
/// that is not one), `Unsupported` when the client cannot sample, `TimedOut` when no
/// answer came in time.
pub fn create_message(request: Request) -> Result<Response, InteractionError> {
    let wit_request = wit::CreateMessageRequest {
        messages: request
            .messages
            .into_iter()
            .map(|message| wit::SamplingMessage {
                role: match message.role {
                    Role::User => wit::Role::User,
                    Role::Assistant => wit::Role::Assistant,
                },
                content: to_wit_content(message.content),
            })
            .collect(),
        system_prompt: request.system_prompt,
        max_tokens: request.max_tokens,
        temperature: request.temperature,
        stop_sequences: request.stop_sequences,
        model_hints: request.model_hints,
    };
    let result = wit::create_message(&wit_request).map_err(InteractionError::from)?;
    Ok(Response {
        role: from_wit_role(result.role),
        content: match result.content {
            wit::SamplingContent::Text(text) => SamplingContent::Text(text),
            wit::SamplingContent::Image(media) => SamplingContent::Image {
                data: media.data,
                mime_type: media.mime_type,
            },
            wit::SamplingContent::Audio(media) => SamplingContent::Audio {
                data: media.data,
                mime_type: media.mime_type,
            },
        },
        model: result.model,
        stop_reason: result.stop_reason,
    })
}
