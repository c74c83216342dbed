//! `toolhost:plugin@0.1.0`'s imports, served by the 0.2.0 implementations: the two
//! versions' `log` and `files` have the same functions and types (generated twice, once
//! per package), so each call converts its types and delegates.

use super::bindings::toolhost::plugin as v0_1;
use crate::host::ImportCtx;
use crate::v0_2::toolhost::plugin as v0_2;

impl v0_1::types::Host for ImportCtx {}

impl v0_1::log::Host for ImportCtx {
    fn log(&mut self, level: v0_1::log::Level, message: String) {
        let level = match level {
            v0_1::log::Level::Debug => v0_2::log::Level::Debug,
            v0_1::log::Level::Info => v0_2::log::Level::Info,
            v0_1::log::Level::Warn => v0_2::log::Level::Warn,
            v0_1::log::Level::Error => v0_2::log::Level::Error,
        };
        v0_2::log::Host::log(self, level, message);
    }
}

fn file_error(error: v0_2::files::FileError) -> v0_1::files::FileError {
    use v0_1::files::FileError as Old;
    use v0_2::files::FileError as New;
    match error {
        New::NotFound(m) => Old::NotFound(m),
        New::Denied(m) => Old::Denied(m),
        New::InvalidPath(m) => Old::InvalidPath(m),
        New::TooLarge(m) => Old::TooLarge(m),
        New::Other(m) => Old::Other(m),
    }
}

impl v0_1::files::Host for ImportCtx {
    async fn read(&mut self, path: String) -> Result<v0_1::files::File, v0_1::files::FileError> {
        let file = v0_2::files::Host::read(self, path)
            .await
            .map_err(file_error)?;
        Ok(v0_1::files::File {
            content: file.content,
            content_type: file.content_type,
            size: file.size,
            updated_at_ms: file.updated_at_ms,
        })
    }

    async fn list(&mut self) -> Result<Vec<v0_1::files::FileInfo>, v0_1::files::FileError> {
        let entries = v0_2::files::Host::list(self).await.map_err(file_error)?;
        Ok(entries
            .into_iter()
            .map(|info| v0_1::files::FileInfo {
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
    ) -> Result<(), v0_1::files::FileError> {
        v0_2::files::Host::write(self, path, content, content_type)
            .await
            .map_err(file_error)
    }

    async fn delete(&mut self, path: String) -> Result<(), v0_1::files::FileError> {
        v0_2::files::Host::delete(self, path)
            .await
            .map_err(file_error)
    }
}
