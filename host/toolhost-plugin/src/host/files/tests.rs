//! Tests of the `files` import: grants, roots, the path policy (the same as the built-in
//! tools'), budgets and the blocking pool.

use std::sync::Arc;

use toolhost::vfs::{FilePolicy, Storage, StorageError};

use crate::host::file_grant::FileGrant;
use crate::host::quota::ReadCap;
use crate::host::ImportCtx;
use crate::limits::ImportLimits;
use crate::v0_2::toolhost::plugin::files::{FileError, Host};
use crate::FileAccess;
use toolhost::vfs::{FileContent, MemoryStorage};

/// A cap no test file reaches.
const CAP: ReadCap = ReadCap::Host(1 << 20);

fn storage() -> Arc<dyn Storage> {
    let storage = MemoryStorage::new();
    storage
        .write("docs/a.md", b"alpha", "text/markdown")
        .unwrap();
    storage.write("secret.md", b"top", "text/markdown").unwrap();
    storage
        .write("docs/.hidden.md", b"h", "text/markdown")
        .unwrap();
    Arc::new(storage)
}

fn grant(access: FileAccess, root: Option<&str>) -> FileGrant {
    let policy = FilePolicy::default()
        .with_hide_hidden_paths(true)
        .with_max_file_bytes(10);
    FileGrant::new("wc", access, Some(storage()), root, policy).unwrap()
}

fn denied(result: Result<impl std::fmt::Debug, FileError>) -> String {
    match result {
        Err(FileError::Denied(message)) => message,
        other => panic!("expected Denied, got {other:?}"),
    }
}

#[test]
fn no_grant_denies_everything_and_says_how_to_grant() {
    let none = grant(FileAccess::None, None);
    let message = denied(none.read("docs/a.md", CAP));
    assert_eq!(
            message,
            "plugin \"wc\" has no file access: its manifest grants none. To grant it, put `[grants] files = \"read\"` in wc.toml next to wc.wasm and start the host with `--plugin-files read`"
        );
    denied(none.list());
    assert!(denied(none.write("x.md", b"x", None)).contains("files = \"read-write\""));
    denied(none.delete("docs/a.md"));
    denied(FileGrant::none("wc").read("docs/a.md", CAP));
}

#[test]
fn read_grant_reads_and_lists_but_does_not_write() {
    let read = grant(FileAccess::Read, None);
    let file = read.read("docs/a.md", CAP).unwrap();
    assert_eq!(file.content, b"alpha");
    assert_eq!(file.content_type, "text/markdown");
    assert_eq!(file.size, 5);
    let paths: Vec<String> = read.list().unwrap().into_iter().map(|f| f.path).collect();
    assert_eq!(paths, ["docs/a.md", "secret.md"]);
    assert_eq!(
            denied(read.write("docs/b.md", b"b", None)),
            "plugin \"wc\" may only read files; writing needs `files = \"read-write\"` in wc.toml and a host started with `--plugin-files read-write`"
        );
    denied(read.delete("docs/a.md"));
}

#[test]
fn read_write_grant_writes_within_policy() {
    let rw = grant(FileAccess::ReadWrite, None);
    rw.write("notes.md", b"hi", None).unwrap();
    assert_eq!(
        rw.read("notes.md", CAP).unwrap().content_type,
        "text/markdown"
    );
    assert!(matches!(
        rw.write("big.md", &[b'x'; 11], None),
        Err(FileError::TooLarge(_))
    ));
    rw.delete("notes.md").unwrap();
    assert!(matches!(
        rw.read("notes.md", CAP),
        Err(FileError::NotFound(_))
    ));
}

#[test]
fn paths_go_through_the_policy() {
    let read = grant(FileAccess::Read, None);
    assert!(matches!(
        read.read("../etc/passwd", CAP),
        Err(FileError::InvalidPath(_))
    ));
    assert!(matches!(
        read.read("/etc/passwd", CAP),
        Err(FileError::InvalidPath(_))
    ));
    denied(read.read("docs/.hidden.md", CAP));
}

#[test]
fn root_confines_to_the_sub_tree() {
    let docs = grant(FileAccess::Read, Some("docs"));
    assert_eq!(docs.read("a.md", CAP).unwrap().content, b"alpha");
    assert!(matches!(
        docs.read("secret.md", CAP),
        Err(FileError::NotFound(_))
    ));
    assert!(matches!(
        docs.read("../secret.md", CAP),
        Err(FileError::InvalidPath(_))
    ));
    let paths: Vec<String> = docs.list().unwrap().into_iter().map(|f| f.path).collect();
    assert_eq!(paths, ["a.md"]);
}

