//! [`FilePolicy`]: the storage rules a caller applies on top of the path rules before a
//! [`Storage`](super::Storage) is called: hidden paths, allowed extensions, the size cap,
//! read-only. The built-in file tools and a granted plugin's `files` import apply the same
//! policy, so a plugin reaches exactly what the built-in tools reach.

use super::{validate_path, PathError};

/// Default cap for written and moved files: 1 MiB.
pub(crate) const DEFAULT_MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The checks applied to every path argument and every file written: built from
/// [`FilePolicy::default`] (which allows everything up to 1 MiB per file) with the
/// `with_*` setters, read back through the getters.
///
/// ```
/// use toolhost::vfs::FilePolicy;
///
/// let policy = FilePolicy::default()
///     .with_hide_hidden_paths(true)
///     .with_allowed_extensions(Some(vec![".md".into()]));
/// assert_eq!(policy.max_file_bytes(), 1024 * 1024);
/// assert!(policy.check("path", "notes/Todo.MD").is_ok());
/// assert!(policy.check("path", "notes/.secret.md").is_err());
/// assert!(policy.check("path", "main.rs").is_err());
/// assert!(!policy.visible("_drafts/a.md"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePolicy {
    /// Paths with a segment starting with `_` or `.` are hidden and refused.
    pub(crate) hide_hidden_paths: bool,
    /// Allowed extensions (`".md"`), case-insensitive; `None` allows all.
    pub(crate) allowed_extensions: Option<Vec<String>>,
    /// Cap for written and moved files, in bytes.
    pub(crate) max_file_bytes: u64,
    /// Nothing may be written, moved or deleted ([`FilePolicy::check_write`] refuses
    /// every path). The built-in tools get it by not registering their writing tools;
    /// a granted plugin's `files` import checks it on every `write` and `delete`.
    pub(crate) read_only: bool,
}

impl Default for FilePolicy {
    fn default() -> Self {
        Self {
            hide_hidden_paths: false,
            allowed_extensions: None,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            read_only: false,
        }
    }
}

impl FilePolicy {
    /// Whether hidden paths are hidden and refused ([`with_hide_hidden_paths`](Self::with_hide_hidden_paths)).
    pub fn hide_hidden_paths(&self) -> bool {
        self.hide_hidden_paths
    }

    /// Paths with a segment starting with `_` or `.` are hidden and refused
    /// ([`PolicyError::Hidden`]). Default: `false`.
    #[must_use]
    pub fn with_hide_hidden_paths(mut self, hide_hidden_paths: bool) -> Self {
        self.hide_hidden_paths = hide_hidden_paths;
        self
    }

    /// The allowed extensions, `None` for all ([`with_allowed_extensions`](Self::with_allowed_extensions)).
    pub fn allowed_extensions(&self) -> Option<&[String]> {
        self.allowed_extensions.as_deref()
    }

    /// Allowed extensions (`".md"`, with or without the dot), compared case-insensitively;
    /// other paths are refused ([`PolicyError::ExtensionNotAllowed`]) and hidden from
    /// listings. Default: `None`, which allows all.
    #[must_use]
    pub fn with_allowed_extensions(mut self, allowed_extensions: Option<Vec<String>>) -> Self {
        self.allowed_extensions = allowed_extensions;
        self
    }

    /// Cap for written and moved files, in bytes ([`with_max_file_bytes`](Self::with_max_file_bytes)).
    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    /// Cap for written and moved files, in bytes. Default: 1 MiB. A larger file is refused
    /// by [`FilePolicy::check_size`] ([`PolicyError::TooLarge`]); nothing is clamped.
    #[must_use]
    pub fn with_max_file_bytes(mut self, max_file_bytes: u64) -> Self {
        self.max_file_bytes = max_file_bytes;
        self
    }

