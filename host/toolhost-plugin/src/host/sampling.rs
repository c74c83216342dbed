//! `toolhost:plugin:sampling` (0.3.0): a plugin asks the client's language model for a
//! completion during the running call, through the call's
//! [`Interaction::sample`](toolhost::registry::Interaction::sample).
//!
//! # Sandbox
//! Sampling spends the user's tokens and money, so it is deny-by-default and bounded:
//! - allowed only when the manifest asks for it (`[grants] sampling`) and the operator
//!   allows it (`PluginHostConfigBuilder::plugin_sampling`, `--plugin-sampling`);
//!   otherwise every request is `not-allowed` and nothing reaches the client;
//! - at most the grant's `max_requests` requests per call (the next ones are `invalid`,
//!   naming the cap), each asking for 1 to the grant's `max_tokens` tokens, with at
//!   least one message, media of an allowed MIME type, and at most
//!   [`MAX_SAMPLING_REQUEST_BYTES`] of payload: all checked before anything is sent;
//! - a call with no interaction (a task, a library call), or whose client did not
//!   declare sampling, is `unsupported`;
//! - the wait is inside the call's deadline and the server's confirm timeout.

use toolhost::registry::{
    ContentBlock, InteractionError, SamplingRequest, SamplingResponse, MAX_SAMPLING_REQUEST_BYTES,
};

use super::ImportCtx;
use crate::media::{essence, AUDIO_CANONICAL, AUDIO_TYPES, IMAGE_TYPES};

impl ImportCtx {
    /// Checks that this call may send `request`, and counts it.
    fn admit_sample(&mut self, request: &SamplingRequest) -> Result<(), InteractionError> {
        let Some(grant) = self.sampling else {
            return Err(InteractionError::NotAllowed(format!(
                "plugin {} may not ask the client's model: its manifest must say `[grants] sampling = true` (or `sampling = {{ max_requests = N, max_tokens = M }}`) and the operator must allow it (--plugin-sampling); go on without it, or fail and say what you need",
                self.plugin
            )));
        };
        if self.samples >= grant.max_requests {
            return Err(InteractionError::Invalid(format!(
                "this call already sent {} sampling requests, the most plugin {}'s grant allows per call (`[grants] sampling` max_requests = {}); send fewer, or do the rest without the model",
                self.samples, self.plugin, grant.max_requests
            )));
        }
        self.samples += 1;
        if request.max_tokens == 0 || request.max_tokens > grant.max_tokens {
            return Err(InteractionError::Invalid(format!(
                "the request asks for {} tokens; plugin {}'s grant allows 1 to {} per request (`[grants] sampling` max_tokens); ask for at most {}",
                request.max_tokens, self.plugin, grant.max_tokens, grant.max_tokens
            )));
        }
        check_request(request)
    }

    /// `create-message` of the `sampling` import.
    pub(crate) async fn create_message(
        &mut self,
        request: SamplingRequest,
    ) -> Result<SamplingResponse, InteractionError> {
        self.admit_sample(&request)?;
        let interaction = self.call.interaction().cloned().ok_or_else(|| {
            InteractionError::Unsupported(
                "the client's model cannot be asked during this call (the client did not declare sampling, or the call is not served to a client, e.g. it runs as a task); go on without it, or fail and say what you need".into(),
            )
        })?;
        interaction.sample(request).await
    }
}

/// Checks what any sampling request must be: at least one message, each text or media
/// of an allowed type, at most [`MAX_SAMPLING_REQUEST_BYTES`] in all.
fn check_request(request: &SamplingRequest) -> Result<(), InteractionError> {
    if request.messages.is_empty() {
        return Err(InteractionError::Invalid(
            "the request has no message; send at least one".to_owned(),
        ));
    }
    let size = request.payload_len();
    if size > MAX_SAMPLING_REQUEST_BYTES {
        return Err(InteractionError::Invalid(format!(
            "the request carries {size} bytes (messages, system prompt, stop sequences, model hints), over the limit of {MAX_SAMPLING_REQUEST_BYTES}; send less"
        )));
    }
    for message in &request.messages {
        let (what, media, allowed, named) = match &message.content {
            ContentBlock::Image(media) => ("an image", media, IMAGE_TYPES, IMAGE_TYPES.len()),
            ContentBlock::Audio(media) => ("a sound", media, AUDIO_TYPES, AUDIO_CANONICAL),
            _ => continue,
        };
        if !allowed.contains(&essence(&media.mime_type).as_str()) {
            return Err(InteractionError::Invalid(format!(
                "a message carries {what} of type `{}`, which the host does not send; allowed: {}",
                media.mime_type.escape_debug(),
                allowed[..named].join(", ")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost::registry::Media;

    #[test]
    fn requests_are_checked_for_messages_size_and_media_types() {
        let empty = SamplingRequest::new(Vec::new(), 10);
        assert_eq!(
            check_request(&empty),
            Err(InteractionError::Invalid(
                "the request has no message; send at least one".into()
            ))
        );
        let big = SamplingRequest::new(vec![SamplingRequest::user_text("a".repeat(40_000))], 10)
            .with_system_prompt("b".repeat(30_000));
        assert_eq!(
            check_request(&big),
            Err(InteractionError::Invalid("the request carries 70000 bytes (messages, system prompt, stop sequences, model hints), over the limit of 65536; send less".into()))
        );
        let mut html = SamplingRequest::new(vec![SamplingRequest::user_text("hi")], 10);
        html.messages[0].content = ContentBlock::Image(Media {
            data: vec![1, 2, 3],
            mime_type: "text/html".into(),
        });
        assert_eq!(
            check_request(&html),
            Err(InteractionError::Invalid("a message carries an image of type `text/html`, which the host does not send; allowed: image/png, image/jpeg, image/gif, image/webp".into()))
        );
        assert_eq!(
            check_request(&SamplingRequest::new(
                vec![SamplingRequest::user_text("hi")],
                10
            )),
            Ok(())
        );
    }
}