/// A store whose reads of `slow*` block their thread for [`STALL`].
struct Slow(MemoryStorage);

const STALL: std::time::Duration = std::time::Duration::from_millis(1500);

impl Storage for Slow {
    fn read(&self, path: &str) -> Result<FileContent, StorageError> {
        if path.starts_with("slow") {
            std::thread::sleep(STALL);
        }
        self.0.read(path)
    }
    fn write(&self, path: &str, content: &[u8], content_type: &str) -> Result<(), StorageError> {
        self.0.write(path, content, content_type)
    }
    fn delete(&self, path: &str) -> Result<(), StorageError> {
        self.0.delete(path)
    }
    fn list(&self) -> Result<Vec<toolhost::vfs::FileEntry>, StorageError> {
        self.0.list()
    }
}

fn too_large<T: std::fmt::Debug>(result: Result<T, FileError>) -> String {
    match result {
        Err(FileError::TooLarge(message)) => message,
        other => panic!("expected too-large, got {other:?}"),
    }
}

fn import_ctx(limits: ImportLimits, io: usize) -> ImportCtx {
    let store = MemoryStorage::new();
    store.write("slow.md", b"slow", "").unwrap();
    store.write("fast.md", b"fast", "").unwrap();
    store.write("ten.md", b"0123456789", "").unwrap();
    let grant = FileGrant::new(
        "p",
        FileAccess::ReadWrite,
        Some(Arc::new(Slow(store))),
        None,
        FilePolicy::default(),
    )
    .unwrap();
    ImportCtx::for_test(grant, limits, io)
}

/// On a single-threaded runtime a storage call stuck for 1.5 s holds no worker: a
/// timer around the call fires at 100 ms, dropping the call (its result is lost, as
/// the plugin's call is answered `TimedOut`).
#[tokio::test(flavor = "current_thread")]
async fn a_slow_storage_call_holds_no_async_worker() {
    let mut ctx = import_ctx(ImportLimits::default(), 4);
    let started = std::time::Instant::now();
    let timed_out = tokio::time::timeout(
        std::time::Duration::from_millis(100),
        Host::read(&mut ctx, "slow.md".into()),
    )
    .await;
    assert!(timed_out.is_err(), "{timed_out:?}");
    assert!(started.elapsed() < STALL / 2, "{:?}", started.elapsed());
    let file = Host::read(&mut ctx, "fast.md".into()).await.unwrap();
    assert_eq!(file.content, b"fast");
}

/// A storage call abandoned at a deadline keeps its storage permit until it really
/// ends, so abandoned calls cannot pile up blocking threads: with one permit, the
/// next file call waits for the abandoned one.
#[tokio::test(flavor = "current_thread")]
async fn abandoned_storage_calls_hold_their_permit_until_they_end() {
    let mut ctx = import_ctx(ImportLimits::default(), 1);
    let short = std::time::Duration::from_millis(100);
    let started = std::time::Instant::now();
    assert!(
        tokio::time::timeout(short, Host::read(&mut ctx, "slow.md".into()))
            .await
            .is_err()
    );
    assert!(
        tokio::time::timeout(short, Host::read(&mut ctx, "fast.md".into()))
            .await
            .is_err()
    );
    let file = Host::read(&mut ctx, "fast.md".into()).await.unwrap();
    assert_eq!(file.content, b"fast");
    assert!(started.elapsed() >= STALL, "{:?}", started.elapsed());
}

/// Bytes read (files and listings) count against the call's read budget; a read over
/// what is left is refused with the budget's numbers, and the next call starts afresh.
#[tokio::test]
async fn reads_and_listings_count_against_the_read_budget() {
    let mut ctx = import_ctx(
        ImportLimits {
            max_read_bytes: 25,
            ..ImportLimits::default()
        },
        4,
    );
    Host::read(&mut ctx, "ten.md".into()).await.unwrap();
    Host::read(&mut ctx, "ten.md".into()).await.unwrap();
    assert_eq!(ctx.budget.read_bytes, 20);
    assert_eq!(
            too_large(Host::read(&mut ctx, "ten.md".into()).await),
            "\"ten.md\" is 10 bytes, over what is left (5 bytes) of this tool call's read budget of 25 bytes (limits.max_read_bytes); read less per call"
        );
    // The listing of 3 files takes 3 x 16 bytes plus the paths.
    assert_eq!(
            too_large(Host::list(&mut ctx).await),
            "the listing of 3 files is 68 bytes, over what is left (5 bytes) of this tool call's read budget of 25 bytes (limits.max_read_bytes); read less per call"
        );
    ctx.begin_call("t", toolhost::registry::CallContext::new());
    assert_eq!(
        Host::read(&mut ctx, "ten.md".into()).await.unwrap().size,
        10
    );
    assert_eq!(ctx.budget.file_calls, 1);
}

