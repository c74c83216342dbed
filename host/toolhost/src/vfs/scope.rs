//! [`scope`]: a view of a store bound to one sub-tree, for multi-tenant callers.
//!
//! A [`ScopedStorage`] for prefix `tenants/acme` turns `notes.md` into
//! `tenants/acme/notes.md` before it calls the store it wraps, lists only the files below
//! `tenants/acme/` (with the prefix stripped) and strips the prefix from the paths in its
//! errors, so the caller never learns it. Paths are validated before the prefix is added,
//! so no path reaches above the prefix, and since the prefix is joined with a `/`, `a`
//! never sees `ab/x`.
//!
//! ```
//! use std::sync::Arc;
//! use toolhost::vfs::{scope, MemoryStorage, Storage};
//!
//! let shared = Arc::new(MemoryStorage::new());
//! shared.write("acme/plan.md", b"acme's plan", "")?;
//! shared.write("globex/plan.md", b"globex's plan", "")?;
//! let acme = scope(shared.clone(), "acme")?;
//! assert_eq!(acme.read("plan.md")?.content, b"acme's plan");
//! let paths: Vec<_> = acme.list()?.into_iter().map(|f| f.path).collect();
//! assert_eq!(paths, ["plan.md"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::ops::ControlFlow;
use std::sync::Arc;

use super::{
    validate_path, FileContent, FileEntry, OpenedFile, PathError, Searchable, Storage, StorageError,
};

/// A [`Storage`] bound to the sub-tree `prefix` of another; made by [`scope`].
///
/// It is [`Searchable`] when the wrapped store is, with results filtered to the sub-tree.
#[derive(Clone)]
pub struct ScopedStorage {
    inner: Arc<dyn Storage>,
    /// The prefix, with a trailing `/`.
    prefix: String,
}

impl fmt::Debug for ScopedStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedStorage")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// Binds `storage` to the sub-tree `prefix` (a relative path such as `tenants/acme`).
///
/// # Errors
/// [`StorageError::InvalidPath`] naming the argument `"prefix"` when `prefix` breaks the
/// rules of [`validate_path`].
pub fn scope(storage: Arc<dyn Storage>, prefix: &str) -> Result<ScopedStorage, StorageError> {
    validate_path("prefix", prefix)?;
    Ok(ScopedStorage {
        inner: storage,
        prefix: format!("{prefix}/"),
    })
}

impl ScopedStorage {
    /// The prefix this view is bound to, without a trailing `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix[..self.prefix.len() - 1]
    }

    /// Validates `path` and prefixes it.
    fn inner_path(&self, path: &str) -> Result<String, StorageError> {
        validate_path("path", path)?;
        Ok(format!("{}{path}", self.prefix))
    }

    /// `inner` without the prefix; a path outside the sub-tree (an ancestor of the
    /// prefix, in an error) becomes `path`, the caller's own argument.
    fn outer(&self, inner: &str, path: &str) -> String {
        match inner.strip_prefix(&self.prefix) {
            Some(rest) => rest.to_owned(),
            None => path.to_owned(),
        }
    }

    /// Rewrites the paths in an error of the wrapped store into this view's terms.
    fn map_err(&self, err: StorageError, path: &str) -> StorageError {
        match err {
            StorageError::NotFound { path: p } => StorageError::NotFound {
                path: self.outer(&p, path),
            },
            StorageError::InvalidPath(e) => StorageError::InvalidPath(PathError {
                path: self.outer(&e.path, path),
                ..e
            }),
            StorageError::Denied { path: p, reason } => StorageError::Denied {
                path: self.outer(&p, path),
                reason: reason.replace(&self.prefix, ""),
            },
            StorageError::IsDirectory { path: p } => StorageError::IsDirectory {
                path: self.outer(&p, path),
            },
            StorageError::ParentIsFile { path: p, parent } if !parent.starts_with(&self.prefix) => {
                let _ = p;
                StorageError::Denied {
                    path: path.to_owned(),
                    reason: "the root of this store is not a directory, so nothing can be written; report this to the operator".into(),
                }
            }
            StorageError::ParentIsFile { path: p, parent } => StorageError::ParentIsFile {
                path: self.outer(&p, path),
                parent: self.outer(&parent, path),
            },
            StorageError::FileTooLarge {
                path: p,
                size,
                limit,
            } => StorageError::FileTooLarge {
                path: self.outer(&p, path),
                size,
                limit,
            },
            StorageError::Changed { path: p } => StorageError::Changed {
                path: self.outer(&p, path),
            },
            StorageError::AlreadyExists { path: p } => StorageError::AlreadyExists {
                path: self.outer(&p, path),
            },
            StorageError::Io { path: p, source } => StorageError::Io {
                path: self.outer(&p, path),
                source,
            },
            other => other,
        }
    }
}

