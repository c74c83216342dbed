//! One storage suite, run against every backend: `MemoryStorage`, `OsStorage` on a temp
//! dir, and a `ScopedStorage` over each (whose wrapped store also holds sibling files the
//! scoped view must never show). Then the escape attempts on `OsStorage`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tempfile::TempDir;
use toolhost::vfs::{
    scope, FileEntry, MemoryStorage, OsStorage, PathErrorReason, Storage, StorageError,
    MAX_READ_BYTES,
};

/// A store under test, plus whatever must live as long as it.
struct Backend {
    storage: Arc<dyn Storage>,
    _dir: Option<TempDir>,
}

fn memory() -> Backend {
    Backend {
        storage: Arc::new(MemoryStorage::new()),
        _dir: None,
    }
}

fn os() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    Backend {
        storage: Arc::new(OsStorage::open(dir.path()).unwrap()),
        _dir: Some(dir),
    }
}

/// Wraps `inner` in a scope `tenant/a`, next to files the view must not see.
fn scoped(inner: Backend) -> Backend {
    for sibling in ["tenant/ab/x.md", "tenant/a.md", "tenant/b/a/x.md", "top.md"] {
        inner.storage.write(sibling, b"sibling", "").unwrap();
    }
    Backend {
        storage: Arc::new(scope(Arc::clone(&inner.storage), "tenant/a").unwrap()),
        _dir: inner._dir,
    }
}

/// Expands a case `fn name(s: &dyn Storage)` into one `#[test]` per backend.
macro_rules! vfs_test {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn memory() {
                super::$name(&*super::memory().storage)
            }
            #[test]
            fn os() {
                let b = super::os();
                super::$name(&*b.storage)
            }
            #[test]
            fn scoped_memory() {
                super::$name(&*super::scoped(super::memory()).storage)
            }
            #[test]
            fn scoped_os() {
                let b = super::scoped(super::os());
                super::$name(&*b.storage)
            }
        }
    )*};
}

vfs_test!(
    write_then_read,
    replace,
    delete,
    list_is_sorted_and_complete,
    missing_file,
    content_types,
    updated_at_and_size,
    binary_and_empty_content,
    invalid_paths_on_every_method,
    directories_are_not_files,
    deleting_the_last_file_frees_the_directory_name,
    exists_agrees_with_read,
    read_capped_checks_the_size_first,
    write_if_unchanged_keeps_another_writers_change,
    rename_moves_one_file,
    rename_refuses_what_write_and_read_refuse,
    rename_only_changing_case,
);

fn paths(s: &dyn Storage) -> Vec<String> {
    s.list().unwrap().into_iter().map(|f| f.path).collect()
}

fn write_then_read(s: &dyn Storage) {
    s.write("notes/todo.md", b"- ship it\n", "").unwrap();
    let f = s.read("notes/todo.md").unwrap();
    assert_eq!(f.content, b"- ship it\n");
    assert_eq!(f.size, 10);
    assert_eq!(f.content_type, "text/markdown");
    assert_eq!(paths(s), ["notes/todo.md"]);
    s.write("deep/er/still/ünï 文件.txt", "ü".as_bytes(), "")
        .unwrap();
    assert_eq!(
        s.read("deep/er/still/ünï 文件.txt").unwrap().content,
        "ü".as_bytes()
    );
}

fn replace(s: &dyn Storage) {
    s.write("a.md", b"first version, longer", "").unwrap();
    s.write("a.md", b"second", "").unwrap();
    let f = s.read("a.md").unwrap();
    assert_eq!((f.content.as_slice(), f.size), (&b"second"[..], 6));
    let list = s.list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!((list[0].path.as_str(), list[0].size), ("a.md", 6));
}

fn delete(s: &dyn Storage) {
    s.write("d/a.md", b"x", "").unwrap();
    s.write("d/b.md", b"y", "").unwrap();
    s.delete("d/a.md").unwrap();
    assert_eq!(paths(s), ["d/b.md"]);
    let err = s.read("d/a.md").unwrap_err();
    assert!(
        matches!(&err, StorageError::NotFound { path } if path == "d/a.md"),
        "{err:?}"
    );
    let err = s.delete("d/a.md").unwrap_err();
    assert_eq!(
        err.to_string(),
        "no file at \"d/a.md\"; call list_files to see what exists"
    );
    s.delete("d/b.md").unwrap();
    assert_eq!(paths(s), Vec::<String>::new());
}

