//! `toolhost:plugin@0.3.0`'s imports: `log`, `files` and `config` have the same functions
//! and types as 0.2.0's (generated twice, once per package), so each call converts its
//! types and delegates to the 0.2.0 implementations (`crate::host`); `interaction` is
//! new in 0.3.0 and implemented in `crate::host::interaction`.

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
