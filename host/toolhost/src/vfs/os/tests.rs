//! Unit tests of [`OsStorage`](super::OsStorage): containment, atomic writes and the
//! two read paths.

use super::*;
use std::sync::atomic::Ordering;

#[test]
fn tmp_names_fit_and_are_recognised() {
    let t = tmp_name("a.md");
    assert!(t.starts_with(".a.md.tmp-"), "{t}");
    assert_eq!(t.len(), 1 + 4 + 5 + 32);
    assert!(is_tmp_name(&t));
    let long = "é".repeat(127) + "x"; // 255 bytes
    let t = tmp_name(&long);
    assert!(t.len() <= MAX_SEGMENT_LEN, "{}", t.len());
    assert!(is_tmp_name(&t));
    for not in [
        "a.md",
        ".a.md",
        ".a.tmp-",
        "a.tmp-0123456789abcdef0123456789abcdef",
        ".a.tmp-0123456789abcdef0123456789abcdeg",
        ".a.tmp-0123456789abcdef0123456789abcde",
        ".é",
    ] {
        assert!(!is_tmp_name(not), "{not}");
    }
}

#[test]
fn failed_rename_keeps_old_file_and_leaves_no_temp() {
    let dir = tempfile::tempdir().unwrap();
    let s = OsStorage::open(dir.path()).unwrap();
    s.write("d/a.md", b"old bytes", "").unwrap();
    s.fail_before_rename.store(true, Ordering::SeqCst);
    let err = s.write("d/a.md", b"new", "").unwrap_err();
    assert!(
        matches!(&err, StorageError::Io { path, .. } if path == "d/a.md"),
        "{err:?}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("d/a.md")).unwrap(),
        b"old bytes"
    );
    let names: Vec<_> = std::fs::read_dir(dir.path().join("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["a.md"]);
}

#[test]
fn reserved_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = OsStorage::open(dir.path()).unwrap();
    let name = "a/.x.tmp-0123456789abcdef0123456789abcdef";
    let err = s.write(name, b"x", "").unwrap_err();
    assert!(
        matches!(&err, StorageError::Denied { path, .. } if path == name),
        "{err:?}"
    );
    assert!(!dir.path().join("a").exists());
}

#[cfg(unix)]
#[test]
fn mode_is_0644_whatever_the_old_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret.md");
    std::fs::write(&file, b"x").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let s = OsStorage::open(dir.path()).unwrap();
    s.write("secret.md", b"y", "").unwrap();
    s.write("new.md", b"y", "").unwrap();
    for name in ["secret.md", "new.md"] {
        let mode = std::fs::metadata(dir.path().join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o644, "{name}");
    }
}

#[test]
fn delete_prunes_empty_directories_only() {
    let dir = tempfile::tempdir().unwrap();
    let s = OsStorage::open(dir.path()).unwrap();
    s.write("a/b/c.md", b"", "").unwrap();
    s.write("a/d.md", b"", "").unwrap();
    s.delete("a/b/c.md").unwrap();
    assert!(!dir.path().join("a/b").exists());
    assert!(dir.path().join("a/d.md").exists());
    // Now "a/b" can be a file, as in the memory store.
    s.write("a/b", b"file", "").unwrap();
    assert_eq!(s.read("a/b").unwrap().content, b"file");
}

/// What a read returned: content (a checksum of it when long), content type and
/// size, or the error as debugged.
fn outcome(r: Result<FileContent, StorageError>) -> Result<(String, String, u64), String> {
    r.map(|c| (summary(&c.content), c.content_type, c.size))
        .map_err(|e| format!("{e:?}"))
}