fn list_is_sorted_and_complete(s: &dyn Storage) {
    for (p, c) in [
        ("b.md", "bb"),
        ("a/c.md", "c"),
        ("a.md", "a"),
        ("a/b/d.txt", "dddd"),
        ("Z.md", ""),
        (".hidden/x", "hh"),
        ("_draft.md", "d"),
    ] {
        s.write(p, c.as_bytes(), "").unwrap();
    }
    let list: Vec<(String, u64)> = s
        .list()
        .unwrap()
        .into_iter()
        .map(|f| (f.path, f.size))
        .collect();
    let want = [
        (".hidden/x", 2),
        ("Z.md", 0),
        ("_draft.md", 1),
        ("a.md", 1),
        ("a/b/d.txt", 4),
        ("a/c.md", 1),
        ("b.md", 2),
    ];
    let want: Vec<(String, u64)> = want.iter().map(|(p, n)| (p.to_string(), *n)).collect();
    assert_eq!(list, want);
}

fn missing_file(s: &dyn Storage) {
    s.write("here.md", b"x", "").unwrap();
    for p in ["nope.md", "here.md/below", "no/such/dir.md"] {
        match s.read(p) {
            Err(StorageError::NotFound { path }) => assert_eq!(path, p),
            other => panic!("{p}: {other:?}"),
        }
    }
    assert_eq!(
        s.read("nope.md").unwrap_err().to_string(),
        "no file at \"nope.md\"; call list_files to see what exists"
    );
}

fn content_types(s: &dyn Storage) {
    for (p, want) in [
        ("README", "text/markdown"),
        ("x.unknown", "text/markdown"),
        ("data.JSON", "application/json"),
        ("img/logo.PNG", "image/png"),
        ("src/main.rs", "text/x-rust"),
        ("conf.yml", "application/yaml"),
        ("page.html", "text/html"),
    ] {
        s.write(p, b"x", "").unwrap();
        assert_eq!(s.read(p).unwrap().content_type, want, "{p}");
    }
}

fn updated_at_and_size(s: &dyn Storage) {
    let slack = Duration::from_secs(2);
    let before = SystemTime::now() - slack;
    s.write("t.md", b"12345", "").unwrap();
    let after = SystemTime::now() + slack;
    let f = s.read("t.md").unwrap();
    assert!(
        f.updated_at >= before && f.updated_at <= after,
        "{:?}",
        f.updated_at
    );
    let entry: FileEntry = s.list().unwrap().remove(0);
    assert_eq!(
        entry,
        FileEntry {
            path: "t.md".into(),
            size: 5,
            updated_at: f.updated_at
        }
    );
    std::thread::sleep(Duration::from_millis(20));
    s.write("t.md", b"1234567", "").unwrap();
    let g = s.read("t.md").unwrap();
    assert!(g.updated_at > f.updated_at);
    assert_eq!(g.size, 7);
    assert_eq!(s.list().unwrap()[0].size, 7);
}

fn binary_and_empty_content(s: &dyn Storage) {
    let all: Vec<u8> = (0..=255).collect();
    s.write("bin.dat", &all, "application/octet-stream")
        .unwrap();
    s.write("empty.md", b"", "").unwrap();
    assert_eq!(s.read("bin.dat").unwrap().content, all);
    let e = s.read("empty.md").unwrap();
    assert_eq!((e.content.len(), e.size), (0, 0));
}

fn invalid_paths_on_every_method(s: &dyn Storage) {
    let long = "a".repeat(10_000);
    let cases = [
        ("", PathErrorReason::Empty),
        ("../x", PathErrorReason::DotDot),
        ("a/../../x", PathErrorReason::DotDot),
        ("/etc/passwd", PathErrorReason::Absolute),
        ("a\0b", PathErrorReason::Nul),
        ("a\\b", PathErrorReason::Backslash),
        ("C:/x", PathErrorReason::Drive),
        ("./a", PathErrorReason::DotSegment),
        ("a//b", PathErrorReason::EmptySegment),
        ("a/", PathErrorReason::TrailingSlash),
        (long.as_str(), PathErrorReason::TooLong),
    ];
    for (p, want) in cases {
        let results = [s.read(p).map(drop), s.write(p, b"x", ""), s.delete(p)];
        for r in results {
            match r {
                Err(StorageError::InvalidPath(e)) => {
                    assert_eq!(
                        (e.argument.as_str(), e.path.as_str(), e.reason),
                        ("path", p, want)
                    );
                }
                other => panic!("{p:?}: {other:?}"),
            }
        }
    }
    assert_eq!(paths(s), Vec::<String>::new());
}