/// A write the grant or the policy refuses costs no quota; every write counts once.
#[tokio::test]
async fn a_refused_path_costs_no_write_quota() {
    let mut ctx = import_ctx(
        ImportLimits {
            max_files_written_per_call: 1,
            ..ImportLimits::default()
        },
        4,
    );
    assert!(matches!(
        Host::write(&mut ctx, "../x.md".into(), b"x".to_vec(), None).await,
        Err(FileError::InvalidPath(_))
    ));
    Host::write(&mut ctx, "new.md".into(), b"new".to_vec(), None)
        .await
        .unwrap();
    assert!(matches!(
        Host::write(&mut ctx, "other.md".into(), b"o".to_vec(), None).await,
        Err(FileError::Denied(m)) if m.contains("limits.max_files_written_per_call")
    ));
    assert_eq!(ctx.budget.write_bytes, 3);
    assert_eq!(ctx.files.read("new.md", CAP).unwrap().content, b"new");
    assert!(matches!(
        ctx.files.read("other.md", CAP),
        Err(FileError::NotFound(_))
    ));
}

/// The hidden-root bypass: a root on a hidden path (`.git`, `.ssh`) reaches
/// files every built-in tool refuses under `hide_hidden_paths`.
#[test]
fn a_hidden_root_reaches_nothing_the_built_ins_refuse() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    storage.write(".git/config", b"[core]", "").unwrap();
    let policy = FilePolicy::default().with_hide_hidden_paths(true);
    match FileGrant::new("wc", FileAccess::ReadWrite, Some(Arc::clone(&storage)), Some(".git"), policy) {
            Err(err) => assert_eq!(
                err.to_string(),
                "argument \"root\" is \".git\", a hidden path (a segment starts with _ or .); hidden paths are not available here, use another path"
            ),
            Ok(grant) => {
                let read = grant.read("config", CAP);
                let write = grant.write("config", b"[core]\n\tfsmonitor = evil", None);
                panic!("a hidden root was granted: read {read:?}, write {write:?}");
            }
        }
    assert_eq!(storage.read(".git/config").unwrap().content, b"[core]");
}

