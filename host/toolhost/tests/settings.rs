//! The file tools' settings as an embedder sees them: built through the builder and the
//! `with_*` setters only (this file is outside the crate, so no field is reachable), read
//! back through the getters, and enforced beyond their bounds exactly as the setters'
//! docs say.

use std::sync::Arc;
use std::time::Duration;

use toolhost::registry::{CallContext, Environment, Registry, ToolCall, ToolError};
use toolhost::tools::{register_vfs_tools, VfsToolOptions, WalkBudget};
use toolhost::vfs::{FilePolicy, MemoryStorage, PolicyError, Storage};

async fn call(registry: &Registry, tool: &str, arguments: &str) -> Result<(), ToolError> {
    registry
        .dispatch(
            &CallContext::new(),
            &ToolCall::new(tool, arguments),
            &Environment::default(),
        )
        .await
        .map(|_| ())
}

#[test]
fn the_options_are_built_through_the_builder_and_read_back_through_the_getters() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let budget = Arc::new(WalkBudget::new(2, 8, Duration::from_secs(1)));
    let options = VfsToolOptions::builder(Arc::clone(&storage))
        .read_only(true)
        .disable_extended(true)
        .hide_hidden_paths(true)
        .allowed_extensions(Some(vec![".md".to_owned()]))
        .max_file_bytes(10)
        .max_read_bytes(20)
        .walk_budget(Arc::clone(&budget))
        .build();
    assert!(Arc::ptr_eq(options.storage(), &storage));
    assert!(options.read_only() && options.disable_extended() && options.hide_hidden_paths());
    assert_eq!(options.allowed_extensions(), Some(&[".md".to_owned()][..]));
    assert_eq!(
        (options.max_file_bytes(), options.max_read_bytes()),
        (10, 20)
    );
    assert!(Arc::ptr_eq(options.walk_budget(), &budget));
    assert_eq!(
        options.policy(),
        FilePolicy::default()
            .with_hide_hidden_paths(true)
            .with_allowed_extensions(Some(vec![".md".to_owned()]))
            .with_max_file_bytes(10)
            .with_read_only(true)
    );
    // A builder from options changes only what it is told to.
    let changed = options.to_builder().read_only(false).build();
    assert!(!changed.read_only() && changed.disable_extended());

    // The defaults the setters state.
    let defaults = VfsToolOptions::new(storage);
    assert!(!defaults.read_only() && !defaults.disable_extended());
    assert!(!defaults.hide_hidden_paths() && defaults.allowed_extensions().is_none());
    assert_eq!(defaults.max_file_bytes(), 1024 * 1024);
    assert_eq!(defaults.max_read_bytes(), 64 * 1024 * 1024);
    assert_eq!(
        defaults.max_read_bytes(),
        toolhost::tools::DEFAULT_MAX_READ_BYTES_PER_FILE
    );
    let policy = FilePolicy::default();
    assert!(!policy.hide_hidden_paths() && !policy.read_only());
    assert_eq!(
        (policy.allowed_extensions(), policy.max_file_bytes()),
        (None, 1024 * 1024)
    );
}

#[test]
fn a_file_over_the_policys_cap_is_refused_with_both_sizes() {
    let policy = FilePolicy::default().with_max_file_bytes(10);
    assert_eq!(policy.check_size("a.md", 10), Ok(()));
    assert_eq!(
        policy.check_size("a.md", 11),
        Err(PolicyError::TooLarge {
            path: "a.md".to_owned(),
            size: 11,
            limit: 10
        })
    );
}

#[tokio::test]
async fn the_tools_refuse_files_over_max_file_bytes_and_max_read_bytes() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    storage.write("six.md", b"123456", "text/markdown").unwrap();
    let registry = Registry::new();
    let options = VfsToolOptions::builder(storage)
        .max_file_bytes(10)
        .max_read_bytes(5)
        .build();
    register_vfs_tools(&registry, options).unwrap();

    // Exactly at the write cap is written; one byte more is refused, nothing written.
    call(
        &registry,
        "write_file",
        r#"{"path": "ten.md", "content": "0123456789"}"#,
    )
    .await
    .unwrap();
    assert_eq!(
        call(
            &registry,
            "write_file",
            r#"{"path": "eleven.md", "content": "0123456789A"}"#
        )
        .await,
        Err(ToolError::FileTooLarge {
            tool: "write_file".to_owned(),
            path: "eleven.md".to_owned(),
            size: 11,
            limit: 10
        })
    );
    // A file over the read cap is not read.
    assert_eq!(
        call(&registry, "read_file", r#"{"path": "six.md"}"#).await,
        Err(ToolError::FileTooLarge {
            tool: "read_file".to_owned(),
            path: "six.md".to_owned(),
            size: 6,
            limit: 5
        })
    );
}
