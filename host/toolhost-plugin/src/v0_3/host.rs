//! `toolhost:plugin@0.3.0`'s imports: `log`, `files` and `config` have the same functions
//! and types as 0.2.0's (generated twice, once per package), so each call converts its
//! types and delegates to the 0.2.0 implementations (`crate::host`); `interaction` is
//! new in 0.3.0 and implemented in `crate::host::interaction`, `sampling` (added within
//! 0.3.0) in `crate::host::sampling`, `registry` (added within 0.3.0) in
//! `crate::host::tools`.

use super::bindings::toolhost::plugin as v0_3;
use crate::host::ImportCtx;
use crate::v0_2::toolhost::plugin as v0_2;

impl v0_3::types::Host for ImportCtx {}

impl v0_3::log::Host for ImportCtx {
    fn log(&mut self, level: v0_3::log::Level, message: String) {
        let level = match level {
            v0_3::log::Level::Debug => v0_2::log::Level::Debug,
            v0_3::log::Level::Info => v0_2::log::Level::Info,
            v0_3::log::Level::Warn => v0_2::log::Level::Warn,
            v0_3::log::Level::Error => v0_2::log::Level::Error,
        };
        v0_2::log::Host::log(self, level, message);
    }

    fn progress(&mut self, done: u64, total: Option<u64>, message: Option<String>) {
        v0_2::log::Host::progress(self, done, total, message);
    }
}

impl v0_3::config::Host for ImportCtx {
    fn get(&mut self, key: String) -> Option<String> {
        v0_2::config::Host::get(self, key)
    }

    fn keys(&mut self) -> Vec<String> {
        v0_2::config::Host::keys(self)
    }
}

fn file_error(error: v0_2::files::FileError) -> v0_3::files::FileError {
    use v0_2::files::FileError as Old;
    use v0_3::files::FileError as New;
    match error {
        Old::NotFound(m) => New::NotFound(m),
        Old::Denied(m) => New::Denied(m),
        Old::InvalidPath(m) => New::InvalidPath(m),
        Old::TooLarge(m) => New::TooLarge(m),
        Old::Other(m) => New::Other(m),
    }
}

impl v0_3::files::Host for ImportCtx {
    async fn read(&mut self, path: String) -> Result<v0_3::files::File, v0_3::files::FileError> {
        let file = v0_2::files::Host::read(self, path)
            .await
            .map_err(file_error)?;
        Ok(v0_3::files::File {
            content: file.content,
            content_type: file.content_type,
            size: file.size,
            updated_at_ms: file.updated_at_ms,
        })
    }

    async fn list(&mut self) -> Result<Vec<v0_3::files::FileInfo>, v0_3::files::FileError> {
        let entries = v0_2::files::Host::list(self).await.map_err(file_error)?;
        Ok(entries
            .into_iter()
            .map(|info| v0_3::files::FileInfo {
                path: info.path,
                size: info.size,
                updated_at_ms: info.updated_at_ms,
            })
            .collect())
    }

    async fn write(
        &mut self,
        path: String,
        content: Vec<u8>,
        content_type: Option<String>,
    ) -> Result<(), v0_3::files::FileError> {
        v0_2::files::Host::write(self, path, content, content_type)
            .await
            .map_err(file_error)
    }

    async fn delete(&mut self, path: String) -> Result<(), v0_3::files::FileError> {
        v0_2::files::Host::delete(self, path)
            .await
            .map_err(file_error)
    }
}

fn interaction_error(
    error: toolhost::registry::InteractionError,
) -> v0_3::interaction::InteractionError {
    use toolhost::registry::InteractionError as Host;
    use v0_3::interaction::InteractionError as Wit;
    match error {
        Host::NotAllowed(m) => Wit::NotAllowed(m),
        Host::Unsupported(m) => Wit::Unsupported(m),
        Host::TimedOut(m) => Wit::TimedOut(m),
        Host::Invalid(m) => Wit::Invalid(m),
    }
}

impl v0_3::interaction::Host for ImportCtx {
    async fn confirm(
        &mut self,
        message: String,
    ) -> Result<bool, v0_3::interaction::InteractionError> {
        self.confirm(message).await.map_err(interaction_error)
    }

    async fn ask(
        &mut self,
        message: String,
        schema: String,
    ) -> Result<Option<String>, v0_3::interaction::InteractionError> {
        self.ask(message, schema).await.map_err(interaction_error)
    }
}

