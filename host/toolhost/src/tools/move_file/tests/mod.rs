//! move_file cases: the shared suite on memory and osfs; failure injection on a store
//! whose writes or deletes fail on demand (`faults`); kill -9 in the middle of moves on
//! osfs (`kill`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::registry::ToolCall;
use crate::tools::testutil::{backend_tests, failed, invalid_arguments, Backend};
use crate::tools::{register_vfs_tools, VfsToolOptions};
use crate::vfs::FilePolicy;
use crate::vfs::{FileContent, FileEntry, MemoryStorage};

async fn moves_a_file(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.md", "alpha\n");
    assert_eq!(
        h.call(NAME, json!({"source": "a.md", "destination": "docs/b.md"}))
            .await,
        Ok(json!({"source": "a.md", "destination": "docs/b.md", "overwritten": false}))
    );
    assert_eq!(h.paths(), ["docs/b.md"]);
    assert_eq!(h.get("docs/b.md").as_deref(), Some(&b"alpha\n"[..]));
}

async fn an_existing_destination_needs_overwrite(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.md", "new");
    h.put("b.md", "old");
    assert_eq!(
        failed(
            h.call(NAME, json!({"source": "a.md", "destination": "b.md"}))
                .await
        ),
        "\"b.md\" already exists, so nothing was moved; set overwrite to true to replace it, or choose another destination"
    );
    let refused = h
        .call(
            NAME,
            json!({"source": "a.md", "destination": "b.md", "overwrite": false}),
        )
        .await;
    assert!(matches!(refused, Err(ToolError::Failed { .. })));
    assert_eq!(h.get("a.md").as_deref(), Some(&b"new"[..]));
    assert_eq!(h.get("b.md").as_deref(), Some(&b"old"[..]));
    assert_eq!(
        h.call(
            NAME,
            json!({"source": "a.md", "destination": "b.md", "overwrite": true})
        )
        .await,
        Ok(json!({"source": "a.md", "destination": "b.md", "overwritten": true}))
    );
    assert_eq!(h.paths(), ["b.md"]);
    assert_eq!(h.get("b.md").as_deref(), Some(&b"new"[..]));
}

async fn a_case_only_rename_leaves_one_file(backend: Backend) {
    let h = backend.default_harness();
    h.put("Readme.md", "# Hello\n");
    h.put("docs/Guide.md", "guide");
    assert_eq!(
        h.call(
            NAME,
            json!({"source": "Readme.md", "destination": "README.md"})
        )
        .await,
        Ok(json!({"source": "Readme.md", "destination": "README.md", "overwritten": false}))
    );
    h.call(
        NAME,
        json!({"source": "docs/Guide.md", "destination": "docs/GUIDE.md"}),
    )
    .await
    .expect("rename in a directory");
    assert_eq!(h.paths(), ["README.md", "docs/GUIDE.md"]);
    assert_eq!(h.get("README.md").as_deref(), Some(&b"# Hello\n"[..]));
    assert_eq!(h.get("docs/GUIDE.md").as_deref(), Some(&b"guide"[..]));
}

async fn a_case_only_rename_onto_a_distinct_file_needs_overwrite(backend: Backend) {
    // Both backends are case-sensitive here, so both names can exist.
    let h = backend.default_harness();
    h.put("Readme.md", "mine");
    h.put("README.md", "theirs");
    let message = failed(
        h.call(
            NAME,
            json!({"source": "Readme.md", "destination": "README.md"}),
        )
        .await,
    );
    assert!(
        message.starts_with("\"README.md\" already exists"),
        "{message}"
    );
    assert_eq!(h.paths(), ["README.md", "Readme.md"]);
    assert_eq!(
        h.call(
            NAME,
            json!({"source": "Readme.md", "destination": "README.md", "overwrite": true})
        )
        .await,
        Ok(json!({"source": "Readme.md", "destination": "README.md", "overwritten": true}))
    );
    assert_eq!(h.paths(), ["README.md"]);
    assert_eq!(h.get("README.md").as_deref(), Some(&b"mine"[..]));
}

async fn source_missing_or_same_as_destination(backend: Backend) {
    let h = backend.default_harness();
    h.put("b.md", "x");
    assert_eq!(
        failed(h.call(NAME, json!({"source": "a.md", "destination": "c.md"})).await),
        "there is no file at \"a.md\" (argument \"source\"), so nothing was moved; call list_files to see which files exist"
    );
    assert_eq!(
        invalid_arguments(h.call(NAME, json!({"source": "b.md", "destination": "b.md"})).await),
        "arguments \"source\" and \"destination\" are the same path (\"b.md\"); give a destination that differs, nothing was moved"
    );
    assert_eq!(
        invalid_arguments(h.call(NAME, json!({"source": "b.md"})).await),
        "argument \"destination\" is required"
    );
    assert_eq!(
        invalid_arguments(
            h.call(
                NAME,
                json!({"source": "b.md", "destination": "c.md", "overwrite": "yes"})
            )
            .await
        ),
        "argument \"overwrite\" must be a boolean, got string"
    );
    assert_eq!(h.paths(), ["b.md"]);
}

