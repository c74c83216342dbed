//! Hostile: one read of a huge file (200 GiB, sparse) must neither abort nor exhaust the
//! host, through the storage and through every reading tool.

use std::sync::Arc;

use tempfile::TempDir;
use toolhost::vfs::{FileEntry, OsStorage, Storage, StorageError, MAX_READ_BYTES};

/// 200 GiB: far more than this machine's memory, so a read that allocates the file's size
/// up front aborts the process (`memory allocation ... failed`).
const SPARSE_SIZE: u64 = 200 << 30;

/// An OsStorage root holding `big.bin`, a 200 GiB sparse file (no disk blocks used).
fn sparse_root() -> (TempDir, Arc<OsStorage>) {
    let dir = tempfile::tempdir().unwrap();
    let file = std::fs::File::create(dir.path().join("big.bin")).unwrap();
    file.set_len(SPARSE_SIZE).unwrap();
    let storage = Arc::new(OsStorage::open(dir.path()).unwrap());
    (dir, storage)
}

fn tool_registry(storage: Arc<dyn Storage>) -> toolhost::registry::Registry {
    let registry = toolhost::registry::Registry::new();
    toolhost::tools::register_vfs_tools(&registry, toolhost::tools::VfsToolOptions::new(storage))
        .unwrap();
    registry
}

async fn call_tool(
    registry: &toolhost::registry::Registry,
    tool: &str,
    args: serde_json::Value,
) -> Result<serde_json::Value, toolhost::registry::ToolError> {
    registry
        .dispatch(
            &toolhost::registry::CallContext::new(),
            &toolhost::registry::ToolCall::new(tool, args.to_string()),
            &toolhost::registry::Environment::default(),
        )
        .await
        .map(|result| result.content)
}

#[tokio::test]
async fn hostile_a_200_gib_sparse_file_is_refused_by_every_reading_tool() {
    use serde_json::json;
    use toolhost::registry::ToolError;
    let (dir, storage) = sparse_root();
    let registry = tool_registry(storage);
    let too_large = |tool: &str, path: &str, limit: u64| ToolError::FileTooLarge {
        tool: tool.into(),
        path: path.into(),
        size: SPARSE_SIZE,
        limit,
    };
    let read_cap = 64 << 20;
    let file_cap = 1 << 20;
    let err = call_tool(&registry, "read_file", json!({"path": "big.bin"}))
        .await
        .unwrap_err();
    assert_eq!(err, too_large("read_file", "big.bin", read_cap));
    assert_eq!(
        err.to_string(),
        "read_file: \"big.bin\" at 214748364800 bytes is over this tool's file size limit of 67108864 bytes; nothing was changed. Write less or split the content over several files; a file this large cannot be read or edited by this tool"
    );
    let edit = json!({"path": "big.bin", "old_string": "a", "new_string": "b"});
    assert_eq!(
        call_tool(&registry, "edit_file", edit).await,
        Err(too_large("edit_file", "big.bin", file_cap))
    );
    let edits = json!({"path": "big.bin", "edits": [{"old_string": "a", "new_string": "b"}]});
    assert_eq!(
        call_tool(&registry, "multi_edit", edits).await,
        Err(too_large("multi_edit", "big.bin", file_cap))
    );
    // move_file names the destination it would have written, as for any file over the cap.
    for destination in ["moved.bin", "BIG.bin"] {
        let args = json!({"source": "big.bin", "destination": destination});
        assert_eq!(
            call_tool(&registry, "move_file", args).await,
            Err(too_large("move_file", destination, file_cap))
        );
    }
    // The process is alive and the file untouched.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["big.bin"]);
    assert_eq!(
        std::fs::metadata(dir.path().join("big.bin")).unwrap().len(),
        SPARSE_SIZE
    );
}

/// An OsStorage whose listing says every file is 1 byte: a file that grew to 200 GiB
/// between grep's listing (which skips files listed over the cap) and its read.
struct GrewAfterListing(Arc<OsStorage>);

impl Storage for GrewAfterListing {
    fn read(&self, path: &str) -> Result<toolhost::vfs::FileContent, StorageError> {
        self.0.read(path)
    }
    fn read_capped(
        &self,
        path: &str,
        max_bytes: u64,
    ) -> Result<toolhost::vfs::FileContent, StorageError> {
        self.0.read_capped(path, max_bytes)
    }
    fn write(&self, path: &str, content: &[u8], content_type: &str) -> Result<(), StorageError> {
        self.0.write(path, content, content_type)
    }
    fn delete(&self, path: &str) -> Result<(), StorageError> {
        self.0.delete(path)
    }
    fn list(&self) -> Result<Vec<FileEntry>, StorageError> {
        let mut listed = self.0.list()?;
        for entry in &mut listed {
            entry.size = 1;
        }
        Ok(listed)
    }
}

#[tokio::test]
async fn hostile_grep_skips_a_file_that_grew_to_200_gib_after_the_listing() {
    use serde_json::json;
    let (dir, storage) = sparse_root();
    std::fs::write(dir.path().join("small.md"), b"needle\n").unwrap();
    let registry = tool_registry(Arc::new(GrewAfterListing(storage)));
    assert_eq!(
        call_tool(&registry, "grep", json!({"pattern": "needle"})).await,
        Ok(json!({"matches": ["small.md:1:needle"], "truncated": true}))
    );
}

#[test]
fn os_plain_read_is_bounded_too() {
    let (_dir, storage) = sparse_root();
    match storage.read("big.bin") {
        Err(StorageError::FileTooLarge { path, size, limit }) => {
            assert_eq!(
                (path.as_str(), size, limit),
                ("big.bin", SPARSE_SIZE, MAX_READ_BYTES)
            );
        }
        other => panic!("{other:?}"),
    }
    match storage.read_capped("big.bin", 1 << 20) {
        Err(StorageError::FileTooLarge { size, limit, .. }) => {
            assert_eq!((size, limit), (SPARSE_SIZE, 1 << 20));
        }
        other => panic!("{other:?}"),
    }
}
