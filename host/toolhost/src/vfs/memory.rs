//! [`MemoryStorage`]: files in a map, for tests, examples and short-lived sessions.
//!
//! ```
//! use toolhost::vfs::{MemoryStorage, Storage};
//!
//! let storage = MemoryStorage::new();
//! storage.write("a.md", b"alpha", "")?;
//! storage.write("b.md", b"beta", "")?;
//! let search = storage.searchable().expect("memory storage is searchable");
//! assert_eq!(search.search("ALPHA")?, vec!["a.md".to_owned()]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::ops::{Bound, ControlFlow};
use std::sync::{PoisonError, RwLock};
use std::time::SystemTime;

use super::{
    content_type_for, validate_path, FileContent, FileEntry, Searchable, Storage, StorageError,
};

/// A thread-safe in-memory [`Storage`], also [`Searchable`].
///
/// It behaves like a directory tree: a path with files under it (`a` when `a/b` exists)
/// is a directory, so it cannot be read, written or deleted as a file, and a file cannot
/// be written below another file. A write with an empty content type stores the one
/// [`content_type_for`] derives from the extension.
#[derive(Debug, Default)]
pub struct MemoryStorage {
    files: RwLock<BTreeMap<String, Stored>>,
}

#[derive(Debug, Clone)]
struct Stored {
    content: Vec<u8>,
    content_type: String,
    updated_at: SystemTime,
}

/// Paths [`MemoryStorage::visit_files`] copies per look at the map.
const VISIT_CHUNK: usize = 1024;

/// The query syntax, as [`Searchable::search_syntax`] reports it.
const SYNTAX: &str =
    "Whitespace-separated terms; a file matches when every term occurs in its path or its \
content, ignoring case. Put a phrase in double quotes (\"release notes\") to match it as one \
term, spaces included; an unclosed quote runs to the end of the query. No wildcards, regular \
expressions or operators: every character is literal. Results are paths, sorted.";

impl MemoryStorage {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn read_map(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Stored>> {
        // A panic while holding the lock cannot leave the map half-updated (every update
        // is a single insert or remove), so a poisoned lock is still safe to use.
        self.files.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_map(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Stored>> {
        self.files.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether some key of `files` lies below `path` (so `path` is a directory).
fn is_dir(files: &BTreeMap<String, Stored>, path: &str) -> bool {
    let prefix = format!("{path}/");
    files
        .range(prefix.clone()..)
        .next()
        .is_some_and(|(k, _)| k.starts_with(&prefix))
}

/// `content` copied into a new buffer, allocated fallibly: a failed allocation is an I/O
/// error, not an abort.
fn copy_of(path: &str, content: &[u8]) -> Result<Vec<u8>, StorageError> {
    let mut copy = Vec::new();
    copy.try_reserve_exact(content.len()).map_err(|_| {
        StorageError::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!("no memory for a copy of {} bytes", content.len()),
            ),
        )
    })?;
    copy.extend_from_slice(content);
    Ok(copy)
}

/// The file at `path` of `files`, for `read` and `rename`: `IsDirectory` or `NotFound`
/// when there is none.
fn stored<'a>(files: &'a BTreeMap<String, Stored>, path: &str) -> Result<&'a Stored, StorageError> {
    match files.get(path) {
        Some(f) => Ok(f),
        None if is_dir(files, path) => Err(StorageError::IsDirectory { path: path.into() }),
        None => Err(StorageError::NotFound { path: path.into() }),
    }
}

/// Whether `path` can be a file in `files`: not a directory, and no ancestor a file.
fn check_writable(files: &BTreeMap<String, Stored>, path: &str) -> Result<(), StorageError> {
    if is_dir(files, path) {
        return Err(StorageError::IsDirectory { path: path.into() });
    }
    for (i, _) in path.match_indices('/') {
        let parent = &path[..i];
        if files.contains_key(parent) {
            return Err(StorageError::ParentIsFile {
                path: path.into(),
                parent: parent.into(),
            });
        }
    }
    Ok(())
}

impl Storage for MemoryStorage {
    fn read(&self, path: &str) -> Result<FileContent, StorageError> {
        self.read_capped(path, super::MAX_READ_BYTES)
    }

    /// Checks the size before it copies the content (under the read lock).
    fn read_capped(&self, path: &str, max_bytes: u64) -> Result<FileContent, StorageError> {
        validate_path("path", path)?;
        let files = self.read_map();
        let f = stored(&files, path)?;
        let size = f.content.len() as u64;
        if size > max_bytes {
            return Err(StorageError::FileTooLarge {
                path: path.into(),
                size,
                limit: max_bytes,
            });
        }
        Ok(FileContent {
            content: copy_of(path, &f.content)?,
            content_type: f.content_type.clone(),
            size,
            updated_at: f.updated_at,
        })
    }

