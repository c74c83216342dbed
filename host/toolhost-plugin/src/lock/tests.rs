//! Tests of the lock file: digests, reading and writing, refusals, checks and scans.

use super::*;
use std::path::Path;

const A: &[u8] = b"\0asm\x0d\0\x01\0a";
const B: &[u8] = b"\0asm\x0d\0\x01\0b";

#[test]
fn digests_print_and_parse_in_the_oci_form() {
    let digest = Sha256Digest::of(b"");
    assert_eq!(
        digest.to_string(),
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(Sha256Digest::parse(&digest.to_string()), Ok(digest));
    assert_eq!(
        Sha256Digest::parse(
            &digest
                .to_string()
                .to_uppercase()
                .replace("SHA256", "sha256")
        ),
        Ok(digest)
    );
    for bad in ["", "sha256:", "e3b0c442", "sha512:00", "sha256:zz"] {
        assert!(Sha256Digest::parse(bad).is_err(), "{bad}");
    }
    assert!(Sha256Digest::parse(&format!("sha256:{}", "g".repeat(64)))
        .unwrap_err()
        .contains("64 hex digits"));
}

#[test]
fn written_lock_reads_back_and_is_sorted() {
    let dir = tempfile::tempdir().unwrap();
    let mut lock = PluginLock::default();
    for (file, bytes) in [("b.wasm", B), ("a.wasm", A)] {
        lock.upsert(LockEntry {
            file: file.into(),
            digest: Sha256Digest::of(bytes),
            manifest_digest: None,
            source: Some(format!("oci://127.0.0.1:5000/t/{file}:1")),
            source_digest: Some(Sha256Digest::of(b"m").to_string()),
            signature: None,
        });
    }
    let path = lock.write(dir.path()).unwrap();
    assert_eq!(path, dir.path().join("plugins.lock"));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("# Pins of this plugin directory"),
        "{text}"
    );
    assert!(
        text.find("a.wasm").unwrap() < text.find("b.wasm").unwrap(),
        "{text}"
    );
    assert_eq!(PluginLock::read(dir.path()).unwrap(), Some(lock));
    // No temporary file left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["plugins.lock"]);
}

#[test]
fn no_lock_file_is_none() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(PluginLock::read(dir.path()).unwrap(), None);
}

fn invalid(text: &str) -> String {
    match PluginLock::parse(Path::new("d/plugins.lock"), text).unwrap_err() {
        LockError::Invalid { path, message } => {
            assert_eq!(path, Path::new("d/plugins.lock"));
            message
        }
        other => panic!("not Invalid: {other}"),
    }
}

#[test]
fn bad_lock_files_are_refused_naming_what_is_wrong() {
    let digest = Sha256Digest::of(A);
    assert!(invalid("version = 2\n").contains("version 2 is not supported"));
    assert!(invalid("").contains("missing field `version`"));
    let unknown = invalid("version = 1\nsignature = \"x\"\n");
    assert!(unknown.starts_with("line 2: "), "{unknown}");
    assert!(unknown.contains("signature"), "{unknown}");
    let bad_digest = invalid(&format!(
        "version = 1\n[[plugin]]\nfile = \"a.wasm\"\ndigest = \"{}\"\n",
        &digest.to_string()[..20]
    ));
    assert!(bad_digest.contains("64 hex digits"), "{bad_digest}");
    for file in [
        "../a.wasm",
        "sub/a.wasm",
        ".wasm",
        "a.toml",
        ".hidden.wasm",
        "",
    ] {
        let text = invalid(&format!(
            "version = 1\n[[plugin]]\nfile = \"{file}\"\ndigest = \"{digest}\"\n"
        ));
        assert!(
            text.contains("is not a component file name"),
            "{file}: {text}"
        );
    }
    let twice = invalid(&format!(
            "version = 1\n[[plugin]]\nfile = \"a.wasm\"\ndigest = \"{digest}\"\n[[plugin]]\nfile = \"a.wasm\"\ndigest = \"{digest}\"\n"
        ));
    assert!(twice.contains("\"a.wasm\" is listed twice"), "{twice}");
    let source = invalid(&format!(
            "version = 1\n[[plugin]]\nfile = \"a.wasm\"\ndigest = \"{digest}\"\nsource_digest = \"latest\"\n"
        ));
    assert!(source.contains("a.wasm: source_digest"), "{source}");
}

#[cfg(unix)]
#[test]
fn a_fifo_or_huge_lock_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOCK_FILE_NAME);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let err = PluginLock::read(dir.path()).unwrap_err();
    assert!(
        err.to_string().contains("is a FIFO, not a regular file"),
        "{err}"
    );
    std::fs::remove_file(&path).unwrap();
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(MAX_LOCK_BYTES + 1).unwrap();
    let err = PluginLock::read(dir.path()).unwrap_err();
    assert!(err.to_string().contains("over the host's cap"), "{err}");
}

