//! Asking the client's language model for a completion during a call (MCP sampling,
//! `sampling/createMessage`): the request a tool sends through
//! [`Interaction::sample`](super::Interaction::sample) and the answer it gets.
//!
//! Sampling spends the user's tokens (and money), so whoever offers it bounds it: the
//! plugin host lets a plugin sample only with its own grant, allowed by the operator, and
//! caps requests per call and tokens per request; the MCP server sends a request only to a
//! client that declared the `sampling` capability, and checks the answer's size and shape.
//! Whatever the caller, a request is at most [`MAX_SAMPLING_REQUEST_BYTES`] and an
//! answer at most [`MAX_SAMPLING_RESPONSE_BYTES`].
//!
//! ```
//! use toolhost::registry::{ContentBlock, SamplingRequest};
//!
//! let request = SamplingRequest::new(vec![SamplingRequest::user_text("Summarise: ...")], 100)
//!     .with_system_prompt("Answer in one sentence.");
//! assert_eq!(request.max_tokens, 100);
//! assert_eq!(request.payload_len(), "Summarise: ...".len() + "Answer in one sentence.".len());
//! assert!(matches!(&request.messages[0].content, ContentBlock::Text { text } if text == "Summarise: ..."));
//! ```

use serde::{Deserialize, Serialize};

use super::content::ContentBlock;
use super::content::Role;

/// The largest sampling request: 64 KiB of payload (every message's text or media as
/// base64, the system prompt, the stop sequences and the model hints). A larger one is
/// refused ([`InteractionError::Invalid`](super::InteractionError::Invalid)) before
/// anything is sent.
pub const MAX_SAMPLING_REQUEST_BYTES: usize = 64 * 1024;

/// The largest answer taken from the client: 1 MiB of JSON. A larger one is refused
/// ([`InteractionError::Invalid`](super::InteractionError::Invalid)) without being read.
pub const MAX_SAMPLING_RESPONSE_BYTES: usize = 1024 * 1024;

/// One message of the conversation sent for sampling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplingMessage {
    /// Who says it.
    pub role: Role,
    /// What is said: text, an image or a sound (other blocks are refused).
    pub content: ContentBlock,
}

/// A request for a completion (MCP `CreateMessageRequest` params).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingRequest {
    /// The conversation so far, in order (at least one message).
    pub messages: Vec<SamplingMessage>,
    /// A system prompt the client may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The most tokens the answer may have.
    pub max_tokens: u32,
    /// Sampling temperature, when the caller has a preference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Sequences that end the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    /// Model names the caller would like, best first (MCP `modelPreferences.hints`);
    /// the client decides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_hints: Vec<String>,
}

impl SamplingRequest {
    /// A request of `messages` for at most `max_tokens` tokens, with nothing else set.
    pub fn new(messages: Vec<SamplingMessage>, max_tokens: u32) -> Self {
        Self {
            messages,
            system_prompt: None,
            max_tokens,
            temperature: None,
            stop_sequences: Vec::new(),
            model_hints: Vec::new(),
        }
    }

    /// A text message from the user.
    pub fn user_text(text: impl Into<String>) -> SamplingMessage {
        SamplingMessage {
            role: Role::User,
            content: ContentBlock::text(text),
        }
    }

    /// This request with `prompt` as its system prompt.
    #[must_use]
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// The bytes this request carries (message texts, media as their base64 length,
    /// the system prompt, stop sequences and model hints), checked against
    /// [`MAX_SAMPLING_REQUEST_BYTES`] without building any JSON.
    pub fn payload_len(&self) -> usize {
        let messages: usize = self
            .messages
            .iter()
            .map(|message| message.content.payload_len())
            .sum();
        let strings = |list: &[String]| list.iter().map(String::len).sum::<usize>();
        messages
            + self.system_prompt.as_ref().map_or(0, String::len)
            + strings(&self.stop_sequences)
            + strings(&self.model_hints)
    }
}

/// The client's answer (MCP `CreateMessageResult`), checked for shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplingResponse {
    /// Who says it (normally the assistant).
    pub role: Role,
    /// What the model answered: text, an image or a sound.
    pub content: ContentBlock,
    /// The model that answered, as the client names it.
    pub model: String,
    /// Why the answer ended (`endTurn`, `stopSequence`, `maxTokens`, or the client's own
    /// word), when the client says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
}