fn directories_are_not_files(s: &dyn Storage) {
    s.write("a/x.md", b"x", "").unwrap();
    for r in [s.read("a").map(drop), s.write("a", b"y", ""), s.delete("a")] {
        match r {
            Err(StorageError::IsDirectory { path }) => assert_eq!(path, "a"),
            other => panic!("{other:?}"),
        }
    }
    match s.write("a/x.md/y.md", b"y", "") {
        Err(StorageError::ParentIsFile { path, parent }) => {
            assert_eq!((path.as_str(), parent.as_str()), ("a/x.md/y.md", "a/x.md"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.read("a/x.md").unwrap().content, b"x");
    assert_eq!(paths(s), ["a/x.md"]);
}

fn deleting_the_last_file_frees_the_directory_name(s: &dyn Storage) {
    s.write("a/b/c.md", b"x", "").unwrap();
    s.delete("a/b/c.md").unwrap();
    s.write("a", b"now a file", "").unwrap();
    assert_eq!(paths(s), ["a"]);
}

// ---------------------------------------------------------------------------------------
// OsStorage only: escape attempts and atomicity.

/// A root inside a temp dir, next to an `outside` dir holding a secret and a `passwd`.
struct Jail {
    tmp: TempDir,
    storage: OsStorage,
}

const SECRET: &[u8] = b"TOP SECRET, do not leak";

impl Jail {
    fn new() -> Jail {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("root/real")).unwrap();
        std::fs::create_dir_all(tmp.path().join("outside/etc")).unwrap();
        std::fs::write(tmp.path().join("outside/secret.txt"), SECRET).unwrap();
        std::fs::write(tmp.path().join("outside/etc/passwd"), SECRET).unwrap();
        std::fs::write(tmp.path().join("root/real/inside.md"), b"inside").unwrap();
        let storage = OsStorage::open(tmp.path().join("root")).unwrap();
        Jail { tmp, storage }
    }

    fn root(&self) -> PathBuf {
        self.tmp.path().join("root")
    }

    fn outside(&self) -> PathBuf {
        self.tmp.path().join("outside")
    }

    #[cfg(unix)]
    fn link(&self, name: &str, target: &Path) {
        std::os::unix::fs::symlink(target, self.root().join(name)).unwrap();
    }

    /// Every file under the temp dir but outside the root, with its bytes.
    fn outside_snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        snapshot(self.tmp.path(), &self.root(), &mut out);
        out
    }
}

fn snapshot(dir: &Path, skip: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let md = std::fs::symlink_metadata(&path).unwrap();
        if path == skip {
            continue;
        } else if md.is_dir() {
            snapshot(&path, skip, out);
        } else {
            out.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
        }
    }
}

fn all_names(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        out.push(entry.file_name().to_string_lossy().into_owned());
        if entry.file_type().unwrap().is_dir() {
            all_names(&entry.path(), out);
        }
    }
}

fn assert_denied(r: Result<(), StorageError>, want_path: &str) {
    match r {
        Err(StorageError::Denied { path, reason }) => {
            assert_eq!(path, want_path);
            assert!(reason.contains("symbolic link"), "{reason}");
        }
        other => panic!("{want_path}: {other:?}"),
    }
}

fn assert_invalid(r: Result<(), StorageError>, want: PathErrorReason) {
    match r {
        Err(StorageError::InvalidPath(e)) => assert_eq!(e.reason, want),
        other => panic!("{other:?}"),
    }
}