impl Storage for ScopedStorage {
    fn read(&self, path: &str) -> Result<FileContent, StorageError> {
        let inner = self.inner_path(path)?;
        self.inner.read(&inner).map_err(|e| self.map_err(e, path))
    }

    fn read_capped(&self, path: &str, max_bytes: u64) -> Result<FileContent, StorageError> {
        let inner = self.inner_path(path)?;
        self.inner
            .read_capped(&inner, max_bytes)
            .map_err(|e| self.map_err(e, path))
    }

    fn write_if_unchanged(
        &self,
        path: &str,
        expected: &[u8],
        content: &[u8],
        content_type: &str,
    ) -> Result<(), StorageError> {
        let inner = self.inner_path(path)?;
        self.inner
            .write_if_unchanged(&inner, expected, content, content_type)
            .map_err(|e| self.map_err(e, path))
    }

    fn rename(&self, from: &str, to: &str, overwrite: bool) -> Result<bool, StorageError> {
        let inner_from = self.inner_path(from)?;
        let inner_to = self.inner_path(to)?;
        self.inner
            .rename(&inner_from, &inner_to, overwrite)
            .map_err(|e| self.map_err(e, from))
    }

    fn write(&self, path: &str, content: &[u8], content_type: &str) -> Result<(), StorageError> {
        let inner = self.inner_path(path)?;
        self.inner
            .write(&inner, content, content_type)
            .map_err(|e| self.map_err(e, path))
    }

    fn exists(&self, path: &str) -> Result<bool, StorageError> {
        let inner = self.inner_path(path)?;
        self.inner.exists(&inner).map_err(|e| self.map_err(e, path))
    }

    fn delete(&self, path: &str) -> Result<(), StorageError> {
        let inner = self.inner_path(path)?;
        self.inner.delete(&inner).map_err(|e| self.map_err(e, path))
    }

    fn list(&self) -> Result<Vec<FileEntry>, StorageError> {
        let all = self.inner.list().map_err(|e| self.map_err(e, "."))?;
        Ok(all
            .into_iter()
            .filter_map(|f| {
                let path = f.path.strip_prefix(&self.prefix)?.to_owned();
                Some(FileEntry { path, ..f })
            })
            .collect())
    }

    fn list_paths(&self) -> Result<Vec<String>, StorageError> {
        let all = self.inner.list_paths().map_err(|e| self.map_err(e, "."))?;
        Ok(all
            .into_iter()
            .filter_map(|path| Some(path.strip_prefix(&self.prefix)?.to_owned()))
            .collect())
    }

    /// The wrapped store's walk, kept to the sub-tree: its paths form one run in path
    /// order, so the walk stops at the first path past it.
    fn visit_paths(
        &self,
        visit: &mut dyn FnMut(String) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        let mut inside = false;
        self.inner
            .visit_paths(&mut |path| match path.strip_prefix(&self.prefix) {
                Some(rest) => {
                    inside = true;
                    visit(rest.to_owned())
                }
                None if inside => ControlFlow::Break(()),
                None => ControlFlow::Continue(()),
            })
            .map_err(|e| self.map_err(e, "."))
    }

