//! Tests of the bounded read: one system call for a small file that holds its `fstat`
//! size, the loop to the end for any other, and the cap either way.

use std::io::Write;

use super::*;

/// Opens `path` and takes its `fstat`, as `open_read` does before the read.
fn opened(path: &std::path::Path, max_bytes: u64) -> (cap_std::fs::File, Metadata) {
    let file = cap_std::fs::File::from_std(std::fs::File::open(path).unwrap());
    checked("f", file, max_bytes).unwrap()
}

/// A file whose handle reports fewer bytes than it yields (here a `/proc` file, whose
/// size is 0) stands for one that grows during the read: the read stops one byte past
/// the cap and refuses it.
#[cfg(target_os = "linux")]
#[test]
fn a_file_growing_during_the_read_cannot_pass_the_cap() {
    let read_open = |max_bytes: u64, buf: &mut Vec<u8>| {
        let file = cap_std::fs::File::from_std(std::fs::File::open("/proc/self/status").unwrap());
        let (file, md) = checked("status", file, max_bytes)?;
        assert_eq!(md.len(), 0);
        read_rest("status", file, &md, max_bytes, buf)
    };
    // A reused buffer holding another file's bytes: replaced, and emptied on failure.
    let mut buf = b"previous file".to_vec();
    match read_open(10, &mut buf) {
        Err(StorageError::FileTooLarge { path, size, limit }) => {
            assert_eq!((path.as_str(), size, limit), ("status", 11, 10));
        }
        other => panic!("{other:?}"),
    }
    assert!(buf.is_empty());
    buf.extend_from_slice(b"previous file");
    read_open(1 << 20, &mut buf).unwrap();
    assert!(buf.len() > 10 && buf.starts_with(b"Name:"), "{buf:?}");
}

/// Files at the edges of the one-read size (empty, one byte, at and past
/// [`ONE_READ_MAX`]) read whole and exactly through one reused buffer, which keeps no
/// byte of the file before.
#[test]
fn files_around_the_one_read_size_read_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let mut buf = b"left from an earlier, longer file".to_vec();
    let max = ONE_READ_MAX as usize;
    for len in [0, 1, 13, max - 1, max, max + 1, 3 * max] {
        let content: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let path = dir.path().join(format!("f{len}"));
        std::fs::write(&path, &content).unwrap();
        let (file, md) = opened(&path, 1 << 20);
        read_rest("f", file, &md, 1 << 20, &mut buf).unwrap();
        assert_eq!(buf, content, "{len} bytes");
    }
}

/// A small file that changed size between its `fstat` and its read is read as it is at
/// the read: grown within the cap, whole; grown past it, refused with the size it has
/// now; shrunk, its shorter content.
#[test]
fn a_small_file_that_changed_after_its_fstat_reads_as_it_is_now() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let mut buf = Vec::new();

    std::fs::write(&path, b"0123456789").unwrap();
    let (file, md) = opened(&path, 100);
    let mut more = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    more.write_all(b"abcdef").unwrap();
    read_rest("f", file, &md, 100, &mut buf).unwrap();
    assert_eq!(buf, b"0123456789abcdef");

    std::fs::write(&path, b"0123456789").unwrap();
    let (file, md) = opened(&path, 12);
    more.write_all(b"abcdef").unwrap();
    match read_rest("f", file, &md, 12, &mut buf) {
        Err(StorageError::FileTooLarge { path, size, limit }) => {
            assert_eq!((path.as_str(), size, limit), ("f", 16, 12));
        }
        other => panic!("{other:?}"),
    }
    assert!(buf.is_empty());

    std::fs::write(&path, b"0123456789").unwrap();
    let (file, md) = opened(&path, 100);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(4)
        .unwrap();
    read_rest("f", file, &md, 100, &mut buf).unwrap();
    assert_eq!(buf, b"0123");
}
