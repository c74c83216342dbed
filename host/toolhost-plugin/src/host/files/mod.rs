//! `toolhost:plugin/files`: the host's [`Storage`](toolhost::vfs::Storage) as far as the plugin was granted.
//!
//! The rules this import follows (grant, policy, root, time, budgets) are on
//! [`FileAccess`](crate::FileAccess) (`host/file_access.rs`), the public face of this
//! module.
//!
//! This file serves the interface (`Host` for [`ImportCtx`]: budgets, the blocking pool,
//! denial logs); what one plugin's grant allows is
//! [`FileGrant`](super::file_grant::FileGrant) in `host/file_grant.rs`, below this module
//! and `ctx`, which both name it.

use std::sync::Arc;

use super::file_grant::{listing_bytes, FileGrant};
use super::ImportCtx;
use crate::v0_2::toolhost::plugin::files::{File, FileError, FileInfo, Host};

#[cfg(test)]
mod tests;

impl ImportCtx {
    /// Logs a denial (within the plugin's log rate limit) and passes the result on.
    fn logged<T>(
        &self,
        op: &str,
        path: &str,
        result: Result<T, FileError>,
    ) -> Result<T, FileError> {
        if let Err(FileError::Denied(reason)) = &result {
            if self.meter.admit_log(&self.tool) {
                tracing::warn!(target: "plugin", plugin = %self.plugin, tool = %self.tool, "file {op} of \"{}\" denied: {reason}", path.escape_debug());
            }
        }
        result
    }

    /// Runs `work` on the grant on the blocking pool, holding one of the host's storage
    /// permits until it returns (even when the call awaiting it was dropped at its
    /// deadline). The guest waits; the async worker does not.
    async fn blocking<T, F>(&self, work: F) -> Result<T, FileError>
    where
        F: FnOnce(&FileGrant) -> Result<T, FileError> + Send + 'static,
        T: Send + 'static,
    {
        let permit = Arc::clone(&self.io)
            .acquire_owned()
            .await
            .map_err(|_| FileError::Other("the host is shutting down; try again later".into()))?;
        let grant = Arc::clone(&self.files);
        let task = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work(&grant)
        });
        match task.await {
            Ok(result) => result,
            Err(err) => {
                tracing::error!(target: "plugin", plugin = %self.plugin, tool = %self.tool, "a file call of the plugin failed in the host: {err}");
                Err(FileError::Other(
                    "the host's storage failed during this call; try again, and report it to the operator if it persists".into(),
                ))
            }
        }
    }

    async fn read_file(&mut self, path: &str) -> Result<File, FileError> {
        self.budget.file_call(&self.plugin, &self.meter.limits)?;
        let cap = self.budget.read_cap(self.memory_bytes, &self.meter.limits);
        let path = path.to_owned();
        let file = self.blocking(move |grant| grant.read(&path, cap)).await?;
        self.budget.read(file.size);
        Ok(file)
    }

    async fn list_files(&mut self) -> Result<Vec<FileInfo>, FileError> {
        self.budget.file_call(&self.plugin, &self.meter.limits)?;
        let cap = self.budget.read_cap(self.memory_bytes, &self.meter.limits);
        let entries = self.blocking(FileGrant::list).await?;
        let bytes = listing_bytes(&entries);
        if bytes > cap.bytes() {
            return Err(cap.refuse_what(&format!("the listing of {} files", entries.len()), bytes));
        }
        self.budget.read(bytes);
        Ok(entries)
    }

    async fn write_file(
        &mut self,
        path: &str,
        content: Vec<u8>,
        content_type: Option<String>,
    ) -> Result<(), FileError> {
        self.budget.file_call(&self.plugin, &self.meter.limits)?;
        let size = content.len() as u64;
        self.files.check_write(path, size)?;
        self.budget.reserve_write(path, size, &self.meter)?;
        let path = path.to_owned();
        self.blocking(move |grant| grant.write(&path, &content, content_type.as_deref()))
            .await
    }

    async fn delete_file(&mut self, path: &str) -> Result<(), FileError> {
        self.budget.file_call(&self.plugin, &self.meter.limits)?;
        let path = path.to_owned();
        self.blocking(move |grant| grant.delete(&path)).await
    }
}

/// Each call counts against the call's budget ([`CallBudget`](super::quota::CallBudget)),
/// then runs on the blocking pool ([`ImportCtx::blocking`]).
impl Host for ImportCtx {
    async fn read(&mut self, path: String) -> Result<File, FileError> {
        let start = self.call.record().map(|record| record.now());
        let result = self.read_file(&path).await;
        if let (Some(record), Some(start)) = (self.call.record(), start) {
            let bytes = result.as_ref().map_or(0, |file| file.size);
            record.file_read(&self.redactor.redact(&path), bytes, start, result.is_ok());
        }
        self.logged("read", &path, result)
    }

    async fn list(&mut self) -> Result<Vec<FileInfo>, FileError> {
        let result = self.list_files().await;
        self.logged("list", "", result)
    }

    async fn write(
        &mut self,
        path: String,
        content: Vec<u8>,
        content_type: Option<String>,
    ) -> Result<(), FileError> {
        let start = self
            .call
            .record()
            .map(|record| (record.now(), content.len() as u64));
        let result = self.write_file(&path, content, content_type).await;
        if let (Some(record), Some((start, bytes))) = (self.call.record(), start) {
            record.file_written(&self.redactor.redact(&path), bytes, start, result.is_ok());
        }
        self.logged("write", &path, result)
    }

    async fn delete(&mut self, path: String) -> Result<(), FileError> {
        let start = self.call.record().map(|record| record.now());
        let result = self.delete_file(&path).await;
        if let (Some(record), Some(start)) = (self.call.record(), start) {
            record.file_written(&self.redactor.redact(&path), 0, start, result.is_ok());
        }
        self.logged("delete", &path, result)
    }
}