    /// As [`visit_paths`](Storage::visit_paths), with sizes and times.
    fn visit_files(
        &self,
        visit: &mut dyn FnMut(FileEntry) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        let mut inside = false;
        self.inner
            .visit_files(&mut |entry| match entry.path.strip_prefix(&self.prefix) {
                Some(rest) => {
                    inside = true;
                    visit(FileEntry {
                        path: rest.to_owned(),
                        ..entry
                    })
                }
                None if inside => ControlFlow::Break(()),
                None => ControlFlow::Continue(()),
            })
            .map_err(|e| self.map_err(e, "."))
    }

    fn open_read(
        &self,
        path: &str,
        max_bytes: u64,
    ) -> Result<Box<dyn OpenedFile + '_>, StorageError> {
        let inner = self.inner_path(path)?;
        let file = self
            .inner
            .open_read(&inner, max_bytes)
            .map_err(|e| self.map_err(e, path))?;
        Ok(Box::new(ScopedOpened {
            scope: self,
            path: path.to_owned(),
            file,
        }))
    }

    fn searchable(&self) -> Option<&dyn Searchable> {
        self.inner.searchable().map(|_| self as &dyn Searchable)
    }
}

/// A file [`ScopedStorage::open_read`] opened: the wrapped store's, with its errors in
/// the view's terms.
struct ScopedOpened<'a> {
    scope: &'a ScopedStorage,
    path: String,
    file: Box<dyn OpenedFile + 'a>,
}

impl OpenedFile for ScopedOpened<'_> {
    fn size(&self) -> u64 {
        self.file.size()
    }

    fn read_into(self: Box<Self>, buf: &mut Vec<u8>) -> Result<(), StorageError> {
        let ScopedOpened { scope, path, file } = *self;
        file.read_into(buf).map_err(|e| scope.map_err(e, &path))
    }
}

impl Searchable for ScopedStorage {
    fn search(&self, query: &str) -> Result<Vec<String>, StorageError> {
        let Some(inner) = self.inner.searchable() else {
            return Ok(Vec::new());
        };
        let found = inner.search(query).map_err(|e| self.map_err(e, "."))?;
        Ok(found
            .into_iter()
            .filter_map(|p| p.strip_prefix(&self.prefix).map(str::to_owned))
            .collect())
    }