async fn the_size_cap_applies_to_moved_files(backend: Backend) {
    let h = backend.harness(|options| options.max_file_bytes = 10);
    h.put("big.md", "01234567890");
    h.put("fits.md", "0123456789");
    assert_eq!(
        h.call(NAME, json!({"source": "big.md", "destination": "b.md"}))
            .await,
        Err(ToolError::FileTooLarge {
            tool: NAME.into(),
            path: "b.md".into(),
            size: 11,
            limit: 10
        })
    );
    assert_eq!(h.get("big.md").as_deref(), Some(&b"01234567890"[..]));
    h.call(NAME, json!({"source": "fits.md", "destination": "f.md"}))
        .await
        .expect("10 bytes fit");
    assert_eq!(h.paths(), ["big.md", "f.md"]);
}

async fn the_policy_checks_both_paths(backend: Backend) {
    let h = backend.harness(|options| {
        options.hide_hidden_paths = true;
        options.allowed_extensions = Some(vec![".md".into()]);
    });
    h.put("a.md", "x");
    h.put(".env", "SECRET");
    let cases = [
        (
            json!({"source": "a.md", "destination": ".env"}),
            "argument \"destination\" is \".env\", a hidden path",
        ),
        (
            json!({"source": ".env", "destination": "b.md"}),
            "argument \"source\" is \".env\", a hidden path",
        ),
        (
            json!({"source": "a.md", "destination": "a.rs"}),
            "argument \"destination\" is \"a.rs\", whose extension is not allowed",
        ),
        (
            json!({"source": "a.md", "destination": "../a.md"}),
            "argument \"destination\" contains a \"..\" segment",
        ),
    ];
    for (args, start) in cases {
        let message = invalid_arguments(h.call(NAME, args).await);
        assert!(message.starts_with(start), "{message}");
    }
    assert_eq!(h.paths(), [".env", "a.md"]);
}

async fn content_type_follows_the_extension(backend: Backend) {
    let h = backend.default_harness();
    h.storage.write("data", b"a,b", "text/csv").expect("seed");
    h.call(NAME, json!({"source": "data", "destination": "data2"}))
        .await
        .expect("move");
    h.call(NAME, json!({"source": "data2", "destination": "data.json"}))
        .await
        .expect("move");
    let kept = match backend {
        Backend::Memory => "text/csv",
        Backend::Os => "text/markdown",
    };
    let stored = |path| h.storage.read(path).expect("read").content_type;
    h.storage.write("data3", b"a,b", "text/csv").expect("seed");
    h.call(NAME, json!({"source": "data3", "destination": "data4"}))
        .await
        .expect("move");
    assert_eq!(stored("data4"), kept);
    assert_eq!(stored("data.json"), "application/json");
}

async fn registered_only_with_writes_and_extended(backend: Backend) {
    assert!(backend.default_harness().registry.has(NAME));
    assert!(!backend.harness(|o| o.read_only = true).registry.has(NAME));
    assert!(!backend
        .harness(|o| o.disable_extended = true)
        .registry
        .has(NAME));
}

backend_tests!(
    moves_a_file,
    an_existing_destination_needs_overwrite,
    a_case_only_rename_leaves_one_file,
    a_case_only_rename_onto_a_distinct_file_needs_overwrite,
    source_missing_or_same_as_destination,
    the_size_cap_applies_to_moved_files,
    the_policy_checks_both_paths,
    content_type_follows_the_extension,
    registered_only_with_writes_and_extended,
);

#[cfg(unix)]
#[tokio::test]
async fn a_renamed_file_keeps_its_mode_on_osfs() {
    use std::os::unix::fs::PermissionsExt;
    let h = Backend::Os.default_harness();
    h.put("secret.md", "x");
    let root = h.dir.as_ref().expect("osfs root").path().to_owned();
    std::fs::set_permissions(
        root.join("secret.md"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("chmod");
    h.call(
        NAME,
        json!({"source": "secret.md", "destination": "moved.md"}),
    )
    .await
    .expect("move");
    let mode = std::fs::metadata(root.join("moved.md"))
        .expect("stat")
        .permissions()
        .mode();
    // A rename moves the file itself: a private file stays private.
    assert_eq!(mode & 0o777, 0o600);
}

async fn call(registry: &Registry, args: Value) -> Result<Value, ToolError> {
    registry
        .dispatch(
            &CallContext::new(),
            &ToolCall::new(NAME, args.to_string()),
            &crate::registry::Environment::default(),
        )
        .await
        .map(|result| result.content)
}

mod faults;
mod kill;