#[test]
fn check_names_both_digests() {
    let (a, b) = (Sha256Digest::of(A), Sha256Digest::of(B));
    let m = Sha256Digest::of(b"[limits]\n");
    let mut lock = PluginLock::default();
    lock.upsert(LockEntry {
        file: "a.wasm".into(),
        digest: a,
        manifest_digest: Some(m),
        source: None,
        source_digest: None,
        signature: None,
    });
    assert_eq!(lock.check("a.wasm", &a, Some(&m)), Ok(()));
    let swapped = lock.check("a.wasm", &b, Some(&m)).unwrap_err();
    assert_eq!(
        swapped,
        LockMismatch::Component {
            pinned: a,
            actual: b
        }
    );
    let text = swapped.to_string();
    assert!(
        text.contains(&format!("its digest is {b}, but the lock pins {a}")),
        "{text}"
    );
    assert_eq!(
        lock.check("a.wasm", &a, None),
        Err(LockMismatch::Manifest {
            pinned: Some(m),
            actual: None
        })
    );
    assert_eq!(
        lock.check("a.wasm", &a, Some(&b)),
        Err(LockMismatch::Manifest {
            pinned: Some(m),
            actual: Some(b)
        })
    );
    assert_eq!(
        lock.check("b.wasm", &b, None),
        Err(LockMismatch::NotListed { actual: b })
    );
    lock.plugins[0].manifest_digest = None;
    let added = lock.check("a.wasm", &a, Some(&m)).unwrap_err();
    assert!(
        added
            .to_string()
            .contains(&format!("it has a manifest ({m}) but the lock pins none")),
        "{added}"
    );
}

#[test]
fn scan_pins_what_is_there_and_keeps_sources_of_unchanged_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.wasm"), A).unwrap();
    std::fs::write(dir.path().join("a.toml"), "[limits]\n").unwrap();
    std::fs::write(dir.path().join("b.wasm"), B).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
    std::fs::create_dir(dir.path().join("dir.wasm")).unwrap();
    let (first, changes) = PluginLock::scan(dir.path(), None).unwrap();
    assert_eq!(first.plugins.len(), 2);
    assert_eq!(first.plugins[0].file, "a.wasm");
    assert_eq!(
        first.plugins[0].manifest_digest,
        Some(Sha256Digest::of(b"[limits]\n"))
    );
    assert_eq!(first.plugins[1].manifest_digest, None);
    assert_eq!(
        changes,
        [
            LockChange::Added {
                file: "a.wasm".into(),
                digest: Sha256Digest::of(A)
            },
            LockChange::Added {
                file: "b.wasm".into(),
                digest: Sha256Digest::of(B)
            },
        ]
    );
    let mut pulled = first;
    for entry in &mut pulled.plugins {
        entry.source = Some("oci://r/x:1".into());
        entry.source_digest = Some(Sha256Digest::of(b"m").to_string());
    }
    std::fs::write(dir.path().join("b.wasm"), A).unwrap();
    std::fs::remove_file(dir.path().join("a.toml")).unwrap();
    std::fs::write(dir.path().join("c.wasm"), B).unwrap();
    pulled.upsert(LockEntry {
        file: "gone.wasm".into(),
        digest: Sha256Digest::of(B),
        manifest_digest: None,
        source: None,
        source_digest: None,
        signature: None,
    });
    let (second, changes) = PluginLock::scan(dir.path(), Some(&pulled)).unwrap();
    // a.wasm: same bytes, manifest removed: keeps its source.
    assert_eq!(second.plugins[0].source.as_deref(), Some("oci://r/x:1"));
    assert_eq!(second.plugins[0].manifest_digest, None);
    // b.wasm: new bytes: no longer from its source.
    assert_eq!(second.plugins[1].source, None);
    assert_eq!(second.plugins[1].digest, Sha256Digest::of(A));
    let kinds: Vec<String> = changes
        .iter()
        .map(|change| match change {
            LockChange::Added { file, .. } => format!("+{file}"),
            LockChange::Changed { file, .. } => format!("~{file}"),
            LockChange::Unchanged { file } => format!("={file}"),
            LockChange::Removed { file } => format!("-{file}"),
        })
        .collect();
    assert_eq!(kinds, ["~a.wasm", "~b.wasm", "+c.wasm", "-gone.wasm"]);
}

#[test]
fn a_refused_entry_is_refused_with_its_reason_and_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (Sha256Digest::of(A), Sha256Digest::of(B));
    let mut lock = PluginLock::default();
    for (file, digest) in [("a.wasm", a), ("b.wasm", b)] {
        lock.upsert(LockEntry {
            file: file.into(),
            digest,
            manifest_digest: None,
            source: None,
            source_digest: None,
            signature: None,
        });
    }
    lock.refuse("a.wasm", "it is not signed".into());
    assert_eq!(
        lock.check("a.wasm", &a, None),
        Err(LockMismatch::Refused {
            reason: "it is not signed".into()
        })
    );
    assert_eq!(lock.check("b.wasm", &b, None), Ok(()));
    lock.write(dir.path()).unwrap();
    let read = PluginLock::read(dir.path()).unwrap().unwrap();
    assert_eq!(read.check("a.wasm", &a, None), Ok(()));
}