    /// Whether nothing may be written, moved or deleted ([`with_read_only`](Self::with_read_only)).
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// Nothing may be written, moved or deleted: [`FilePolicy::check_write`] refuses every
    /// path ([`PolicyError::ReadOnly`]). Default: `false`. The built-in tools get it by not
    /// registering their writing tools; a granted plugin's `files` import checks it on every
    /// `write` and `delete`.
    #[must_use]
    pub fn with_read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }
}

/// Why the policy refused a path or a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The path breaks the path rules.
    #[error(transparent)]
    InvalidPath(#[from] PathError),
    /// A segment starts with `_` or `.` and hidden paths are hidden.
    #[error("argument \"{argument}\" is \"{path}\", a hidden path (a segment starts with _ or .); hidden paths are not available here, use another path")]
    Hidden {
        /// The argument that held the path.
        argument: String,
        /// The refused path.
        path: String,
    },
    /// The extension is not in the allowed list.
    #[error("argument \"{argument}\" is \"{path}\", whose extension is not allowed here; use a path ending in one of: {}", allowed.join(", "))]
    ExtensionNotAllowed {
        /// The argument that held the path.
        argument: String,
        /// The refused path.
        path: String,
        /// The allowed extensions.
        allowed: Vec<String>,
    },
    /// A write, move or delete under [`FilePolicy::read_only`].
    #[error("\"{path}\" cannot be changed: this host is read-only (started with --read-only), so no tool may write, move or delete files; only read them")]
    ReadOnly {
        /// The refused path.
        path: String,
    },
    /// The file would be larger than the cap.
    #[error("\"{path}\" would be {size} bytes, over the {limit}-byte file size limit")]
    TooLarge {
        /// The file's path.
        path: String,
        /// Its size.
        size: u64,
        /// The cap.
        limit: u64,
    },
}

impl FilePolicy {
    /// Checks a path argument: [`validate_path`], then hidden paths, then extensions.
    ///
    /// # Errors
    /// The first rule the path breaks.
    pub fn check(&self, argument: &str, path: &str) -> Result<(), PolicyError> {
        validate_path(argument, path)?;
        if self.hide_hidden_paths && is_hidden(path) {
            return Err(PolicyError::Hidden {
                argument: argument.to_owned(),
                path: path.to_owned(),
            });
        }
        if let Some(allowed) = &self.allowed_extensions {
            if !extension_allowed(allowed, path) {
                return Err(PolicyError::ExtensionNotAllowed {
                    argument: argument.to_owned(),
                    path: path.to_owned(),
                    allowed: allowed.clone(),
                });
            }
        }
        Ok(())
    }

    /// Checks a path about to be written or deleted: [`FilePolicy::read_only`], then
    /// [`FilePolicy::check`].
    ///
    /// # Errors
    /// [`PolicyError::ReadOnly`], or the first rule the path breaks.
    pub fn check_write(&self, argument: &str, path: &str) -> Result<(), PolicyError> {
        if self.read_only {
            return Err(PolicyError::ReadOnly {
                path: path.to_owned(),
            });
        }
        self.check(argument, path)
    }

    /// Checks a directory that confines a caller to a sub-tree (a plugin's
    /// `grants.root`): the path rules and hidden segments, as for any path argument.
    /// Extensions do not apply to a directory; they apply to every file path below it,
    /// which is checked in full (root + path) on each call.
    ///
    /// # Errors
    /// The first rule the directory breaks.
    pub fn check_root(&self, argument: &str, root: &str) -> Result<(), PolicyError> {
        validate_path(argument, root)?;
        if self.hide_hidden_paths && is_hidden(root) {
            return Err(PolicyError::Hidden {
                argument: argument.to_owned(),
                path: root.to_owned(),
            });
        }
        Ok(())
    }

    /// Whether a stored path shows in listings (list_files, grep, glob, search).
    pub fn visible(&self, path: &str) -> bool {
        !(self.hide_hidden_paths && is_hidden(path))
            && self
                .allowed_extensions
                .as_ref()
                .is_none_or(|allowed| extension_allowed(allowed, path))
    }