    /// Compares and replaces under one write lock, so no other writer comes between.
    fn write_if_unchanged(
        &self,
        path: &str,
        expected: &[u8],
        content: &[u8],
        content_type: &str,
    ) -> Result<(), StorageError> {
        validate_path("path", path)?;
        let content = copy_of(path, content)?;
        let mut files = self.write_map();
        let Some(current) = files.get_mut(path) else {
            return Err(StorageError::Changed { path: path.into() });
        };
        if current.content != expected {
            return Err(StorageError::Changed { path: path.into() });
        }
        current.content = content;
        current.content_type = if content_type.is_empty() {
            content_type_for(path).to_owned()
        } else {
            content_type.to_owned()
        };
        current.updated_at = SystemTime::now();
        Ok(())
    }

    fn rename(&self, from: &str, to: &str, overwrite: bool) -> Result<bool, StorageError> {
        validate_path("path", from)?;
        validate_path("path", to)?;
        let mut files = self.write_map();
        stored(&files, from)?;
        if from == to {
            return Ok(false);
        }
        check_writable(&files, to)?;
        let replaced = files.contains_key(to);
        if replaced && !overwrite {
            return Err(StorageError::AlreadyExists { path: to.into() });
        }
        let Some(mut file) = files.remove(from) else {
            return Err(StorageError::NotFound { path: from.into() });
        };
        if !extension(from).eq_ignore_ascii_case(extension(to)) {
            content_type_for(to).clone_into(&mut file.content_type);
        }
        files.insert(to.to_owned(), file);
        Ok(replaced)
    }

    fn exists(&self, path: &str) -> Result<bool, StorageError> {
        validate_path("path", path)?;
        let files = self.read_map();
        if files.contains_key(path) {
            Ok(true)
        } else if is_dir(&files, path) {
            Err(StorageError::IsDirectory { path: path.into() })
        } else {
            Ok(false)
        }
    }

    fn write(&self, path: &str, content: &[u8], content_type: &str) -> Result<(), StorageError> {
        validate_path("path", path)?;
        let content = copy_of(path, content)?;
        let mut files = self.write_map();
        check_writable(&files, path)?;
        let content_type = if content_type.is_empty() {
            content_type_for(path).to_owned()
        } else {
            content_type.to_owned()
        };
        files.insert(
            path.to_owned(),
            Stored {
                content,
                content_type,
                updated_at: SystemTime::now(),
            },
        );
        Ok(())
    }

    fn delete(&self, path: &str) -> Result<(), StorageError> {
        validate_path("path", path)?;
        let mut files = self.write_map();
        match files.remove(path) {
            Some(_) => Ok(()),
            None if is_dir(&files, path) => Err(StorageError::IsDirectory { path: path.into() }),
            None => Err(StorageError::NotFound { path: path.into() }),
        }
    }

    fn list(&self) -> Result<Vec<FileEntry>, StorageError> {
        Ok(self
            .read_map()
            .iter()
            .map(|(path, f)| FileEntry {
                path: path.clone(),
                size: f.content.len() as u64,
                updated_at: f.updated_at,
            })
            .collect())
    }

    /// Walks the map in chunks of `VISIT_CHUNK` (1,024) paths, each copied under the read lock
    /// and visited after it is released (so a visitor may call the store, and writers
    /// wait at most one chunk's copy).
    fn visit_paths(
        &self,
        visit: &mut dyn FnMut(String) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        self.visit_files(&mut |entry| visit(entry.path))
    }

    /// As [`visit_paths`](Storage::visit_paths), with sizes and times.
    fn visit_files(
        &self,
        visit: &mut dyn FnMut(FileEntry) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        let mut after: Option<String> = None;
        loop {
            let chunk: Vec<FileEntry> = {
                let files = self.read_map();
                let from = match &after {
                    Some(last) => Bound::Excluded(last.as_str()),
                    None => Bound::Unbounded,
                };
                files
                    .range::<str, _>((from, Bound::Unbounded))
                    .take(VISIT_CHUNK)
                    .map(|(path, f)| FileEntry {
                        path: path.clone(),
                        size: f.content.len() as u64,
                        updated_at: f.updated_at,
                    })
                    .collect()
            };
            let Some(last) = chunk.last() else {
                return Ok(());
            };
            after = Some(last.path.clone());
            for entry in chunk {
                if visit(entry).is_break() {
                    return Ok(());
                }
            }
        }
    }

    fn searchable(&self) -> Option<&dyn Searchable> {
        Some(self)
    }
}

impl Searchable for MemoryStorage {
    fn search(&self, query: &str) -> Result<Vec<String>, StorageError> {
        let terms = parse_query(query)?;
        let files = self.read_map();
        Ok(files
            .iter()
            .filter(|(path, f)| {
                let path = path.to_lowercase();
                let content = String::from_utf8_lossy(&f.content).to_lowercase();
                terms
                    .iter()
                    .all(|t| path.contains(t.as_str()) || content.contains(t.as_str()))
            })
            .map(|(path, _)| path.clone())
            .collect())
    }

