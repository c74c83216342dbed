//! The `move_file` tool: one atomic [`Storage::rename`] where the store offers it (as
//! [`OsStorage`](crate::vfs::OsStorage) and [`MemoryStorage`](crate::vfs::MemoryStorage)
//! do), else write the destination, then delete the source.
//!
//! With a rename, the file is under its old or its new name at every instant, also when
//! the process is killed: a case-only rename on a case-insensitive disk is the store's
//! business (see [`OsStorage`](crate::vfs::OsStorage)), and so is the destination check,
//! made by the kernel in the same call where it can.
//!
//! Without one, a rename that only changes letter case (`Readme.md` to `README.md`) goes
//! through a hidden staging file in the source's directory, so that it also works on
//! case-insensitive disks, where the source and the destination are the same file: write
//! the staging file, delete the source, write the destination, delete the staging file.
//! The forward steps stop when the call is cancelled or past its deadline; the cleanup
//! after a failed or stopped step ignores cancellation but gives up on a step after
//! [`CLEANUP_STEP_LIMIT`].
//!
//! Either way the source is first read (at most `max_file_bytes` of it, which a
//! larger file breaks before anything is allocated): files over the cap cannot be moved,
//! and the error names the destination that would have held them.
//!
//! Decisions where the spec is silent: the destination keeps the source's content type when
//! the extension stays the same, and gets the one of its own extension otherwise; for a
//! case-only rename the destination counts as existing only when the store lists it under
//! exactly that name (so on a case-insensitive disk the source itself does not block it);
//! when only the final removal of the staging file fails, the move succeeded and the
//! leftover is logged.

use super::common::{changes_files, IDEMPOTENT};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use serde_json::{json, Value};
use toolhost_sdk::schema::{boolean, object, string};

use super::common::{checked_path, storage_error};
use super::register_file_tool;
use super::{blocking, FileTools};
use crate::error::ErrorChain;
use crate::registry::{
    Arguments, CallContext, RegisterError, Registry, ToolDefinition, ToolError, ToolResult,
};
use crate::vfs::{content_type_for, Storage, StorageError, MAX_PATH_LEN, MAX_SEGMENT_LEN};

const NAME: &str = "move_file";
/// The display title (MCP `title`), one of [`RESERVED_TOOL_TITLES`](crate::registry::RESERVED_TOOL_TITLES).
const TITLE: &str = "Move or rename file";

/// How long one cleanup step (removing the staging file, restoring the source) may take
/// before the tool gives up on it and reports what is left.
pub const CLEANUP_STEP_LIMIT: Duration = Duration::from_secs(30);

/// Registers `move_file`.
pub(super) fn register(registry: &Registry, tools: &Arc<FileTools>) -> Result<(), RegisterError> {
    let description = format!(
        "Move or rename a file. Returns {{\"source\", \"destination\", \"overwritten\"}}. \
Fails when the destination already exists, unless overwrite is true, and when source and \
destination are the same path. A rename that only changes letter case (Readme.md to \
README.md) works. Files over {} bytes cannot be moved. If the move is done as a copy and the \
source cannot be deleted after it, both files remain and the error says so. Moves one file; \
to move a directory, move its files one by one.",
        tools.policy.max_file_bytes
    );
    let parameters = object(
        [
            (
                "source",
                string("Path of the file to move, relative to the store root."),
            ),
            (
                "destination",
                string(
                    "Its new path, relative to the store root; missing directories are created.",
                ),
            ),
            (
                "overwrite",
                boolean("Replace an existing destination file. Default false."),
            ),
        ],
        ["source", "destination"],
    );
    register_file_tool(
        registry,
        tools,
        ToolDefinition::new(NAME, description, parameters)
            .with_title(TITLE)
            .with_annotations(changes_files(IDEMPOTENT)),
        |tools, ctx, args| async move { run(ctx, tools, args).await },
    )
}

async fn run(
    ctx: CallContext,
    tools: Arc<FileTools>,
    args: Arguments,
) -> Result<ToolResult, ToolError> {
    let source = checked_path(&tools.policy, &args, "source")?;
    let destination = checked_path(&tools.policy, &args, "destination")?;
    let overwrite = args.optional_bool("overwrite")?.unwrap_or(false);
    if source == destination {
        return Err(args.invalid(format!(
            "arguments \"source\" and \"destination\" are the same path (\"{source}\"); give a destination that differs, nothing was moved"
        )));
    }
    let job = Move {
        ctx,
        storage: Arc::clone(&tools.storage),
        tools,
        source,
        destination,
        overwrite,
    };
    blocking(move || job.run().map(ToolResult::new)).await
}

fn failed(message: String) -> ToolError {
    ToolError::Failed {
        tool: NAME.to_owned(),
        message,
    }
}