fn summary(content: &[u8]) -> String {
    if content.len() <= 64 {
        return format!("{:?}", String::from_utf8_lossy(content));
    }
    let sum = content
        .iter()
        .fold(0u64, |h, &b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    format!("{} bytes, checksum {sum:x}", content.len())
}

/// A tree with one of each thing `read` must tell apart, and the exact outcome of
/// reading each, with whether the `openat2` path answers it (on Linux).
#[allow(clippy::type_complexity)]
fn read_cases(root: &Path) -> Vec<(&'static str, Result<(String, String, u64), String>, bool)> {
    std::fs::create_dir_all(root.join("d/sub")).unwrap();
    std::fs::write(root.join("d/a.md"), b"alpha\n").unwrap();
    let big: Vec<u8> = (0..300_001u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(root.join("d/sub/big.bin"), &big).unwrap();
    std::fs::write(root.join("empty.txt"), b"").unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("d/a.md", root.join("link.md")).unwrap();
        std::os::unix::fs::symlink("d", root.join("ld")).unwrap();
        std::os::unix::fs::symlink("sub", root.join("d/deep")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("d/out.txt")).unwrap();
        std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap();
    }
    #[cfg(target_os = "linux")]
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let denied = |e: StorageError| Err(format!("{e:?}"));
    let not_found = |p: &str| Err(format!("{:?}", StorageError::NotFound { path: p.into() }));
    let mut cases = vec![
        (
            "d/a.md",
            Ok((summary(b"alpha\n"), "text/markdown".into(), 6)),
            true,
        ),
        (
            "d/sub/big.bin",
            Ok((summary(&big), "text/markdown".into(), 300_001)),
            true,
        ),
        (
            "empty.txt",
            Ok((summary(b""), "text/plain".into(), 0)),
            true,
        ),
        ("nope.md", not_found("nope.md"), false),
        ("d/nope/a.md", not_found("d/nope/a.md"), false),
        ("d/a.md/x", not_found("d/a.md/x"), false),
        (
            "d/sub",
            denied(StorageError::IsDirectory {
                path: "d/sub".into(),
            }),
            true,
        ),
        (
            "d/.a.tmp-0123456789abcdef0123456789abcdef",
            Err(format!(
                "{:?}",
                OsStorage::check("d/.a.tmp-0123456789abcdef0123456789abcdef").unwrap_err()
            )),
            false,
        ),
    ];
    #[cfg(unix)]
    cases.extend([
        (
            "link.md",
            denied(symlink_denied("link.md", "link.md")),
            false,
        ),
        ("ld/a.md", denied(symlink_denied("ld/a.md", "ld")), false),
        (
            "d/deep/big.bin",
            denied(symlink_denied("d/deep/big.bin", "d/deep")),
            false,
        ),
        (
            "d/out.txt",
            denied(symlink_denied("d/out.txt", "d/out.txt")),
            false,
        ),
        // Opening a socket fails (ENXIO), so the portable path answers.
        ("sock", denied(not_regular("sock")), false),
    ]);
    #[cfg(target_os = "linux")]
    cases.push(("fifo", denied(not_regular("fifo")), true));
    cases
}

#[test]
fn exists_answers_what_read_would_without_opening() {
    let dir = tempfile::tempdir().unwrap();
    let cases = read_cases(dir.path());
    let s = OsStorage::open(dir.path()).unwrap();
    for (path, want, _) in &cases {
        let expected = match want {
            Ok(_) => Ok(true),
            Err(e)
                if *e
                    == format!(
                        "{:?}",
                        StorageError::NotFound {
                            path: (*path).into()
                        }
                    ) =>
            {
                Ok(false)
            }
            Err(e) => Err(e.clone()),
        };
        let before = s.fast_reads.load(Ordering::SeqCst);
        assert_eq!(
            s.exists(path).map_err(|e| format!("{e:?}")),
            expected,
            "{path}"
        );
        assert_eq!(
            s.fast_reads.load(Ordering::SeqCst),
            before,
            "{path} was read"
        );
    }
}

#[test]
fn read_gives_the_same_answers_on_both_paths() {
    let dir = tempfile::tempdir().unwrap();
    let cases = read_cases(dir.path());
    let s = OsStorage::open(dir.path()).unwrap();
    for forced in [false, true] {
        s.force_portable_read.store(forced, Ordering::SeqCst);
        for (path, want, fast) in &cases {
            let before = s.fast_reads.load(Ordering::SeqCst);
            let got = outcome(s.read(path));
            assert_eq!(&got, want, "{path}, portable path forced: {forced}");
            let served = s.fast_reads.load(Ordering::SeqCst) - before;
            let want_served = usize::from(cfg!(target_os = "linux") && *fast && !forced);
            assert_eq!(
                served, want_served,
                "{path}, portable path forced: {forced}"
            );
        }
    }
    // Both paths take the time from the open handle.
    let want = std::fs::metadata(dir.path().join("d/a.md"))
        .unwrap()
        .modified()
        .unwrap();
    for forced in [false, true] {
        s.force_portable_read.store(forced, Ordering::SeqCst);
        assert_eq!(s.read("d/a.md").unwrap().updated_at, want, "{forced}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn openat2_errors_are_classified() {
    use beneath::{classify, Miss};
    use rustix::io::Errno;
    assert_eq!(classify(Errno::XDEV), Miss::Outside);
    for e in [Errno::NOSYS, Errno::PERM, Errno::INVAL] {
        assert_eq!(classify(e), Miss::Unsupported, "{e:?}");
    }
    for e in [
        Errno::LOOP,
        Errno::NOENT,
        Errno::NOTDIR,
        Errno::ACCESS,
        Errno::NXIO,
        Errno::AGAIN,
        Errno::MFILE,
    ] {
        assert_eq!(classify(e), Miss::Portable, "{e:?}");
    }
    assert_eq!(
        format!("{:?}", outside("a.md")),
        format!(
            "{:?}",
            StorageError::Denied {
                path: "a.md".into(),
                reason: "it leads outside the store's root directory; use a path inside it".into()
            }
        )
    );
}

#[test]
fn open_refuses_a_missing_root() {
    let dir = tempfile::tempdir().unwrap();
    let err = OsStorage::open(dir.path().join("nope")).unwrap_err();
    assert!(matches!(err, StorageError::Io { .. }), "{err:?}");
}