    /// Checks the size of a file about to be written.
    ///
    /// # Errors
    /// [`PolicyError::TooLarge`] over [`FilePolicy::max_file_bytes()`].
    pub fn check_size(&self, path: &str, size: u64) -> Result<(), PolicyError> {
        if size > self.max_file_bytes {
            return Err(PolicyError::TooLarge {
                path: path.to_owned(),
                size,
                limit: self.max_file_bytes,
            });
        }
        Ok(())
    }
}

/// A segment starts with `_` or `.`.
fn is_hidden(path: &str) -> bool {
    path.split('/')
        .any(|segment| segment.starts_with('_') || segment.starts_with('.'))
}

/// The path ends in one of `allowed` (each with or without its leading dot), ignoring case.
fn extension_allowed(allowed: &[String], path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let Some((_, extension)) = name.rsplit_once('.') else {
        return false;
    };
    allowed
        .iter()
        .any(|want| want.trim_start_matches('.').eq_ignore_ascii_case(extension))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_segments_anywhere() {
        let policy = FilePolicy {
            hide_hidden_paths: true,
            ..FilePolicy::default()
        };
        for path in [".env", "a/.git/config", "_drafts/x.md", "a/_b"] {
            assert!(
                matches!(policy.check("path", path), Err(PolicyError::Hidden { .. })),
                "{path}"
            );
            assert!(!policy.visible(path));
        }
        assert!(policy.check("path", "a/b_c.md").is_ok());
        assert!(FilePolicy::default().check("path", ".env").is_ok());
    }

    #[test]
    fn extensions_are_case_insensitive_with_or_without_dot() {
        let policy = FilePolicy {
            allowed_extensions: Some(vec![".md".into(), "TXT".into()]),
            ..FilePolicy::default()
        };
        for path in ["a.md", "A.MD", "dir/b.Txt"] {
            assert!(policy.check("path", path).is_ok(), "{path}");
        }
        for path in ["a.rs", "md", "dir.md/file", "a.md.bak"] {
            let err = policy.check("source", path).unwrap_err();
            assert!(
                matches!(err, PolicyError::ExtensionNotAllowed { .. }),
                "{path}"
            );
            assert!(err.to_string().starts_with("argument \"source\""));
        }
    }

    #[test]
    fn read_only_refuses_every_write_first() {
        let policy = FilePolicy {
            read_only: true,
            ..FilePolicy::default()
        };
        assert!(policy.check("path", "a.md").is_ok());
        let err = policy.check_write("path", "../a.md").unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"../a.md\" cannot be changed: this host is read-only (started with --read-only), so no tool may write, move or delete files; only read them"
        );
        assert!(FilePolicy::default().check_write("path", "a.md").is_ok());
    }

    #[test]
    fn a_root_is_checked_for_hidden_segments_but_not_extensions() {
        let policy = FilePolicy {
            hide_hidden_paths: true,
            allowed_extensions: Some(vec![".md".into()]),
            ..FilePolicy::default()
        };
        assert!(policy.check_root("root", "docs/notes").is_ok());
        for root in [".git", "a/_b", "a/.ssh/c"] {
            assert!(matches!(
                policy.check_root("root", root),
                Err(PolicyError::Hidden { .. })
            ));
        }
        assert!(matches!(
            policy.check_root("root", "a/../b"),
            Err(PolicyError::InvalidPath(_))
        ));
        assert!(FilePolicy::default().check_root("root", ".git").is_ok());
    }

    #[test]
    fn size_cap_is_inclusive() {
        let policy = FilePolicy {
            max_file_bytes: 10,
            ..FilePolicy::default()
        };
        assert!(policy.check_size("a", 10).is_ok());
        assert_eq!(
            policy.check_size("a", 11),
            Err(PolicyError::TooLarge {
                path: "a".into(),
                size: 11,
                limit: 10
            })
        );
    }
}