/// One move, run on a blocking worker.
struct Move {
    ctx: CallContext,
    tools: Arc<FileTools>,
    storage: Arc<dyn Storage>,
    source: String,
    destination: String,
    overwrite: bool,
}

impl Move {
    fn run(&self) -> Result<Value, ToolError> {
        let limit = self.tools.policy.max_file_bytes;
        let file = match self.storage.read_capped(&self.source, limit) {
            Ok(file) => file,
            Err(StorageError::NotFound { .. }) => {
                return Err(failed(format!(
                    "there is no file at \"{}\" (argument \"source\"), so nothing was moved; call list_files to see which files exist",
                    self.source
                )))
            }
            Err(StorageError::FileTooLarge { size, limit, .. }) => {
                return Err(ToolError::FileTooLarge {
                    tool: NAME.to_owned(),
                    path: self.destination.clone(),
                    size,
                    limit,
                })
            }
            Err(err) => return Err(storage_error(NAME, err)),
        };
        self.stop_if_expired()?;
        let overwritten = match self
            .storage
            .rename(&self.source, &self.destination, self.overwrite)
        {
            Ok(replaced) => replaced,
            Err(StorageError::Unsupported { .. }) => self.by_copy(file)?,
            Err(StorageError::AlreadyExists { .. }) => return Err(self.already_exists()),
            Err(err) => return Err(storage_error(NAME, err)),
        };
        Ok(json!({
            "source": self.source,
            "destination": self.destination,
            "overwritten": overwritten,
        }))
    }

    /// The move for a store without [`Storage::rename`]: a write and a delete. Returns
    /// whether a file was replaced.
    fn by_copy(&self, file: crate::vfs::FileContent) -> Result<bool, ToolError> {
        let content_type =
            if extension(&self.source).eq_ignore_ascii_case(extension(&self.destination)) {
                file.content_type
            } else {
                content_type_for(&self.destination).to_owned()
            };
        let content: Arc<[u8]> = file.content.into();
        if self.source.to_lowercase() == self.destination.to_lowercase() {
            self.case_only(content, &content_type)
        } else {
            self.plain(&content, &content_type)
        }
    }

    /// Write the destination, delete the source. Returns whether a file was replaced.
    fn plain(&self, content: &[u8], content_type: &str) -> Result<bool, ToolError> {
        let existed = self
            .storage
            .exists(&self.destination)
            .map_err(|err| storage_error(NAME, err))?;
        self.refuse_existing(existed)?;
        self.stop_if_expired()?;
        self.storage
            .write(&self.destination, content, content_type)
            .map_err(|err| storage_error(NAME, err))?;
        if let Err(err) = self.storage.delete(&self.source) {
            return Err(failed(format!(
                "wrote \"{}\", but could not delete \"{}\" ({}); both files now exist with the same content. Delete \"{}\" with delete_file to finish the move",
                self.destination, self.source, ErrorChain(&err), self.source
            )));
        }
        Ok(existed)
    }

    /// Through a staging file: write staging, delete source, write destination, delete
    /// staging. Returns whether a file was replaced.
    fn case_only(&self, content: Arc<[u8]>, content_type: &str) -> Result<bool, ToolError> {
        let listed = self
            .storage
            .list()
            .map_err(|err| storage_error(NAME, err))?;
        let existed = listed.iter().any(|entry| entry.path == self.destination);
        self.refuse_existing(existed)?;
        let staging = staging_path(&self.source);
        self.stop_if_expired()?;
        if let Err(err) = self.storage.write(&staging, &content, content_type) {
            return Err(failed(format!(
                "could not stage the rename of \"{}\" in \"{staging}\" ({}); nothing was changed",
                self.source,
                ErrorChain(&err)
            )));
        }
        let cleanup = Cleanup {
            storage: Arc::clone(&self.storage),
            source: self.source.clone(),
            staging,
            content,
            content_type: content_type.to_owned(),
        };
        if self.ctx.expired() {
            if let Err(left) = cleanup.remove_staging() {
                tracing::warn!(
                    tool = NAME,
                    "stopped before renaming \"{}\", and {left}",
                    self.source
                );
            }
            return Err(Self::stopped());
        }
        if let Err(err) = self.storage.delete(&self.source) {
            let outcome = match cleanup.remove_staging() {
                Ok(()) => "nothing was changed".to_owned(),
                Err(left) => format!("\"{}\" is unchanged, but {left}", self.source),
            };
            return Err(failed(format!(
                "could not delete \"{}\" to rename it ({}); {outcome}",
                self.source,
                ErrorChain(&err)
            )));
        }
        if self.ctx.expired() {
            let outcome = cleanup.restore();
            tracing::warn!(
                tool = NAME,
                "stopped while renaming \"{}\": {outcome}",
                self.source
            );
            return Err(Self::stopped());
        }
        if let Err(err) = self
            .storage
            .write(&self.destination, &cleanup.content, content_type)
        {
            return Err(failed(format!(
                "could not write \"{}\" ({}); {}",
                self.destination,
                ErrorChain(&err),
                cleanup.restore()
            )));
        }
        if let Err(left) = cleanup.remove_staging() {
            tracing::warn!(
                tool = NAME,
                "renamed \"{}\" to \"{}\", but {left}",
                self.source,
                self.destination
            );
        }
        Ok(existed)
    }

