//! Unit tests of [`OsStorage`](super::OsStorage): containment, atomic writes and the
//! two read paths.

use super::errors::{not_regular, outside, symlink_denied};
use super::names::{is_stage_name, is_tmp_name, stage_name, tmp_name};
use super::*;
use crate::vfs::MAX_SEGMENT_LEN;
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

/// Found by the path_scope fuzz target: a name whose tail of the temp-name length starts
/// with a multi-byte character cut by the mark's length made `is_tmp_name` panic (a
/// model's `write_file` took the tool down).
#[test]
fn a_name_cut_inside_a_character_is_not_a_tmp_name() {
    let name = format!(".\u{ff0e}\u{ff0e}{}", "x".repeat(31));
    assert!(!is_tmp_name(&name));
    let dir = tempfile::tempdir().unwrap();
    let s = OsStorage::open(dir.path()).unwrap();
    s.write(&name, b"kept", "").unwrap();
    assert_eq!(s.read(&name).unwrap().content, b"kept");
    let listed: Vec<_> = s.list().unwrap().into_iter().map(|f| f.path).collect();
    assert_eq!(listed, [name]);
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
#[allow(
    clippy::type_complexity,
    reason = "a table of cases, read right where it is built"
)]
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
    use super::read::beneath::{classify, Miss};
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
fn open_says_what_is_wrong_with_the_root_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = OsStorage::open(&missing).unwrap_err();
    assert!(
        matches!(&err, OpenError::NotFound { path } if *path == missing),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("{} does not exist", missing.display())
    );
    // Nothing else to say: no OS error to print a second time, no hint for a model.
    assert!(std::error::Error::source(&err).is_none());
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let err = OsStorage::open(&file).unwrap_err();
    assert!(
        matches!(&err, OpenError::NotADirectory { path } if *path == file),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("{} is not a directory", file.display())
    );
    assert_eq!(err.path(), file);
}

/// Every name under `dir`, recursively, relative to it, sorted.
fn tree(dir: &Path) -> Vec<String> {
    pub(super) fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), &format!("{name}/"), out);
            }
            out.push(name);
        }
    }
    let mut out = Vec::new();
    walk(dir, "", &mut out);
    out.sort();
    out
}

const HEX: &str = "0123456789abcdef0123456789abcdef";
const HEX2: &str = "fedcba9876543210fedcba9876543210";

