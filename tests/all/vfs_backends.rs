//! One storage suite, run against every backend: `MemoryStorage`, `OsStorage` on a temp
//! dir, and a `ScopedStorage` over each (whose wrapped store also holds sibling files the
//! scoped view must never show). The escape attempts on `OsStorage` are in
//! `vfs_os_escapes.rs`, a 200 GiB file against every reading tool in `vfs_huge_files.rs`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tempfile::TempDir;
use toolhost::vfs::{
    scope, FileEntry, MemoryStorage, OsStorage, PathErrorReason, Storage, StorageError,
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

/// Known difference 1 between the backends (docs/testing.md, encoded in the vfs_diff fuzz
/// target): an explicit content type given to `write` is kept by the memory store, while
/// the disk store has nowhere to keep it and derives the type from the extension.
#[test]
fn an_explicit_content_type_is_kept_in_memory_and_derived_on_disk() {
    let memory = toolhost::vfs::MemoryStorage::new();
    memory.write("a.md", b"x", "text/x-fuzz").unwrap();
    assert_eq!(memory.read("a.md").unwrap().content_type, "text/x-fuzz");
    let dir = tempfile::tempdir().unwrap();
    let disk = toolhost::vfs::OsStorage::open(dir.path()).unwrap();
    disk.write("a.md", b"x", "text/x-fuzz").unwrap();
    assert_eq!(disk.read("a.md").unwrap().content_type, "text/markdown");
}