    fn refuse_existing(&self, existed: bool) -> Result<(), ToolError> {
        if existed && !self.overwrite {
            return Err(self.already_exists());
        }
        Ok(())
    }

    fn already_exists(&self) -> ToolError {
        failed(format!(
            "\"{}\" already exists, so nothing was moved; set overwrite to true to replace it, or choose another destination",
            self.destination
        ))
    }

    fn stop_if_expired(&self) -> Result<(), ToolError> {
        if self.ctx.expired() {
            return Err(Self::stopped());
        }
        Ok(())
    }

    fn stopped() -> ToolError {
        ToolError::Cancelled {
            tool: NAME.to_owned(),
        }
    }
}

/// What a case-only rename undoes after a failed or stopped step.
struct Cleanup {
    storage: Arc<dyn Storage>,
    source: String,
    staging: String,
    content: Arc<[u8]>,
    content_type: String,
}

impl Cleanup {
    /// Removes the staging file; the error says what is left behind.
    fn remove_staging(&self) -> Result<(), String> {
        let storage = Arc::clone(&self.storage);
        let staging = self.staging.clone();
        bounded(CLEANUP_STEP_LIMIT, move || storage.delete(&staging)).map_err(|err| {
            format!(
                "the staging file \"{}\" could not be removed ({})",
                self.staging,
                ErrorChain(&err)
            )
        })
    }

    /// Writes the source back and removes the staging file; says how that went.
    fn restore(&self) -> String {
        let storage = Arc::clone(&self.storage);
        let (source, content, content_type) = (
            self.source.clone(),
            Arc::clone(&self.content),
            self.content_type.clone(),
        );
        let restored = bounded(CLEANUP_STEP_LIMIT, move || {
            storage.write(&source, &content, &content_type)
        });
        match restored {
            Err(err) => format!(
                "restoring \"{}\" failed too ({}); its content is kept in \"{}\"",
                self.source,
                ErrorChain(&err),
                self.staging
            ),
            Ok(()) => match self.remove_staging() {
                Ok(()) => format!("\"{}\" was restored, so nothing was changed", self.source),
                Err(left) => format!("\"{}\" was restored, but {left}", self.source),
            },
        }
    }
}

/// Why a bounded cleanup step did not succeed.
#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("gave up after {}", crate::registry::format_duration(*.0))]
    TimedOut(Duration),
}

/// Runs `step` on its own thread and waits at most `limit` for it. A step that overruns is
/// left to finish in the background.
fn bounded(
    limit: Duration,
    step: impl FnOnce() -> Result<(), StorageError> + Send + 'static,
) -> Result<(), StepError> {
    let (done, outcome) = mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("move_file-cleanup".to_owned())
        .spawn(move || {
            // The receiver may be gone after a timeout; nothing is waiting then.
            let _ = done.send(step());
        });
    if let Err(err) = spawned {
        return Err(StepError::Storage(StorageError::io(
            "(cleanup thread)",
            err,
        )));
    }
    match outcome.recv_timeout(limit) {
        Ok(result) => result.map_err(StepError::from),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(StepError::TimedOut(limit)),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(StepError::Storage(StorageError::io(
            "(cleanup thread)",
            std::io::Error::other("the cleanup step panicked"),
        ))),
    }
}

/// The extension of the last segment, without the dot (`""` for none).
fn extension(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.rsplit_once('.').map_or("", |(_, ext)| ext)
}

/// A hidden staging path next to `source`: `.<name>.move-<uuid>`, or `.move-<uuid>` when
/// the name is too long for that.
fn staging_path(source: &str) -> String {
    let (dir, name) = match source.rsplit_once('/') {
        Some((dir, name)) => (format!("{dir}/"), name),
        None => (String::new(), source),
    };
    let id = uuid::Uuid::new_v4().simple();
    let full = format!(".{name}.move-{id}");
    if full.len() <= MAX_SEGMENT_LEN && dir.len() + full.len() <= MAX_PATH_LEN {
        format!("{dir}{full}")
    } else {
        format!("{dir}.move-{id}")
    }
}

#[cfg(test)]
mod tests;