#[test]
fn stage_names_are_reserved_and_hidden() {
    assert_eq!(stage_name().len(), STAGE_MARK.len() + TMP_RANDOM_LEN);
    assert!(is_stage_name(&stage_name()));
    for not in [
        ".stage-",
        ".stage-xyz",
        "stage-0123456789abcdef0123456789abcdef",
        ".a.stage-0123456789abcdef0123456789abcdef",
    ] {
        assert!(!is_stage_name(not), "{not}");
    }
    let dir = tempfile::tempdir().unwrap();
    let s = OsStorage::open(dir.path()).unwrap();
    let staged = format!("d/.stage-{HEX}/a.md");
    match s.write(&staged, b"x", "") {
        Err(StorageError::Denied { path, reason }) => {
            assert_eq!(path, staged);
            assert_eq!(reason, "names of the form \".<name>.tmp-<32 hex digits>\" and \".stage-<32 hex digits>\" are reserved for the store's temporary and staging files; choose another name");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(s.read(&staged), Err(StorageError::Denied { .. })));
    assert!(matches!(
        s.rename("x.md", &staged, false),
        Err(StorageError::Denied { .. })
    ));
    // A staging directory in use (locked) survives the open and is not listed.
    std::fs::create_dir_all(dir.path().join(format!("d/.stage-{HEX}"))).unwrap();
    std::fs::write(dir.path().join(&staged), b"x").unwrap();
    std::fs::write(dir.path().join("d/b.md"), b"b").unwrap();
    let lock = std::fs::File::open(dir.path().join(format!("d/.stage-{HEX}"))).unwrap();
    lock.try_lock().unwrap();
    let s = OsStorage::open(dir.path()).unwrap();
    let listed: Vec<_> = s.list().unwrap().into_iter().map(|f| f.path).collect();
    assert_eq!(listed, ["d/b.md"]);
}

#[test]
fn open_recovers_what_a_killed_process_left() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("d")).unwrap();
    // A write killed before its rename: the old content stays, the temporary file goes.
    std::fs::write(root.join("d/a.md"), b"old a").unwrap();
    std::fs::write(root.join(format!("d/.a.md.tmp-{HEX}")), b"new a, half").unwrap();
    // A case-only rename killed mid-way: the file is only in the staging directory.
    std::fs::create_dir(root.join(format!("d/.stage-{HEX}"))).unwrap();
    std::fs::write(root.join(format!("d/.stage-{HEX}/Readme.md")), b"readme").unwrap();
    // An older staged copy whose name was taken again since: removed.
    std::fs::create_dir(root.join(format!(".stage-{HEX2}"))).unwrap();
    std::fs::write(root.join(format!(".stage-{HEX2}/b.md")), b"older b").unwrap();
    std::fs::write(root.join("b.md"), b"newer b").unwrap();
    // An empty staging directory (killed after the second rename).
    std::fs::create_dir(root.join(format!("d/.stage-{HEX2}"))).unwrap();
    // Files in use by a live process (locked) are left alone.
    let live = root.join(format!(".c.md.tmp-{HEX}"));
    std::fs::write(&live, b"being written").unwrap();
    let held = std::fs::File::open(&live).unwrap();
    held.try_lock().unwrap();
    // Look-alikes that are not the store's are left alone too.
    std::fs::write(root.join(".stage-notmine"), b"user file").unwrap();
    std::fs::write(root.join(format!("d/.a.md.tmp-{HEX}x")), b"user file").unwrap();

    let report =
        recover::recover(&Dir::open_ambient_dir(root, cap_std::ambient_authority()).unwrap());
    assert_eq!(
        report,
        recover::Report {
            restored: vec!["d/Readme.md".into()],
            superseded: vec!["b.md".into()],
            temporary: 1,
            in_use: 1,
            failed: vec![],
        }
    );
    assert_eq!(
        tree(root),
        [
            format!(".c.md.tmp-{HEX}"),
            ".stage-notmine".to_owned(),
            "b.md".to_owned(),
            "d".to_owned(),
            format!("d/.a.md.tmp-{HEX}x"),
            "d/Readme.md".to_owned(),
            "d/a.md".to_owned(),
        ]
    );
    assert_eq!(std::fs::read(root.join("d/Readme.md")).unwrap(), b"readme");
    assert_eq!(std::fs::read(root.join("d/a.md")).unwrap(), b"old a");
    assert_eq!(std::fs::read(root.join("b.md")).unwrap(), b"newer b");
    // Once the writer is gone, the next open removes its file.
    drop(held);
    let s = OsStorage::open(root).unwrap();
    assert!(!live.exists());
    let listed: Vec<_> = s.list().unwrap().into_iter().map(|f| f.path).collect();
    assert_eq!(
        listed,
        [
            ".stage-notmine".to_owned(),
            "b.md".to_owned(),
            format!("d/.a.md.tmp-{HEX}x"),
            "d/Readme.md".to_owned(),
            "d/a.md".to_owned(),
        ]
    );
}

#[test]
fn a_write_in_progress_holds_its_lock() {
    let dir = tempfile::tempdir().unwrap();
    let s = OsStorage::open(dir.path()).unwrap();
    let (tmp, handle) = s.write_temp("a.md", b"x").unwrap();
    let report = recover::recover(&s.root);
    assert_eq!((report.in_use, report.temporary), (1, 0));
    assert!(dir.path().join(&tmp).exists());
    drop(handle);
    assert_eq!(recover::recover(&s.root).temporary, 1);
    assert!(!dir.path().join(&tmp).exists());
    // The same for a staging directory during a rename.
    s.root.create_dir(format!(".stage-{HEX}")).unwrap();
    let lock = s.lock_stage(&format!(".stage-{HEX}")).expect("locked");
    let report = recover::recover(&s.root);
    assert_eq!((report.in_use, report.restored.len()), (1, 0));
    drop(lock);
    assert_eq!(recover::recover(&s.root), recover::Report::default());
    assert_eq!(tree(dir.path()), Vec::<String>::new());
}

#[test]
fn case_only_rename_through_staging_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let s = OsStorage::open(dir.path()).unwrap();
    s.force_case_staging(true);
    s.write("d/Readme.md", b"readme", "").unwrap();
    assert!(!s.rename("d/Readme.md", "d/README.md", false).unwrap());
    assert_eq!(tree(dir.path()), ["d", "d/README.md"]);
    assert_eq!(s.read("d/README.md").unwrap().content, b"readme");
    // A distinct file under the new spelling: refused without overwrite, both intact.
    s.write("d/Readme.md", b"other", "").unwrap();
    assert!(matches!(
        s.rename("d/Readme.md", "d/README.md", false),
        Err(StorageError::AlreadyExists { path }) if path == "d/README.md"
    ));
    assert_eq!(tree(dir.path()), ["d", "d/README.md", "d/Readme.md"]);
    assert!(s.rename("d/Readme.md", "d/README.md", true).unwrap());
    assert_eq!(tree(dir.path()), ["d", "d/README.md"]);
    assert_eq!(s.read("d/README.md").unwrap().content, b"other");
}