/// Every file a grant can address, checked as the built-in tools check their path
/// arguments: the full store path (root + path) under the same [`FilePolicy`].
///
/// For every policy combination, every root a manifest may ask for and many paths
/// (a deterministic generator over awkward segments: hidden ones, dots, extensions in
/// any case, long ones), the plugin's decision (allowed: the call reaches the store;
/// refused: `denied` / `invalid-path`) equals the built-in decision on the full path,
/// for read, write, delete and list.
#[test]
fn a_plugin_addresses_exactly_what_the_built_in_tools_allow() {
    let mut checked = 0usize;
    let cases = property::cases();
    for policy in property::policies() {
        // One store holding every valid generated path, for the listings.
        let listed = Arc::new(MemoryStorage::new());
        for (root, paths) in &cases {
            for path in paths {
                let full = property::full(root.as_deref(), path);
                let _ = listed.write(&full, b"", "");
            }
        }
        for (root, paths) in &cases {
            let root = root.as_deref();
            let Some(grant) = property::grant(&listed, root, &policy) else {
                continue;
            };
            let shown: Vec<String> = grant
                .list()
                .unwrap()
                .into_iter()
                .map(|entry| property::full(root, &entry.path))
                .collect();
            assert_eq!(
                shown,
                builtin_list(&listed, root, &policy),
                "list under root {root:?}, {policy:?}"
            );
            for path in paths {
                // A fresh store per path: generated paths may be each other's parents.
                let storage = Arc::new(MemoryStorage::new());
                let grant = property::grant(&storage, root, &policy).expect("granted above");
                let full = property::full(root, path);
                let builtin_read = policy.check("path", &full).is_ok();
                let builtin_write = builtin_read && !property::read_only(&policy);
                if builtin_read {
                    storage.write(&full, full.as_bytes(), "").unwrap();
                }
                let read = property::allowed(grant.read(path, CAP).map(|file| {
                    assert_eq!(
                        file.content,
                        full.as_bytes(),
                        "{path} under {root:?} read another file"
                    );
                }));
                assert_eq!(
                    read, builtin_read,
                    "read {path:?} under root {root:?}, {policy:?}"
                );
                let write = property::allowed(grant.write(path, b"w", None));
                assert_eq!(
                    write, builtin_write,
                    "write {path:?} under root {root:?}, {policy:?}"
                );
                if write {
                    assert_eq!(storage.read(&full).unwrap().content, b"w");
                }
                let delete = property::allowed(grant.delete(path));
                assert_eq!(
                    delete, builtin_write,
                    "delete {path:?} under root {root:?}, {policy:?}"
                );
                if builtin_read && !delete {
                    assert!(storage.read(&full).is_ok(), "{full} deleted though refused");
                }
                let outside: Vec<String> = storage
                    .list()
                    .unwrap()
                    .into_iter()
                    .map(|entry| entry.path)
                    .filter(|stored| *stored != full)
                    .collect();
                assert!(
                    outside.is_empty(),
                    "{path:?} under {root:?} wrote {outside:?}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 10_000, "only {checked} cases");
}

/// What list_files would show of the sub-tree `root`, in full store paths: every
/// stored file below it that the policy shows.
fn builtin_list(storage: &MemoryStorage, root: Option<&str>, policy: &FilePolicy) -> Vec<String> {
    storage
        .list()
        .unwrap()
        .into_iter()
        .map(|entry| entry.path)
        .filter(|path| root.is_none_or(|root| path.starts_with(&format!("{root}/"))))
        .filter(|path| policy.visible(path))
        .collect()
}

/// The generator and the glue of the property test.
mod property {
    use super::*;

    /// Segments that each break (or almost break) one rule.
    const SEGMENTS: &[&str] = &[
        "a", "notes", "b.md", "C.MD", "d.txt", "e.TxT", "x.md.bak", "md", ".md", "..md", ".git",
        ".ssh", "config", "_drafts", "_", "a_b.md", "é.md", "a b.md", ".", "..", "", "id_rsa",
        ".env", "f.Md",
    ];

    /// Every policy combination: hidden paths on/off, extensions none/one/two,
    /// read-only on/off.
    pub(super) fn policies() -> Vec<FilePolicy> {
        let mut out = Vec::new();
        for hide in [false, true] {
            for read_only in [false, true] {
                for allowed in [
                    None,
                    Some(vec![".md".to_owned()]),
                    Some(vec!["md".to_owned(), "TXT".to_owned()]),
                ] {
                    out.push(
                        FilePolicy::default()
                            .with_hide_hidden_paths(hide)
                            .with_allowed_extensions(allowed)
                            .with_read_only(read_only),
                    );
                }
            }
        }
        out
    }

    /// `root/path`, or `path` without a root.
    pub(super) fn full(root: Option<&str>, path: &str) -> String {
        match root {
            Some(root) => format!("{root}/{path}"),
            None => path.to_owned(),
        }
    }

    /// Whether the built-in tools may write at all (their writing tools are not
    /// registered under read-only).
    pub(super) fn read_only(policy: &FilePolicy) -> bool {
        policy.read_only()
    }

    /// xorshift64*: deterministic, so a failure reproduces.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn path(&mut self, max_segments: usize) -> String {
            let n = 1 + self.below(max_segments);
            (0..n)
                .map(|_| match self.below(40) {
                    // Long segments: paths valid alone but too long under a root.
                    0 => "l".repeat(250),
                    _ => SEGMENTS[self.below(SEGMENTS.len())].to_owned(),
                })
                .collect::<Vec<_>>()
                .join("/")
        }
    }

    /// Roots (none, and generated ones) with the paths tried under each.
    pub(super) fn cases() -> Vec<(Option<String>, Vec<String>)> {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut roots: Vec<Option<String>> = vec![
            None,
            Some(".git".into()),
            Some(".ssh".into()),
            Some("docs/_private".into()),
            Some("notes".into()),
            Some("notes.md".into()),
            Some(["l".repeat(250), "l".repeat(250), "l".repeat(250)].join("/")),
        ];
        for _ in 0..30 {
            roots.push(Some(rng.path(2)));
        }
        roots
            .into_iter()
            .map(|root| {
                let mut paths: Vec<String> = (0..120).map(|_| rng.path(4)).collect();
                paths.extend(["a.md", "config", ".git/config", "x/.env.md"].map(String::from));
                (root, paths)
            })
            .collect()
    }

    /// The grant of a plugin asking for `root`, or `None` when such a plugin is not
    /// loaded.
    pub(super) fn grant(
        storage: &Arc<MemoryStorage>,
        root: Option<&str>,
        policy: &FilePolicy,
    ) -> Option<FileGrant> {
        let storage: Arc<dyn Storage> = Arc::clone(storage) as Arc<dyn Storage>;
        let config = crate::PluginHostConfig {
            cache_dir: None,
            max_file_access: FileAccess::ReadWrite,
            file_policy: policy.clone(),
            ..crate::PluginHostConfig::default()
        };
        let manifest = crate::manifest::Manifest {
            grants: crate::manifest::Grants {
                // A read-only host refuses a read-write manifest at load.
                files: Some(
                    if policy.read_only() {
                        "read"
                    } else {
                        "read-write"
                    }
                    .into(),
                ),
                root: root.map(str::to_owned),
                ..Default::default()
            },
            ..Default::default()
        };
        let path = std::path::Path::new("p.toml");
        let resolved = crate::manifest::apply(path, manifest, &config).ok()?;
        // Read-write even where the manifest got less: the grant itself must
        // enforce the policy (read-only included) for library callers too.
        let grant = FileGrant::new(
            "p",
            FileAccess::ReadWrite,
            Some(storage),
            resolved.root.as_deref(),
            policy.clone(),
        );
        Some(grant.expect("a root the manifest accepts makes a grant"))
    }

    /// Whether the call reached the store: `Ok`, `not-found` or `too-large` (a size,
    /// not a path, decision) versus `denied` / `invalid-path`.
    pub(super) fn allowed<T: std::fmt::Debug>(result: Result<T, FileError>) -> bool {
        match result {
            Ok(_) | Err(FileError::NotFound(_)) => true,
            Err(FileError::Denied(_) | FileError::InvalidPath(_)) => false,
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn a_grant_without_storage_is_denied() {
    let grant = FileGrant::new("wc", FileAccess::Read, None, None, FilePolicy::default()).unwrap();
    assert!(denied(grant.read("a.md", CAP)).starts_with("the host has no file storage"));
}

/// A traced or audited call records each file call as the plugin named the path, with
/// its bytes: reads and writes that worked are listed, a refused one is a failed step
/// and not listed; a call without a record records nothing.
#[tokio::test]
async fn file_calls_are_recorded_as_named_when_the_call_has_a_record() {
    use toolhost::registry::{CallContext, CallRecord, StepKind};
    let mut ctx = import_ctx(ImportLimits::default(), 4);
    let record = Arc::new(CallRecord::new());
    ctx.call = CallContext::new().with_record(Arc::clone(&record));
    assert_eq!(
        Host::read(&mut ctx, "ten.md".into()).await.unwrap().size,
        10
    );
    assert!(Host::read(&mut ctx, "../etc/passwd".into()).await.is_err());
    Host::write(&mut ctx, "out/n.md".into(), b"abc".to_vec(), None)
        .await
        .unwrap();
    Host::delete(&mut ctx, "fast.md".into()).await.unwrap();
    {
        let touched = record.touched();
        assert_eq!(touched.files_read, ["ten.md"]);
        assert_eq!(touched.files_written, ["out/n.md", "fast.md"]);
        let steps: Vec<_> = touched
            .steps
            .iter()
            .map(|s| (s.kind.clone(), s.failed))
            .collect();
        let read = |path: &str, bytes| StepKind::FileRead {
            path: path.to_owned(),
            bytes,
        };
        let write = |path: &str, bytes| StepKind::FileWrite {
            path: path.to_owned(),
            bytes,
        };
        assert_eq!(
            steps,
            [
                (read("ten.md", 10), false),
                (read("../etc/passwd", 0), true),
                (write("out/n.md", 3), false),
                (write("fast.md", 0), false),
            ]
        );
    }
    // A plugin naming a path after one of its secret config values: the path is
    // recorded with the secret replaced, as in its log lines.
    ctx.redactor = Arc::new(crate::plugin_config::Redactor::new([
        "tok-s3cret".to_owned()
    ]));
    assert!(Host::read(&mut ctx, "leak/tok-s3cret.md".into())
        .await
        .is_err());
    {
        let touched = record.touched();
        assert_eq!(
            touched.steps[4].kind,
            StepKind::FileRead {
                path: "leak/[REDACTED].md".to_owned(),
                bytes: 0
            }
        );
    }
    // Without a record: nothing recorded anywhere (the old record is not reached).
    ctx.call = CallContext::new();
    Host::read(&mut ctx, "ten.md".into()).await.unwrap();
    assert_eq!(record.touched().steps.len(), 5);
}
