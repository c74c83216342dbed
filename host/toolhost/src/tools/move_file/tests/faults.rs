//! Failure injection: a store whose writes or deletes fail on demand, a call stopped
//! midway, cleanup limits and staging paths. Nothing may be lost.

use super::*;

/// A memory store whose writes and deletes fail for the paths the predicates pick.
struct Faulty {
    inner: MemoryStorage,
    fail_write: Box<dyn Fn(&str) -> bool + Send + Sync>,
    fail_delete: Box<dyn Fn(&str) -> bool + Send + Sync>,
}

fn fault(path: &str) -> StorageError {
    StorageError::io(path, std::io::Error::other("injected fault"))
}

impl Storage for Faulty {
    fn read(&self, path: &str) -> Result<FileContent, StorageError> {
        self.inner.read(path)
    }
    fn write(&self, path: &str, content: &[u8], content_type: &str) -> Result<(), StorageError> {
        if (self.fail_write)(path) {
            return Err(fault(path));
        }
        self.inner.write(path, content, content_type)
    }
    fn delete(&self, path: &str) -> Result<(), StorageError> {
        if (self.fail_delete)(path) {
            return Err(fault(path));
        }
        self.inner.delete(path)
    }
    fn list(&self) -> Result<Vec<FileEntry>, StorageError> {
        self.inner.list()
    }
}

/// A registry over a [`Faulty`] store seeded with `files`.
fn faulty(
    files: &[(&str, &str)],
    fail_write: impl Fn(&str) -> bool + Send + Sync + 'static,
    fail_delete: impl Fn(&str) -> bool + Send + Sync + 'static,
) -> (Registry, Arc<Faulty>) {
    let storage = Arc::new(Faulty {
        inner: MemoryStorage::new(),
        fail_write: Box::new(fail_write),
        fail_delete: Box::new(fail_delete),
    });
    for (path, content) in files {
        storage
            .inner
            .write(path, content.as_bytes(), "")
            .expect("seed");
    }
    let registry = Registry::new();
    register_vfs_tools(
        &registry,
        VfsToolOptions::new(Arc::clone(&storage) as Arc<dyn Storage>),
    )
    .expect("register");
    (registry, storage)
}