#[test]
fn os_escape_by_path_is_refused() {
    let jail = Jail::new();
    let s = &jail.storage;
    let before = jail.outside_snapshot();
    let long = "a".repeat(10_000);
    for (p, want) in [
        ("../x", PathErrorReason::DotDot),
        ("../outside/secret.txt", PathErrorReason::DotDot),
        ("a/../../x", PathErrorReason::DotDot),
        ("real/../../outside/secret.txt", PathErrorReason::DotDot),
        ("/etc/passwd", PathErrorReason::Absolute),
        ("a\0b", PathErrorReason::Nul),
        ("../outside/secret.txt\0", PathErrorReason::Nul),
        (long.as_str(), PathErrorReason::TooLong),
    ] {
        assert_invalid(s.read(p).map(drop), want);
        assert_invalid(s.write(p, b"pwned", ""), want);
        assert_invalid(s.delete(p), want);
    }
    assert_eq!(jail.outside_snapshot(), before);
    assert!(!jail.tmp.path().join("x").exists());
    assert_eq!(
        jail.storage
            .list()
            .unwrap()
            .into_iter()
            .map(|f| f.path)
            .collect::<Vec<_>>(),
        ["real/inside.md"]
    );
}

#[cfg(unix)]
#[test]
fn os_symlink_to_a_directory_outside_is_refused() {
    let jail = Jail::new();
    jail.link("etc", Path::new("/etc"));
    jail.link("out", &jail.outside());
    let before = jail.outside_snapshot();
    let s = &jail.storage;
    assert_denied(s.read("etc/passwd").map(drop), "etc/passwd");
    assert_denied(s.read("out/secret.txt").map(drop), "out/secret.txt");
    assert_denied(s.read("out/etc/passwd").map(drop), "out/etc/passwd");
    assert_denied(s.write("out/new.txt", b"pwned", ""), "out/new.txt");
    assert_denied(s.write("out/secret.txt", b"pwned", ""), "out/secret.txt");
    assert_denied(s.write("out/sub/new.txt", b"pwned", ""), "out/sub/new.txt");
    assert_denied(s.delete("out/secret.txt"), "out/secret.txt");
    // The link itself is no file either.
    assert_denied(s.read("out").map(drop), "out");
    assert_denied(s.delete("out"), "out");
    assert_eq!(jail.outside_snapshot(), before);
    assert!(std::fs::symlink_metadata(jail.root().join("out"))
        .unwrap()
        .is_symlink());
    let listed: Vec<_> = s.list().unwrap().into_iter().map(|f| f.path).collect();
    assert_eq!(listed, ["real/inside.md"]);
}

