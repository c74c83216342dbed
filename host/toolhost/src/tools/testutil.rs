//! Test harness shared by the tool tests: one suite, run against every backend.
//!
//! Write a case as `async fn name(backend: Backend)`, build its harness with
//! `backend.harness(|options| ...)`, then list the case in `backend_tests!(name, ...)`:
//! the macro expands each case into one `#[tokio::test]` per backend (memory, and osfs
//! on a temporary directory).

use std::sync::Arc;

use serde_json::Value;

use super::{register_vfs_tools, VfsToolOptions};
use crate::registry::{CallContext, Environment, Registry, ToolCall, ToolError};
use crate::vfs::{MemoryStorage, OsStorage, Storage};

/// Which storage a case runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Memory,
    Os,
}

/// A registry with the file tools over one fresh store.
pub(crate) struct Harness {
    pub(crate) registry: Registry,
    pub(crate) storage: Arc<dyn Storage>,
    /// The osfs root, kept alive for the test's length.
    pub(crate) dir: Option<tempfile::TempDir>,
}

impl Backend {
    /// A harness over a fresh, empty store with the options `configure` sets.
    pub(crate) fn harness(self, configure: impl FnOnce(&mut VfsToolOptions)) -> Harness {
        let (storage, dir): (Arc<dyn Storage>, _) = match self {
            Backend::Memory => (Arc::new(MemoryStorage::new()), None),
            Backend::Os => {
                let dir = tempfile::tempdir().expect("temp dir");
                let storage = OsStorage::open(dir.path()).expect("open osfs root");
                (Arc::new(storage), Some(dir))
            }
        };
        let mut options = VfsToolOptions::new(Arc::clone(&storage));
        configure(&mut options);
        let registry = Registry::new();
        register_vfs_tools(&registry, options).expect("register file tools");
        Harness {
            registry,
            storage,
            dir,
        }
    }

    /// A harness with every option at its default.
    pub(crate) fn default_harness(self) -> Harness {
        self.harness(|_| {})
    }
}

impl Harness {
    /// Dispatches `tool` with `arguments` and returns the result content.
    pub(crate) async fn call(&self, tool: &str, arguments: Value) -> Result<Value, ToolError> {
        self.call_raw(tool, &arguments.to_string()).await
    }

    /// Dispatches `tool` with arguments given as raw text.
    pub(crate) async fn call_raw(&self, tool: &str, arguments: &str) -> Result<Value, ToolError> {
        self.registry
            .dispatch(
                &CallContext::new(),
                &ToolCall::new(tool, arguments),
                &Environment::default(),
            )
            .await
            .map(|result| result.content)
    }

    /// Stores a file directly (not through a tool).
    pub(crate) fn put(&self, path: &str, content: impl AsRef<[u8]>) {
        self.storage
            .write(path, content.as_ref(), crate::vfs::content_type_for(path))
            .expect("seed file");
    }

    /// A file's bytes, read directly, or `None` when it does not exist.
    pub(crate) fn get(&self, path: &str) -> Option<Vec<u8>> {
        self.storage.read(path).ok().map(|file| file.content)
    }

    /// Every stored path, read directly.
    pub(crate) fn paths(&self) -> Vec<String> {
        self.storage
            .list()
            .expect("list")
            .into_iter()
            .map(|entry| entry.path)
            .collect()
    }
}

/// The message of an InvalidArguments error, or a panic naming what came instead.
pub(crate) fn invalid_arguments(result: Result<Value, ToolError>) -> String {
    match result {
        Err(ToolError::InvalidArguments { message, .. }) => message,
        other => panic!("expected InvalidArguments, got {other:?}"),
    }
}

/// The message of a Failed error, or a panic naming what came instead.
pub(crate) fn failed(result: Result<Value, ToolError>) -> String {
    match result {
        Err(ToolError::Failed { message, .. }) => message,
        other => panic!("expected Failed, got {other:?}"),
    }
}

/// Expands each `async fn case(backend: Backend)` into one test per backend.
macro_rules! backend_tests {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case($crate::tools::testutil::Backend::Memory).await
                }
            )*
        }
        mod os {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case($crate::tools::testutil::Backend::Os).await
                }
            )*
        }
    };
}
pub(crate) use backend_tests;