#[cfg(unix)]
#[test]
fn a_hard_link_is_not_a_case_only_rename() {
    let dir = tempfile::tempdir().unwrap();
    let s = OsStorage::open(dir.path()).unwrap();
    s.write("Readme.md", b"x", "").unwrap();
    std::fs::hard_link(dir.path().join("Readme.md"), dir.path().join("README.md")).unwrap();
    std::fs::hard_link(dir.path().join("Readme.md"), dir.path().join("other.md")).unwrap();
    for to in ["README.md", "other.md"] {
        match s.rename("Readme.md", to, true) {
            Err(StorageError::Denied { path, reason }) => {
                assert_eq!(path, to);
                assert_eq!(reason, "it is the same file as \"Readme.md\" (a hard link, or the same name on a case-insensitive disk), so nothing was moved; choose another destination");
            }
            other => panic!("{to}: {other:?}"),
        }
    }
    assert_eq!(tree(dir.path()), ["README.md", "Readme.md", "other.md"]);
}

#[test]
fn write_if_unchanged_checks_just_before_the_rename() {
    let dir = tempfile::tempdir().unwrap();
    let s = OsStorage::open(dir.path()).unwrap();
    s.write("a.md", b"one\n", "").unwrap();
    // Another writer appends after the new content is on disk, just before the check.
    *s.append_before_compare.lock().unwrap() = Some(b"appended\n".to_vec());
    match s.write_if_unchanged("a.md", b"one\n", b"ONE\n", "") {
        Err(StorageError::Changed { path }) => assert_eq!(path, "a.md"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        std::fs::read(dir.path().join("a.md")).unwrap(),
        b"one\nappended\n"
    );
    assert_eq!(tree(dir.path()), ["a.md"]);
    s.write_if_unchanged("a.md", b"one\nappended\n", b"ONE\n", "")
        .unwrap();
    assert_eq!(std::fs::read(dir.path().join("a.md")).unwrap(), b"ONE\n");
}

/// `open_read` then `read_into` answers every case as `read` does, on both open paths,
/// through one reused buffer; the size comes from the handle before any byte is read.
#[test]
fn open_read_gives_the_same_answers_as_read() {
    let dir = tempfile::tempdir().unwrap();
    let cases = read_cases(dir.path());
    let s = OsStorage::open(dir.path()).unwrap();
    let mut buf = b"left from an earlier file".to_vec();
    for forced in [false, true] {
        s.force_portable_read.store(forced, Ordering::SeqCst);
        for (path, want, _) in &cases {
            let got = s
                .open_read(path, MAX_READ_BYTES)
                .and_then(|file| {
                    let size = file.size();
                    file.read_into(&mut buf)?;
                    Ok((summary(&buf), content_type_for(path).to_owned(), size))
                })
                .map_err(|e| format!("{e:?}"));
            assert_eq!(&got, want, "{path}, portable path forced: {forced}");
        }
    }
}

/// A file over the cap is refused at the open, with its size, before anything is read.
#[test]
fn open_read_refuses_a_file_over_the_cap_at_the_open() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.txt"), vec![b'x'; 5000]).unwrap();
    let s = OsStorage::open(dir.path()).unwrap();
    match s.open_read("big.txt", 4999).map(|file| file.size()) {
        Err(StorageError::FileTooLarge { path, size, limit }) => {
            assert_eq!((path.as_str(), size, limit), ("big.txt", 5000, 4999));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.open_read("big.txt", 5000).unwrap().size(), 5000);
}

/// `list_paths` lists what `list` lists (no link, special file, temporary or staging
/// name, in any directory), in the same order.
#[test]
fn list_paths_is_list_without_the_stats() {
    let dir = tempfile::tempdir().unwrap();
    read_cases(dir.path());
    std::fs::create_dir_all(dir.path().join("z/y/x")).unwrap();
    std::fs::write(dir.path().join("z/y/x/deep.rs"), b"fn main() {}\n").unwrap();
    std::fs::write(dir.path().join("B.md"), b"upper\n").unwrap();
    // Made after the open, which would clean them up.
    let s = OsStorage::open(dir.path()).unwrap();
    std::fs::write(
        dir.path()
            .join("d/.a.md.tmp-0123456789abcdef0123456789abcdef"),
        b"temp",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("d/.stage-0123456789abcdef0123456789abcdef")).unwrap();
    std::fs::write(
        dir.path()
            .join("d/.stage-0123456789abcdef0123456789abcdef/staged.md"),
        b"staged",
    )
    .unwrap();
    let listed: Vec<String> = s.list().unwrap().into_iter().map(|e| e.path).collect();
    assert_eq!(
        listed,
        [
            "B.md",
            "d/a.md",
            "d/sub/big.bin",
            "empty.txt",
            "z/y/x/deep.rs"
        ]
    );
    assert_eq!(s.list_paths().unwrap(), listed);
}