#[cfg(unix)]
#[test]
fn os_symlink_to_a_file_outside_is_refused() {
    let jail = Jail::new();
    jail.link("leak.txt", &jail.outside().join("secret.txt"));
    let before = jail.outside_snapshot();
    let s = &jail.storage;
    match s.read("leak.txt") {
        Err(StorageError::Denied { path, reason }) => {
            assert_eq!(path, "leak.txt");
            assert_eq!(
                reason,
                "\"leak.txt\" is a symbolic link, and this store does not follow symbolic links; use the path of the real file"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_denied(s.write("leak.txt", b"pwned", ""), "leak.txt");
    assert_denied(s.delete("leak.txt"), "leak.txt");
    assert_eq!(jail.outside_snapshot(), before);
    assert_eq!(
        std::fs::read(jail.outside().join("secret.txt")).unwrap(),
        SECRET
    );
    assert_eq!(
        std::fs::read_link(jail.root().join("leak.txt")).unwrap(),
        jail.outside().join("secret.txt")
    );
    assert_eq!(s.list().unwrap().len(), 1);
}

#[cfg(unix)]
#[test]
fn os_symlinks_inside_the_root_are_refused_too() {
    let jail = Jail::new();
    jail.link("alias", Path::new("real"));
    jail.link("alias.md", Path::new("real/inside.md"));
    let s = &jail.storage;
    assert_denied(s.read("alias/inside.md").map(drop), "alias/inside.md");
    assert_denied(s.read("alias.md").map(drop), "alias.md");
    assert_denied(s.write("alias.md", b"changed", ""), "alias.md");
    assert_denied(s.write("alias/new.md", b"new", ""), "alias/new.md");
    assert_eq!(
        std::fs::read(jail.root().join("real/inside.md")).unwrap(),
        b"inside"
    );
    assert!(!jail.root().join("real/new.md").exists());
    let listed: Vec<_> = s.list().unwrap().into_iter().map(|f| f.path).collect();
    assert_eq!(listed, ["real/inside.md"]);
}

#[test]
fn os_failed_write_keeps_the_old_file() {
    let jail = Jail::new();
    let s = &jail.storage;
    s.write("f.md", b"old \x00 bytes", "").unwrap();
    // The parent is a file.
    match s.write("f.md/x.md", b"new", "") {
        Err(StorageError::ParentIsFile { path, parent }) => {
            assert_eq!((path.as_str(), parent.as_str()), ("f.md/x.md", "f.md"));
        }
        other => panic!("{other:?}"),
    }
    // The target is a directory.
    s.write("d/keep.md", b"keep", "").unwrap();
    match s.write("d", b"new", "") {
        Err(StorageError::IsDirectory { path }) => assert_eq!(path, "d"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        std::fs::read(jail.root().join("f.md")).unwrap(),
        b"old \x00 bytes"
    );
    assert_eq!(
        std::fs::read(jail.root().join("d/keep.md")).unwrap(),
        b"keep"
    );
    let mut names = Vec::new();
    all_names(&jail.root(), &mut names);
    names.sort();
    assert_eq!(names, ["d", "f.md", "inside.md", "keep.md", "real"]);
}

#[test]
fn os_list_skips_temp_files_and_special_names() {
    let jail = Jail::new();
    let root = jail.root();
    std::fs::write(
        root.join(".a.md.tmp-0123456789abcdef0123456789abcdef"),
        b"t",
    )
    .unwrap();
    std::fs::write(root.join("back\\slash.md"), b"b").unwrap();
    std::fs::write(root.join("new\nline.md"), b"n").unwrap();
    std::fs::write(root.join(".visible.md"), b"v").unwrap();
    let listed: Vec<_> = jail
        .storage
        .list()
        .unwrap()
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(listed, [".visible.md", "real/inside.md"]);
}

#[test]
fn os_concurrent_writes_are_atomic() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(OsStorage::open(dir.path()).unwrap());
    let versions: Vec<Vec<u8>> = (0..4u8)
        .map(|i| vec![b'a' + i; 1000 * (i as usize + 1)])
        .collect();
    s.write("race.md", &versions[0], "").unwrap();
    let writers: Vec<_> = (0..4)
        .map(|i| {
            let (s, v) = (Arc::clone(&s), versions[i].clone());
            std::thread::spawn(move || {
                for _ in 0..25 {
                    s.write("race.md", &v, "").unwrap();
                }
            })
        })
        .collect();
    for _ in 0..200 {
        let got = s.read("race.md").unwrap().content;
        assert!(versions.contains(&got), "torn read of {} bytes", got.len());
    }
    for w in writers {
        w.join().unwrap();
    }
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["race.md"]);
}

/// `exists` answers what `read` would, without the content: true, false for NotFound,
/// and read's own error otherwise.
fn exists_agrees_with_read(s: &dyn Storage) {
    s.write("d/a.md", b"alpha", "").unwrap();
    s.write("top.md", b"", "").unwrap();
    for path in [
        "d/a.md",
        "top.md",
        "missing.md",
        "d/missing.md",
        "top.md/x",
        "d",
        "../x",
        "a//b",
        "",
    ] {
        let expected = match s.read(path) {
            Ok(_) => Ok(true),
            Err(StorageError::NotFound { .. }) => Ok(false),
            Err(err) => Err(err.to_string()),
        };
        assert_eq!(
            s.exists(path).map_err(|e| e.to_string()),
            expected,
            "{path:?}"
        );
    }
    assert!(s.exists("d/a.md").unwrap());
    assert!(!s.exists("missing.md").unwrap());
    assert!(matches!(
        s.exists("d"),
        Err(StorageError::IsDirectory { .. })
    ));
    assert!(matches!(
        s.exists("../x"),
        Err(StorageError::InvalidPath(_))
    ));
}

// ---------------------------------------------------------------------------------------
// Hostile: one read must not abort or exhaust the host.

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

// ---------------------------------------------------------------------------------------
// Capped reads, conditional writes and renames, on every backend.

fn read_capped_checks_the_size_first(s: &dyn Storage) {
    s.write("d/ten.md", b"0123456789", "").unwrap();
    let f = s.read_capped("d/ten.md", 10).unwrap();
    assert_eq!((f.content.as_slice(), f.size), (&b"0123456789"[..], 10));
    match s.read_capped("d/ten.md", 9) {
        Err(StorageError::FileTooLarge { path, size, limit }) => {
            assert_eq!((path.as_str(), size, limit), ("d/ten.md", 10, 9));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.read_capped("d/ten.md", 0).unwrap_err().to_string(),
        "\"d/ten.md\" is 10 bytes, over the limit of 0 bytes for reading one file, so it was not read; only smaller files can be read here"
    );
    s.write("empty.md", b"", "").unwrap();
    assert_eq!(s.read_capped("empty.md", 0).unwrap().size, 0);
    assert!(matches!(
        s.read_capped("nope.md", 10),
        Err(StorageError::NotFound { path }) if path == "nope.md"
    ));
    assert!(matches!(
        s.read_capped("d", 10),
        Err(StorageError::IsDirectory { path }) if path == "d"
    ));
    assert!(matches!(
        s.read_capped("../x", 10),
        Err(StorageError::InvalidPath(_))
    ));
}

fn write_if_unchanged_keeps_another_writers_change(s: &dyn Storage) {
    s.write("a.md", b"v1", "").unwrap();
    s.write_if_unchanged("a.md", b"v1", b"v2", "").unwrap();
    assert_eq!(s.read("a.md").unwrap().content, b"v2");
    // Expecting what is no longer there: nothing is written.
    for stale in [&b"v1"[..], b"v2 and more", b"", b"v"] {
        match s.write_if_unchanged("a.md", stale, b"v3", "") {
            Err(StorageError::Changed { path }) => assert_eq!(path, "a.md"),
            other => panic!("{stale:?}: {other:?}"),
        }
        assert_eq!(s.read("a.md").unwrap().content, b"v2");
    }
    let err = s.write_if_unchanged("gone.md", b"x", b"y", "").unwrap_err();
    assert_eq!(
        err.to_string(),
        "\"gone.md\" changed while it was being edited (another writer changed or deleted it after it was read), so nothing was written and the other change is kept; read the file again and redo the edit"
    );
    assert!(!s.exists("gone.md").unwrap());
    assert_eq!(paths(s), ["a.md"]);
}

fn rename_moves_one_file(s: &dyn Storage) {
    s.write("a/one.md", b"one", "").unwrap();
    s.write("b.md", b"bee", "").unwrap();
    assert!(!s.rename("a/one.md", "x/y/moved.md", false).unwrap());
    assert_eq!(paths(s), ["b.md", "x/y/moved.md"]);
    assert_eq!(s.read("x/y/moved.md").unwrap().content, b"one");
    // "a" was left empty, so it is gone and its name is free.
    s.write("a", b"now a file", "").unwrap();
    // Onto an existing file: only with overwrite.
    match s.rename("x/y/moved.md", "b.md", false) {
        Err(StorageError::AlreadyExists { path }) => assert_eq!(path, "b.md"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        StorageError::AlreadyExists { path: "b.md".into() }.to_string(),
        "\"b.md\" already exists, so nothing was moved; choose another path, or replace it explicitly"
    );
    assert_eq!(s.read("b.md").unwrap().content, b"bee");
    assert!(s.rename("x/y/moved.md", "b.md", true).unwrap());
    assert_eq!(paths(s), ["a", "b.md"]);
    assert_eq!(s.read("b.md").unwrap().content, b"one");
    // Onto itself: nothing happens.
    assert!(!s.rename("b.md", "b.md", false).unwrap());
    assert_eq!(s.read("b.md").unwrap().content, b"one");
}

fn rename_refuses_what_write_and_read_refuse(s: &dyn Storage) {
    s.write("f.md", b"f", "").unwrap();
    s.write("d/in.md", b"in", "").unwrap();
    assert!(matches!(
        s.rename("nope.md", "x.md", false),
        Err(StorageError::NotFound { path }) if path == "nope.md"
    ));
    assert!(matches!(
        s.rename("d", "e", false),
        Err(StorageError::IsDirectory { path }) if path == "d"
    ));
    assert!(matches!(
        s.rename("f.md", "d", true),
        Err(StorageError::IsDirectory { path }) if path == "d"
    ));
    assert!(matches!(
        s.rename("d/in.md", "f.md/x.md", false),
        Err(StorageError::ParentIsFile { path, parent }) if path == "f.md/x.md" && parent == "f.md"
    ));
    for bad in ["../x", "/x", "a//b"] {
        assert!(matches!(
            s.rename("f.md", bad, false),
            Err(StorageError::InvalidPath(_))
        ));
        assert!(matches!(
            s.rename(bad, "g.md", false),
            Err(StorageError::InvalidPath(_))
        ));
    }
    assert_eq!(paths(s), ["d/in.md", "f.md"]);
}

fn rename_only_changing_case(s: &dyn Storage) {
    s.write("docs/Readme.md", b"# hi\n", "").unwrap();
    assert!(!s.rename("docs/Readme.md", "docs/README.md", false).unwrap());
    assert_eq!(paths(s), ["docs/README.md"]);
    assert_eq!(s.read("docs/README.md").unwrap().content, b"# hi\n");
    // Both spellings exist as distinct files here (every backend in this suite is
    // case-sensitive): the usual existing-destination rule applies.
    s.write("docs/Readme.md", b"other", "").unwrap();
    assert!(matches!(
        s.rename("docs/Readme.md", "docs/README.md", false),
        Err(StorageError::AlreadyExists { .. })
    ));
    assert!(s.rename("docs/Readme.md", "docs/README.md", true).unwrap());
    assert_eq!(paths(s), ["docs/README.md"]);
    assert_eq!(s.read("docs/README.md").unwrap().content, b"other");
}

/// Scoped errors name the caller's paths, not the prefix.
#[test]
fn scoped_rename_and_capped_read_errors_hide_the_prefix() {
    for inner in [memory(), os()] {
        let b = scoped(inner);
        let s = &*b.storage;
        s.write("a.md", b"12345", "").unwrap();
        s.write("b.md", b"b", "").unwrap();
        match s.read_capped("a.md", 4) {
            Err(StorageError::FileTooLarge { path, size, limit }) => {
                assert_eq!((path.as_str(), size, limit), ("a.md", 5, 4));
            }
            other => panic!("{other:?}"),
        }
        match s.rename("a.md", "b.md", false) {
            Err(StorageError::AlreadyExists { path }) => assert_eq!(path, "b.md"),
            other => panic!("{other:?}"),
        }
        match s.write_if_unchanged("a.md", b"1234", b"x", "") {
            Err(StorageError::Changed { path }) => assert_eq!(path, "a.md"),
            other => panic!("{other:?}"),
        }
        assert!(s.rename("a.md", "c/a.md", false).is_ok());
        assert_eq!(paths(s), ["b.md", "c/a.md"]);
    }
}

/// A store with only the required methods: the defaults of the optional ones.
struct Basic(MemoryStorage);

impl Storage for Basic {
    fn read(&self, path: &str) -> Result<toolhost::vfs::FileContent, StorageError> {
        self.0.read(path)
    }
    fn write(&self, path: &str, content: &[u8], content_type: &str) -> Result<(), StorageError> {
        self.0.write(path, content, content_type)
    }
    fn delete(&self, path: &str) -> Result<(), StorageError> {
        self.0.delete(path)
    }
    fn list(&self) -> Result<Vec<FileEntry>, StorageError> {
        self.0.list()
    }
}

#[test]
fn default_methods_behave_like_the_backends() {
    let s = Basic(MemoryStorage::new());
    s.write("a.md", b"12345", "").unwrap();
    assert!(matches!(
        s.read_capped("a.md", 4),
        Err(StorageError::FileTooLarge {
            size: 5,
            limit: 4,
            ..
        })
    ));
    assert_eq!(s.read_capped("a.md", 5).unwrap().content, b"12345");
    assert!(matches!(
        s.write_if_unchanged("a.md", b"1234", b"x", ""),
        Err(StorageError::Changed { .. })
    ));
    assert!(matches!(
        s.write_if_unchanged("b.md", b"", b"x", ""),
        Err(StorageError::Changed { .. })
    ));
    s.write_if_unchanged("a.md", b"12345", b"new", "").unwrap();
    assert_eq!(s.read("a.md").unwrap().content, b"new");
    let err = s.rename("a.md", "b.md", false).unwrap_err();
    assert!(
        matches!(&err, StorageError::Unsupported { operation } if operation == "rename"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "this store cannot rename files; use the basic operations (read, write, delete) instead"
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