mod sampling {
    use toolhost::catalog::Role;
    use toolhost::registry::{ContentBlock, Media, SamplingMessage, SamplingRequest};

    use super::v0_3::sampling as wit;
    use super::v0_3::types::Media as WitMedia;

    fn role(role: wit::Role) -> Role {
        match role {
            wit::Role::User => Role::User,
            wit::Role::Assistant => Role::Assistant,
        }
    }

    fn media(media: WitMedia) -> Media {
        Media {
            data: media.data,
            mime_type: media.mime_type,
        }
    }

    fn content(content: wit::SamplingContent) -> ContentBlock {
        match content {
            wit::SamplingContent::Text(text) => ContentBlock::Text { text },
            wit::SamplingContent::Image(m) => ContentBlock::Image(media(m)),
            wit::SamplingContent::Audio(m) => ContentBlock::Audio(media(m)),
        }
    }

    /// The WIT request as the registry's (moved, not copied).
    pub(super) fn request(request: wit::CreateMessageRequest) -> SamplingRequest {
        SamplingRequest {
            messages: request
                .messages
                .into_iter()
                .map(|message| SamplingMessage {
                    role: role(message.role),
                    content: content(message.content),
                })
                .collect(),
            system_prompt: request.system_prompt,
            max_tokens: request.max_tokens,
            temperature: request.temperature,
            stop_sequences: request.stop_sequences,
            model_hints: request.model_hints,
        }
    }

    /// The registry's answer as the WIT one; `None` for a content block sampling does
    /// not carry (the MCP side never gives one).
    pub(super) fn result(
        response: toolhost::registry::SamplingResponse,
    ) -> Option<wit::CreateMessageResult> {
        let wit_media = |m: Media| WitMedia {
            data: m.data,
            mime_type: m.mime_type,
        };
        let content = match response.content {
            ContentBlock::Text { text } => wit::SamplingContent::Text(text),
            ContentBlock::Image(m) => wit::SamplingContent::Image(wit_media(m)),
            ContentBlock::Audio(m) => wit::SamplingContent::Audio(wit_media(m)),
            _ => return None,
        };
        Some(wit::CreateMessageResult {
            role: match response.role {
                Role::User => wit::Role::User,
                Role::Assistant => wit::Role::Assistant,
            },
            content,
            model: response.model,
            stop_reason: response.stop_reason,
        })
    }
}

impl v0_3::sampling::Host for ImportCtx {
    async fn create_message(
        &mut self,
        request: v0_3::sampling::CreateMessageRequest,
    ) -> Result<v0_3::sampling::CreateMessageResult, v0_3::interaction::InteractionError> {
        let response = self
            .create_message(sampling::request(request))
            .await
            .map_err(interaction_error)?;
        sampling::result(response).ok_or_else(|| {
            v0_3::interaction::InteractionError::Invalid(
                "the client answered with content that is not text, an image or a sound".into(),
            )
        })
    }
}

impl v0_3::registry::Host for ImportCtx {
    async fn definitions(&mut self) -> Vec<v0_3::types::ToolDefinition> {
        self.tool_definitions()
            .await
            .into_iter()
            .map(|definition| v0_3::types::ToolDefinition {
                parameters: definition.parameters.to_string(),
                output_schema: definition.output_schema.as_ref().map(ToString::to_string),
                annotations: {
                    let a = &definition.annotations;
                    let said = [
                        a.read_only_hint,
                        a.destructive_hint,
                        a.idempotent_hint,
                        a.open_world_hint,
                    ];
                    said.iter()
                        .any(Option::is_some)
                        .then_some(v0_3::types::ToolAnnotations {
                            read_only_hint: a.read_only_hint,
                            destructive_hint: a.destructive_hint,
                            idempotent_hint: a.idempotent_hint,
                            open_world_hint: a.open_world_hint,
                        })
                },
                title: definition.title,
                description: definition.description,
                name: definition.name,
            })
            .collect()
    }

    async fn call(
        &mut self,
        name: String,
        arguments: String,
    ) -> Result<String, v0_3::types::ToolError> {
        self.call_tool(name, arguments)
            .await
            .map_err(|err| match err {
                toolhost::registry::ToolError::InvalidArguments { .. } => {
                    v0_3::types::ToolError::InvalidArguments(err.to_string())
                }
                err => v0_3::types::ToolError::Failed(err.to_string()),
            })
    }
}