    fn search_syntax(&self) -> String {
        self.inner
            .searchable()
            .map(Searchable::search_syntax)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{MemoryStorage, PathErrorReason};

    fn shared() -> Arc<MemoryStorage> {
        let s = Arc::new(MemoryStorage::new());
        for p in ["a/x.md", "a/sub/y.md", "ab/x.md", "b.md", "a.md"] {
            s.write(p, p.as_bytes(), "").unwrap();
        }
        s
    }

    #[test]
    fn sees_only_its_subtree() {
        let a = scope(shared(), "a").unwrap();
        let paths: Vec<_> = a.list().unwrap().into_iter().map(|f| f.path).collect();
        assert_eq!(paths, ["sub/y.md", "x.md"]);
        assert_eq!(a.read("x.md").unwrap().content, b"a/x.md");
        assert_eq!(a.prefix(), "a");
    }

    /// Found by the path_scope fuzz target: a path under the length limit that the prefix
    /// pushes over it was refused with "N bytes long, over the limit of 1024 bytes", N
    /// being under 1024.
    #[test]
    fn a_path_the_prefix_makes_too_long_is_refused_truthfully() {
        let inner = shared();
        let scoped = scope(Arc::clone(&inner) as Arc<dyn Storage>, "tenant").unwrap();
        let segment = "s".repeat(255);
        let path = [segment.as_str(); 4].join("/");
        assert!(path.len() <= crate::vfs::MAX_PATH_LEN);
        assert!(path.len() + "tenant/".len() > crate::vfs::MAX_PATH_LEN);
        match scoped.write(&path, b"x", "") {
            Err(StorageError::InvalidPath(e)) => {
                assert_eq!(
                    (e.reason, e.path.as_str()),
                    (PathErrorReason::TooLong, path.as_str())
                );
                let message = e.to_string();
                assert_eq!(
                    message,
                    format!(
                        "argument \"path\" is {} bytes long, too long for this store (at most 1024 bytes, less the store's own prefix); use a shorter path",
                        path.len()
                    )
                );
                assert!(!message.contains("tenant"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(inner.list().unwrap().len(), 5, "nothing written");
        // Under the limit with the prefix: written.
        let shorter = &path[..crate::vfs::MAX_PATH_LEN - "tenant/".len()];
        scoped.write(shorter, b"x", "").unwrap();
        assert_eq!(scoped.read(shorter).unwrap().content, b"x");
    }

    #[test]
    fn cannot_reach_siblings() {
        let a = scope(shared(), "a").unwrap();
        for (path, want) in [
            ("../ab/x.md", PathErrorReason::DotDot),
            ("../b.md", PathErrorReason::DotDot),
            ("/ab/x.md", PathErrorReason::Absolute),
        ] {
            match a.read(path) {
                Err(StorageError::InvalidPath(e)) => {
                    assert_eq!(
                        (e.argument.as_str(), e.path.as_str(), e.reason),
                        ("path", path, want)
                    );
                }
                other => panic!("{path}: {other:?}"),
            }
        }
        // "ab/x.md" is not below "a/".
        let err = a.read("b/x.md").unwrap_err();
        assert!(
            matches!(&err, StorageError::NotFound { path } if path == "b/x.md"),
            "{err:?}"
        );
    }

    #[test]
    fn errors_do_not_reveal_the_prefix() {
        let a = scope(shared(), "a").unwrap();
        let err = a.read("missing.md").unwrap_err();
        assert_eq!(
            err.to_string(),
            "no file at \"missing.md\"; call list_files to see what exists"
        );
        let err = a.write("x.md/z", b"", "").unwrap_err();
        assert!(
            matches!(&err, StorageError::ParentIsFile { path, parent } if path == "x.md/z" && parent == "x.md"),
            "{err:?}"
        );
        // The prefix itself is a file: the error names the caller's path only.
        let f = scope(shared(), "b.md").unwrap();
        let err = f.write("z", b"", "").unwrap_err();
        assert_eq!(
            err.to_string(),
            "access to \"z\" is denied: the root of this store is not a directory, so nothing can be written; report this to the operator"
        );
    }

    #[test]
    fn invalid_prefix_names_the_argument() {
        let err = scope(shared(), "../x").unwrap_err();
        assert!(
            matches!(&err, StorageError::InvalidPath(e) if e.argument == "prefix" && e.reason == PathErrorReason::DotDot),
            "{err:?}"
        );
    }

    #[test]
    fn search_is_filtered_to_the_subtree() {
        let s = shared();
        let a = scope(Arc::clone(&s) as Arc<dyn Storage>, "a").unwrap();
        let search = a.searchable().expect("inner is searchable");
        assert_eq!(search.search("x.md").unwrap(), ["x.md"]);
        assert_eq!(search.search_syntax(), s.search_syntax());
        let nested = scope(Arc::new(a), "sub").unwrap();
        assert_eq!(nested.searchable().unwrap().search("md").unwrap(), ["y.md"]);
    }

    #[test]
    fn not_searchable_over_a_plain_store() {
        let dir = tempfile::tempdir().unwrap();
        let os = Arc::new(crate::vfs::OsStorage::open(dir.path()).unwrap());
        assert!(scope(os, "a").unwrap().searchable().is_none());
    }
}
