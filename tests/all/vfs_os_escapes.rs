//! `OsStorage` only: escapes from the root by path, symlink and race, and atomic writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tempfile::TempDir;
use toolhost::vfs::{OsStorage, PathErrorReason, Storage, StorageError};

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