/// Every path and its content.
fn files(storage: &Faulty) -> Vec<(String, String)> {
    let list = storage.inner.list().expect("list");
    list.into_iter()
        .map(|entry| {
            let content = storage.inner.read(&entry.path).expect("read").content;
            (entry.path, String::from_utf8(content).expect("utf-8"))
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(p, c)| ((*p).to_owned(), (*c).to_owned()))
        .collect()
}

#[tokio::test]
async fn a_failed_delete_leaves_both_and_says_so() {
    let (registry, storage) = faulty(&[("a.md", "x")], |_| false, |p| p == "a.md");
    assert_eq!(
        failed(call(&registry, json!({"source": "a.md", "destination": "b.md"})).await),
        "wrote \"b.md\", but could not delete \"a.md\" (input/output error on \"a.md\": injected fault); both files now exist with the same content. Delete \"a.md\" with delete_file to finish the move"
    );
    assert_eq!(files(&storage), pairs(&[("a.md", "x"), ("b.md", "x")]));
}

#[tokio::test]
async fn a_failed_write_changes_nothing() {
    let (registry, storage) = faulty(&[("a.md", "x")], |p| p == "b.md", |_| false);
    let message = failed(call(&registry, json!({"source": "a.md", "destination": "b.md"})).await);
    assert_eq!(
        message,
        "input/output error on \"b.md\": injected fault; try again, or try another path"
    );
    assert_eq!(files(&storage), pairs(&[("a.md", "x")]));
}

#[tokio::test]
async fn case_only_failures_restore_the_source() {
    let rename = json!({"source": "Readme.md", "destination": "README.md"});
    let staged = |p: &str| p.starts_with(".Readme.md.move-");

    // The staging write fails: nothing changed.
    let (registry, storage) = faulty(&[("Readme.md", "x")], staged, |_| false);
    let message = failed(call(&registry, rename.clone()).await);
    assert!(
        message.starts_with("could not stage the rename of \"Readme.md\" in \".Readme.md.move-"),
        "{message}"
    );
    assert!(message.ends_with("; nothing was changed"), "{message}");
    assert_eq!(files(&storage), pairs(&[("Readme.md", "x")]));

    // Deleting the source fails: the staging file is removed again.
    let (registry, storage) = faulty(&[("Readme.md", "x")], |_| false, |p| p == "Readme.md");
    let message = failed(call(&registry, rename.clone()).await);
    assert!(
        message.starts_with("could not delete \"Readme.md\" to rename it (input/output error"),
        "{message}"
    );
    assert!(message.ends_with("); nothing was changed"), "{message}");
    assert_eq!(files(&storage), pairs(&[("Readme.md", "x")]));

    // Writing the destination fails: the source is written back, the staging file removed.
    let (registry, storage) = faulty(&[("Readme.md", "x")], |p| p == "README.md", |_| false);
    assert_eq!(
        failed(call(&registry, rename.clone()).await),
        "could not write \"README.md\" (input/output error on \"README.md\": injected fault); \"Readme.md\" was restored, so nothing was changed"
    );
    assert_eq!(files(&storage), pairs(&[("Readme.md", "x")]));

    // Restoring fails too: the content is kept in the staging file, and the error says where.
    let (registry, storage) = faulty(
        &[("Readme.md", "x")],
        |p| p.eq_ignore_ascii_case("readme.md"),
        |_| false,
    );
    let message = failed(call(&registry, rename.clone()).await);
    let kept = files(&storage);
    assert_eq!(kept.len(), 1);
    let (staging, content) = &kept[0];
    assert!(
        staging.starts_with(".Readme.md.move-") && staging.len() == 16 + 32,
        "{staging}"
    );
    assert_eq!(content, "x");
    assert!(
        message.ends_with(&format!("restoring \"Readme.md\" failed too (input/output error on \"Readme.md\": injected fault); its content is kept in \"{staging}\"")),
        "{message}"
    );

    // Only the final removal of the staging file fails: the rename stands.
    let (registry, storage) = faulty(&[("Readme.md", "x")], |_| false, staged);
    assert_eq!(
        call(&registry, rename).await,
        Ok(json!({"source": "Readme.md", "destination": "README.md", "overwritten": false}))
    );
    let kept = files(&storage);
    assert_eq!(kept.len(), 2);
    assert!(kept[0].0.starts_with(".Readme.md.move-"));
    assert_eq!(kept[1], ("README.md".to_owned(), "x".to_owned()));
}

#[test]
fn a_stopped_call_changes_nothing() {
    for destination in ["b.md", "A.MD"] {
        let storage = Arc::new(MemoryStorage::new());
        storage.write("a.md", b"x", "").expect("seed");
        let token = CancellationToken::new();
        token.cancel();
        let job = Move {
            ctx: CallContext::new().with_cancellation(token),
            tools: Arc::new(FileTools {
                storage: Arc::clone(&storage) as Arc<dyn Storage>,
                policy: FilePolicy::default(),
                max_read_bytes: crate::tools::DEFAULT_MAX_READ_BYTES_PER_FILE,
                walks: crate::tools::WalkBudget::shared(),
            }),
            storage: Arc::clone(&storage) as Arc<dyn Storage>,
            source: "a.md".into(),
            destination: destination.into(),
            overwrite: false,
        };
        assert_eq!(job.run(), Err(ToolError::Cancelled { tool: NAME.into() }));
        let paths: Vec<_> = storage
            .list()
            .expect("list")
            .into_iter()
            .map(|e| e.path)
            .collect();
        assert_eq!(paths, ["a.md"], "{destination}");
    }
}

#[test]
fn a_cleanup_step_gives_up_at_its_limit() {
    let started = Instant::now();
    let outcome = bounded(Duration::from_millis(50), || {
        std::thread::sleep(Duration::from_secs(2));
        Ok(())
    });
    assert!(
        matches!(outcome, Err(StepError::TimedOut(limit)) if limit == Duration::from_millis(50))
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(
        StepError::TimedOut(CLEANUP_STEP_LIMIT).to_string(),
        "gave up after 30s"
    );
    assert!(bounded(Duration::from_secs(5), || Ok(())).is_ok());
    let err = bounded(Duration::from_secs(5), || Err(fault("x"))).unwrap_err();
    assert!(matches!(err, StepError::Storage(StorageError::Io { .. })));
}

#[test]
fn staging_paths_stay_in_the_directory_and_within_limits() {
    let staged = staging_path("docs/Readme.md");
    assert!(staged.starts_with("docs/.Readme.md.move-"), "{staged}");
    assert_eq!(staged.len(), "docs/.Readme.md.move-".len() + 32);
    assert!(crate::vfs::validate_path("path", &staged).is_ok());
    let long = "n".repeat(250);
    let staged = staging_path(&format!("d/{long}"));
    assert!(
        staged.starts_with("d/.move-") && staged.len() == 8 + 32,
        "{staged}"
    );
    assert_eq!(extension("a/b.tar.GZ"), "GZ");
    assert_eq!(extension("a.d/file"), "");
}