    fn search_syntax(&self) -> String {
        SYNTAX.to_owned()
    }
}

/// The extension of the last segment of `path`, without the dot (`""` for none).
fn extension(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.rsplit_once('.').map_or("", |(_, ext)| ext)
}

/// Splits `query` into lowercase terms: words, and `"quoted phrases"`.
fn parse_query(query: &str) -> Result<Vec<String>, StorageError> {
    let mut terms = Vec::new();
    let mut rest = query;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let (term, after) = if let Some(quoted) = rest.strip_prefix('"') {
            quoted.split_once('"').unwrap_or((quoted, ""))
        } else {
            let end = rest
                .find(|c: char| c.is_whitespace() || c == '"')
                .unwrap_or(rest.len());
            rest.split_at(end)
        };
        if !term.trim().is_empty() {
            terms.push(term.to_lowercase());
        }
        rest = after;
    }
    if terms.is_empty() {
        return Err(StorageError::InvalidQuery {
            query: query.to_owned(),
            reason: "it has no terms; give at least one word to look for".to_owned(),
        });
    }
    Ok(terms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::PathErrorReason;

    fn store(files: &[(&str, &str)]) -> MemoryStorage {
        let s = MemoryStorage::new();
        for (p, c) in files {
            s.write(p, c.as_bytes(), "").unwrap();
        }
        s
    }

    #[test]
    fn query_parsing() {
        assert_eq!(parse_query("a  B\tc").unwrap(), ["a", "b", "c"]);
        assert_eq!(
            parse_query("x \"Release Notes\" y").unwrap(),
            ["x", "release notes", "y"]
        );
        assert_eq!(parse_query("a\"b c\"d").unwrap(), ["a", "b c", "d"]);
        assert_eq!(parse_query("\"open phrase").unwrap(), ["open phrase"]);
        for q in ["", "   ", "\"\"", "\" \" \"\""] {
            let err = parse_query(q).unwrap_err();
            assert!(
                matches!(&err, StorageError::InvalidQuery { query, .. } if query == q),
                "{q:?}: {err}"
            );
        }
        assert_eq!(
            parse_query(" ").unwrap_err().to_string(),
            "invalid search query \" \": it has no terms; give at least one word to look for"
        );
    }

    #[test]
    fn search_matches_every_term_in_path_or_content() {
        let s = store(&[
            ("notes/alpha.md", "The Release notes for v1"),
            ("notes/beta.md", "release planning; notes later"),
            ("src/lib.rs", "fn alpha() {}"),
        ]);
        let q = |q: &str| s.search(q).unwrap();
        assert_eq!(q("alpha"), ["notes/alpha.md", "src/lib.rs"]);
        assert_eq!(q("RELEASE notes"), ["notes/alpha.md", "notes/beta.md"]);
        assert_eq!(q("\"release notes\""), ["notes/alpha.md"]);
        assert_eq!(q("notes alpha"), ["notes/alpha.md"]);
        assert_eq!(q(".rs"), ["src/lib.rs"]);
        assert_eq!(q("a.*"), Vec::<String>::new());
        assert!(s.search_syntax().contains("double quotes"));
    }

    #[test]
    fn directories_are_not_files() {
        let s = store(&[("a/b.md", "x")]);
        assert!(matches!(s.read("a"), Err(StorageError::IsDirectory { path }) if path == "a"));
        assert!(matches!(s.delete("a"), Err(StorageError::IsDirectory { path }) if path == "a"));
        assert!(matches!(
            s.write("a", b"", ""),
            Err(StorageError::IsDirectory { path }) if path == "a"
        ));
        assert!(matches!(
            s.write("a/b.md/c", b"", ""),
            Err(StorageError::ParentIsFile { path, parent }) if path == "a/b.md/c" && parent == "a/b.md"
        ));
        // A sibling whose name merely starts with "a" is no directory marker.
        let s = store(&[("ab/x", "x"), ("a-b", "y")]);
        assert!(matches!(s.read("a"), Err(StorageError::NotFound { .. })));
    }

    #[test]
    fn content_type_kept_or_derived() {
        let s = MemoryStorage::new();
        s.write("a.bin", b"x", "application/octet-stream").unwrap();
        s.write("b.json", b"{}", "").unwrap();
        assert_eq!(
            s.read("a.bin").unwrap().content_type,
            "application/octet-stream"
        );
        assert_eq!(s.read("b.json").unwrap().content_type, "application/json");
    }

    #[test]
    fn every_method_validates() {
        let s = MemoryStorage::new();
        let reason = |r: Result<(), StorageError>| match r {
            Err(StorageError::InvalidPath(e)) if e.argument == "path" => e.reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(reason(s.read("../x").map(drop)), PathErrorReason::DotDot);
        assert_eq!(reason(s.write("/x", b"", "")), PathErrorReason::Absolute);
        assert_eq!(reason(s.delete("a\0")), PathErrorReason::Nul);
        assert!(s.list().unwrap().is_empty());
    }

    #[test]
    fn concurrent_writers() {
        let s = std::sync::Arc::new(MemoryStorage::new());
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let s = std::sync::Arc::clone(&s);
                std::thread::spawn(move || {
                    for j in 0..50 {
                        s.write(&format!("t{i}/f{j}"), b"x", "").unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(s.list().unwrap().len(), 400);
    }
}
