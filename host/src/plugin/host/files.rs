//! `toolhost:plugin/files`: the host's [`Storage`] as far as the plugin was granted.
//!
//! Every call checks, in order: the grant ([`FileAccess::Read`] for `read` and `list`,
//! [`FileAccess::ReadWrite`] for `write` and `delete`), that the host has a storage, the
//! path policy ([`FilePolicy::check`], as the built-in file tools; for `write` and
//! `delete` also [`FilePolicy::read_only`]), the size cap for writes. A manifest `root`
//! confines the plugin to that sub-tree through [`crate::vfs::scope`]: paths are
//! relative to it, and nothing outside is reachable. Denials are logged (target
//! `plugin`).
//!
//! # Sandbox
//! The policy decides on the full store path, `root/path`, exactly as a built-in tool
//! decides on its path argument: the root is checked when the grant is made
//! ([`FilePolicy::check_root`]: a hidden root such as `.git` is refused when the host
//! hides hidden paths), each path is checked relative to the root (so errors name the
//! plugin's own path) and then in full (so no rule of the policy can depend on where
//! the root is), and a listing shows what the policy shows of the full paths. The
//! property test below checks, for every policy combination and thousands of
//! generated roots and paths, that a plugin addresses exactly what the built-in tools
//! allow.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::tools::{FilePolicy, PolicyError};
use crate::vfs::{content_type_for, Storage, StorageError};

use super::super::bindings::toolhost::plugin::files::{File, FileError, FileInfo, Host};
use super::super::state::ImportCtx;
use super::super::FileAccess;
use super::log::MAX_LOG_LINES_PER_CALL;

/// One plugin's file access: its grant, the storage (scoped to its root) and the policy.
pub struct FileGrant {
    plugin: String,
    access: FileAccess,
    storage: Option<Arc<dyn Storage>>,
    /// The sub-tree the plugin is confined to, for the full-path checks.
    root: Option<String>,
    policy: FilePolicy,
}

impl FileGrant {
    /// No access at all.
    #[cfg(test)]
    pub fn none(plugin: &str) -> Self {
        Self {
            plugin: plugin.to_owned(),
            access: FileAccess::None,
            storage: None,
            root: None,
            policy: FilePolicy::default(),
        }
    }

    /// `access` to `storage`, confined to `root` when given.
    ///
    /// # Errors
    /// [`PolicyError::InvalidPath`] when `root` breaks the path rules,
    /// [`PolicyError::Hidden`] when it has a hidden segment and `policy` hides them
    /// (argument `"root"`).
    pub fn new(
        plugin: &str,
        access: FileAccess,
        storage: Option<Arc<dyn Storage>>,
        root: Option<&str>,
        policy: FilePolicy,
    ) -> Result<Self, PolicyError> {
        if let Some(root) = root {
            policy.check_root("root", root)?;
        }
        let storage = match (storage, root) {
            (Some(storage), Some(root)) => match crate::vfs::scope(storage, root) {
                Ok(scoped) => Some(Arc::new(scoped) as Arc<dyn Storage>),
                Err(StorageError::InvalidPath(err)) => return Err(err.into()),
                // `scope` checks the path rules only, which `check_root` passed.
                Err(other) => unreachable!("scope failed on a valid root: {other}"),
            },
            (storage, _) => storage,
        };
        Ok(Self {
            plugin: plugin.to_owned(),
            access,
            storage,
            root: root.map(str::to_owned),
            policy,
        })
    }

    /// The storage, when the grant covers `need`.
    fn storage(&self, need: FileAccess) -> Result<&dyn Storage, FileError> {
        let plugin = &self.plugin;
        if self.access < need {
            return Err(FileError::Denied(match self.access {
                FileAccess::None => format!(
                    "plugin \"{plugin}\" has no file access: its manifest grants none. To grant it, put `[grants] files = \"{need}\"` in {plugin}.toml next to {plugin}.wasm and start the host with `--plugin-files {need}`"
                ),
                _ => format!(
                    "plugin \"{plugin}\" may only read files; writing needs `files = \"read-write\"` in {plugin}.toml and a host started with `--plugin-files read-write`"
                ),
            }));
        }
        self.storage.as_deref().ok_or_else(|| {
            FileError::Denied(
                "the host has no file storage for plugins; start it with a storage directory"
                    .into(),
            )
        })
    }

    /// Checks `path` with the policy the built-in tools apply to their path arguments:
    /// relative to the root first (so the error names the plugin's own path), then as
    /// the full store path `root/path` (so the decision is the one a built-in tool would
    /// make on that file). `write` adds [`FilePolicy::read_only`].
    fn check_path(&self, path: &str, write: bool) -> Result<(), FileError> {
        let check = |path: &str| {
            if write {
                self.policy.check_write("path", path)
            } else {
                self.policy.check("path", path)
            }
            .map_err(policy_error)
        };
        check(path)?;
        if let Some(root) = &self.root {
            check(&format!("{root}/{path}"))?;
        }
        Ok(())
    }

    /// Whether a listed `path` (relative to the root) shows, decided on the full path.
    fn visible(&self, path: &str) -> bool {
        match &self.root {
            Some(root) => self.policy.visible(&format!("{root}/{path}")),
            None => self.policy.visible(path),
        }
    }

    /// `read`: the whole file at `path`.
    pub fn read(&self, path: &str) -> Result<File, FileError> {
        let storage = self.storage(FileAccess::Read)?;
        self.check_path(path, false)?;
        let file = storage.read(path).map_err(storage_error)?;
        Ok(File {
            size: file.size,
            updated_at_ms: millis(file.updated_at),
            content_type: file.content_type,
            content: file.content,
        })
    }

    /// `list`: every file the policy shows, sorted by path.
    pub fn list(&self) -> Result<Vec<FileInfo>, FileError> {
        let storage = self.storage(FileAccess::Read)?;
        let entries = storage.list().map_err(storage_error)?;
        Ok(entries
            .into_iter()
            .filter(|entry| self.visible(&entry.path))
            .map(|entry| FileInfo {
                updated_at_ms: millis(entry.updated_at),
                size: entry.size,
                path: entry.path,
            })
            .collect())
    }

    /// `write`: creates or replaces the file at `path`.
    pub fn write(
        &self,
        path: &str,
        content: &[u8],
        content_type: Option<&str>,
    ) -> Result<(), FileError> {
        let storage = self.storage(FileAccess::ReadWrite)?;
        self.check_path(path, true)?;
        self.policy
            .check_size(path, content.len() as u64)
            .map_err(policy_error)?;
        let content_type = content_type.unwrap_or_else(|| content_type_for(path));
        storage
            .write(path, content, content_type)
            .map_err(storage_error)
    }

    /// `delete`: removes the file at `path`.
    pub fn delete(&self, path: &str) -> Result<(), FileError> {
        let storage = self.storage(FileAccess::ReadWrite)?;
        self.check_path(path, true)?;
        storage.delete(path).map_err(storage_error)
    }
}

fn millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn policy_error(err: PolicyError) -> FileError {
    match err {
        PolicyError::InvalidPath(err) => FileError::InvalidPath(err.to_string()),
        err @ PolicyError::TooLarge { .. } => FileError::TooLarge(err.to_string()),
        other => FileError::Denied(other.to_string()),
    }
}

fn storage_error(err: StorageError) -> FileError {
    match err {
        StorageError::NotFound { .. } => FileError::NotFound(err.to_string()),
        StorageError::InvalidPath(_) => FileError::InvalidPath(err.to_string()),
        StorageError::Denied { .. } => FileError::Denied(err.to_string()),
        StorageError::FileTooLarge { .. } => FileError::TooLarge(err.to_string()),
        other => FileError::Other(other.to_string()),
    }
}

impl ImportCtx {
    /// Logs a denial (within the per-call log budget) and passes the result on.
    fn logged<T>(
        &mut self,
        op: &str,
        path: &str,
        result: Result<T, FileError>,
    ) -> Result<T, FileError> {
        if let Err(FileError::Denied(reason)) = &result {
            self.log_lines = self.log_lines.saturating_add(1);
            if self.log_lines <= MAX_LOG_LINES_PER_CALL {
                tracing::warn!(target: "plugin", plugin = %self.plugin, tool = %self.tool, "file {op} of \"{}\" denied: {reason}", path.escape_debug());
            }
        }
        result
    }
}

impl Host for ImportCtx {
    fn read(&mut self, path: String) -> Result<File, FileError> {
        let result = self.files.read(&path);
        self.logged("read", &path, result)
    }

    fn list(&mut self) -> Result<Vec<FileInfo>, FileError> {
        let result = self.files.list();
        self.logged("list", "", result)
    }

    fn write(
        &mut self,
        path: String,
        content: Vec<u8>,
        content_type: Option<String>,
    ) -> Result<(), FileError> {
        let result = self.files.write(&path, &content, content_type.as_deref());
        self.logged("write", &path, result)
    }

    fn delete(&mut self, path: String) -> Result<(), FileError> {
        let result = self.files.delete(&path);
        self.logged("delete", &path, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemoryStorage;

    fn storage() -> Arc<dyn Storage> {
        let storage = MemoryStorage::new();
        storage
            .write("docs/a.md", b"alpha", "text/markdown")
            .unwrap();
        storage.write("secret.md", b"top", "text/markdown").unwrap();
        storage
            .write("docs/.hidden.md", b"h", "text/markdown")
            .unwrap();
        Arc::new(storage)
    }

    fn grant(access: FileAccess, root: Option<&str>) -> FileGrant {
        let policy = FilePolicy {
            hide_hidden_paths: true,
            maximum_file_bytes: 10,
            ..FilePolicy::default()
        };
        FileGrant::new("wc", access, Some(storage()), root, policy).unwrap()
    }

    fn denied(result: Result<impl std::fmt::Debug, FileError>) -> String {
        match result {
            Err(FileError::Denied(message)) => message,
            other => panic!("expected Denied, got {other:?}"),
        }
    }

    #[test]
    fn no_grant_denies_everything_and_says_how_to_grant() {
        let none = grant(FileAccess::None, None);
        let message = denied(none.read("docs/a.md"));
        assert_eq!(
            message,
            "plugin \"wc\" has no file access: its manifest grants none. To grant it, put `[grants] files = \"read\"` in wc.toml next to wc.wasm and start the host with `--plugin-files read`"
        );
        denied(none.list());
        assert!(denied(none.write("x.md", b"x", None)).contains("files = \"read-write\""));
        denied(none.delete("docs/a.md"));
        denied(FileGrant::none("wc").read("docs/a.md"));
    }

    #[test]
    fn read_grant_reads_and_lists_but_does_not_write() {
        let read = grant(FileAccess::Read, None);
        let file = read.read("docs/a.md").unwrap();
        assert_eq!(file.content, b"alpha");
        assert_eq!(file.content_type, "text/markdown");
        assert_eq!(file.size, 5);
        let paths: Vec<String> = read.list().unwrap().into_iter().map(|f| f.path).collect();
        assert_eq!(paths, ["docs/a.md", "secret.md"]);
        assert_eq!(
            denied(read.write("docs/b.md", b"b", None)),
            "plugin \"wc\" may only read files; writing needs `files = \"read-write\"` in wc.toml and a host started with `--plugin-files read-write`"
        );
        denied(read.delete("docs/a.md"));
    }

    #[test]
    fn read_write_grant_writes_within_policy() {
        let rw = grant(FileAccess::ReadWrite, None);
        rw.write("notes.md", b"hi", None).unwrap();
        assert_eq!(rw.read("notes.md").unwrap().content_type, "text/markdown");
        assert!(matches!(
            rw.write("big.md", &[b'x'; 11], None),
            Err(FileError::TooLarge(_))
        ));
        rw.delete("notes.md").unwrap();
        assert!(matches!(rw.read("notes.md"), Err(FileError::NotFound(_))));
    }

    #[test]
    fn paths_go_through_the_policy() {
        let read = grant(FileAccess::Read, None);
        assert!(matches!(
            read.read("../etc/passwd"),
            Err(FileError::InvalidPath(_))
        ));
        assert!(matches!(
            read.read("/etc/passwd"),
            Err(FileError::InvalidPath(_))
        ));
        denied(read.read("docs/.hidden.md"));
    }

    #[test]
    fn root_confines_to_the_sub_tree() {
        let docs = grant(FileAccess::Read, Some("docs"));
        assert_eq!(docs.read("a.md").unwrap().content, b"alpha");
        assert!(matches!(
            docs.read("secret.md"),
            Err(FileError::NotFound(_))
        ));
        assert!(matches!(
            docs.read("../secret.md"),
            Err(FileError::InvalidPath(_))
        ));
        let paths: Vec<String> = docs.list().unwrap().into_iter().map(|f| f.path).collect();
        assert_eq!(paths, ["a.md"]);
    }

    /// The bypass of issue 9 item 2: a root on a hidden path (`.git`, `.ssh`) reaches
    /// files every built-in tool refuses under `hide_hidden_paths`.
    #[test]
    fn a_hidden_root_reaches_nothing_the_built_ins_refuse() {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        storage.write(".git/config", b"[core]", "").unwrap();
        let policy = FilePolicy {
            hide_hidden_paths: true,
            ..FilePolicy::default()
        };
        match FileGrant::new("wc", FileAccess::ReadWrite, Some(storage.clone()), Some(".git"), policy) {
            Err(err) => assert_eq!(
                err.to_string(),
                "argument \"root\" is \".git\", a hidden path (a segment starts with _ or .); hidden paths are not available here, use another path"
            ),
            Ok(grant) => {
                let read = grant.read("config");
                let write = grant.write("config", b"[core]\n\tfsmonitor = evil", None);
                panic!("a hidden root was granted: read {read:?}, write {write:?}");
            }
        }
        assert_eq!(storage.read(".git/config").unwrap().content, b"[core]");
    }

    /// Every file a grant can address, checked as the built-in tools check their path
    /// arguments: the full store path (root + path) under the same [`FilePolicy`].
    ///
    /// For every policy combination, every root a manifest may ask for and many paths
    /// (a deterministic generator over awkward segments: hidden ones, dots, extensions in
    /// any case, long ones), the plugin's decision (allowed: the call reaches the store;
    /// refused: `denied` / `invalid-path`) equals the built-in decision on the full path,
    /// for read, write, delete and list.
    #[test]
    fn a_plugin_addresses_exactly_what_the_built_in_tools_allow() {
        let mut checked = 0usize;
        let cases = property::cases();
        for policy in property::policies() {
            // One store holding every valid generated path, for the listings.
            let listed = Arc::new(MemoryStorage::new());
            for (root, paths) in &cases {
                for path in paths {
                    let full = property::full(root.as_deref(), path);
                    let _ = listed.write(&full, b"", "");
                }
            }
            for (root, paths) in &cases {
                let root = root.as_deref();
                let Some(grant) = property::grant(&listed, root, &policy) else {
                    continue;
                };
                let shown: Vec<String> = grant
                    .list()
                    .unwrap()
                    .into_iter()
                    .map(|entry| property::full(root, &entry.path))
                    .collect();
                assert_eq!(
                    shown,
                    builtin_list(&listed, root, &policy),
                    "list under root {root:?}, {policy:?}"
                );
                for path in paths {
                    // A fresh store per path: generated paths may be each other's parents.
                    let storage = Arc::new(MemoryStorage::new());
                    let grant = property::grant(&storage, root, &policy).expect("granted above");
                    let full = property::full(root, path);
                    let builtin_read = policy.check("path", &full).is_ok();
                    let builtin_write = builtin_read && !property::read_only(&policy);
                    if builtin_read {
                        storage.write(&full, full.as_bytes(), "").unwrap();
                    }
                    let read = property::allowed(grant.read(path).map(|file| {
                        assert_eq!(
                            file.content,
                            full.as_bytes(),
                            "{path} under {root:?} read another file"
                        );
                    }));
                    assert_eq!(
                        read, builtin_read,
                        "read {path:?} under root {root:?}, {policy:?}"
                    );
                    let write = property::allowed(grant.write(path, b"w", None));
                    assert_eq!(
                        write, builtin_write,
                        "write {path:?} under root {root:?}, {policy:?}"
                    );
                    if write {
                        assert_eq!(storage.read(&full).unwrap().content, b"w");
                    }
                    let delete = property::allowed(grant.delete(path));
                    assert_eq!(
                        delete, builtin_write,
                        "delete {path:?} under root {root:?}, {policy:?}"
                    );
                    if builtin_read && !delete {
                        assert!(storage.read(&full).is_ok(), "{full} deleted though refused");
                    }
                    let outside: Vec<String> = storage
                        .list()
                        .unwrap()
                        .into_iter()
                        .map(|entry| entry.path)
                        .filter(|stored| *stored != full)
                        .collect();
                    assert!(
                        outside.is_empty(),
                        "{path:?} under {root:?} wrote {outside:?}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 10_000, "only {checked} cases");
    }

    /// What list_files would show of the sub-tree `root`, in full store paths: every
    /// stored file below it that the policy shows.
    fn builtin_list(
        storage: &MemoryStorage,
        root: Option<&str>,
        policy: &FilePolicy,
    ) -> Vec<String> {
        storage
            .list()
            .unwrap()
            .into_iter()
            .map(|entry| entry.path)
            .filter(|path| root.is_none_or(|root| path.starts_with(&format!("{root}/"))))
            .filter(|path| policy.visible(path))
            .collect()
    }

    /// The generator and the glue of the property test.
    mod property {
        use super::*;

        /// Segments that each break (or almost break) one rule.
        const SEGMENTS: &[&str] = &[
            "a", "notes", "b.md", "C.MD", "d.txt", "e.TxT", "x.md.bak", "md", ".md", "..md",
            ".git", ".ssh", "config", "_drafts", "_", "a_b.md", "é.md", "a b.md", ".", "..", "",
            "id_rsa", ".env", "f.Md",
        ];

        /// Every policy combination: hidden paths on/off, extensions none/one/two,
        /// read-only on/off.
        pub fn policies() -> Vec<FilePolicy> {
            let mut out = Vec::new();
            for hide in [false, true] {
                for read_only in [false, true] {
                    for allowed in [
                        None,
                        Some(vec![".md".to_owned()]),
                        Some(vec!["md".to_owned(), "TXT".to_owned()]),
                    ] {
                        out.push(FilePolicy {
                            hide_hidden_paths: hide,
                            allowed_extensions: allowed,
                            read_only,
                            ..FilePolicy::default()
                        });
                    }
                }
            }
            out
        }

        /// `root/path`, or `path` without a root.
        pub fn full(root: Option<&str>, path: &str) -> String {
            match root {
                Some(root) => format!("{root}/{path}"),
                None => path.to_owned(),
            }
        }

        /// Whether the built-in tools may write at all (their writing tools are not
        /// registered under read-only).
        pub fn read_only(policy: &FilePolicy) -> bool {
            policy.read_only
        }

        /// xorshift64*: deterministic, so a failure reproduces.
        struct Rng(u64);
        impl Rng {
            fn next(&mut self) -> u64 {
                self.0 ^= self.0 >> 12;
                self.0 ^= self.0 << 25;
                self.0 ^= self.0 >> 27;
                self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
            }
            fn below(&mut self, n: usize) -> usize {
                (self.next() % n as u64) as usize
            }
            fn path(&mut self, max_segments: usize) -> String {
                let n = 1 + self.below(max_segments);
                (0..n)
                    .map(|_| match self.below(40) {
                        // Long segments: paths valid alone but too long under a root.
                        0 => "l".repeat(250),
                        _ => SEGMENTS[self.below(SEGMENTS.len())].to_owned(),
                    })
                    .collect::<Vec<_>>()
                    .join("/")
            }
        }

        /// Roots (none, and generated ones) with the paths tried under each.
        pub fn cases() -> Vec<(Option<String>, Vec<String>)> {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
            let mut roots: Vec<Option<String>> = vec![
                None,
                Some(".git".into()),
                Some(".ssh".into()),
                Some("docs/_private".into()),
                Some("notes".into()),
                Some("notes.md".into()),
                Some(["l".repeat(250), "l".repeat(250), "l".repeat(250)].join("/")),
            ];
            for _ in 0..30 {
                roots.push(Some(rng.path(2)));
            }
            roots
                .into_iter()
                .map(|root| {
                    let mut paths: Vec<String> = (0..120).map(|_| rng.path(4)).collect();
                    paths.extend(["a.md", "config", ".git/config", "x/.env.md"].map(String::from));
                    (root, paths)
                })
                .collect()
        }

        /// The grant of a plugin asking for `root`, or `None` when such a plugin is not
        /// loaded.
        pub fn grant(
            storage: &Arc<MemoryStorage>,
            root: Option<&str>,
            policy: &FilePolicy,
        ) -> Option<FileGrant> {
            let storage: Arc<dyn Storage> = storage.clone();
            let config = crate::plugin::PluginHostConfig {
                cache_dir: None,
                max_file_access: FileAccess::ReadWrite,
                file_policy: policy.clone(),
                ..crate::plugin::PluginHostConfig::default()
            };
            let manifest = crate::plugin::manifest::Manifest {
                grants: crate::plugin::manifest::Grants {
                    // A read-only host refuses a read-write manifest at load.
                    files: Some(
                        if policy.read_only {
                            "read"
                        } else {
                            "read-write"
                        }
                        .into(),
                    ),
                    root: root.map(str::to_owned),
                },
                ..Default::default()
            };
            let path = std::path::Path::new("p.toml");
            let resolved = crate::plugin::manifest::apply(path, manifest, &config).ok()?;
            // Read-write even where the manifest got less: the grant itself must
            // enforce the policy (read-only included) for library callers too.
            let grant = FileGrant::new(
                "p",
                FileAccess::ReadWrite,
                Some(storage),
                resolved.root.as_deref(),
                policy.clone(),
            );
            Some(grant.expect("a root the manifest accepts makes a grant"))
        }

        /// Whether the call reached the store: `Ok`, `not-found` or `too-large` (a size,
        /// not a path, decision) versus `denied` / `invalid-path`.
        pub fn allowed<T: std::fmt::Debug>(result: Result<T, FileError>) -> bool {
            match result {
                Ok(_) | Err(FileError::NotFound(_)) => true,
                Err(FileError::Denied(_) | FileError::InvalidPath(_)) => false,
                Err(other) => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn a_grant_without_storage_is_denied() {
        let grant =
            FileGrant::new("wc", FileAccess::Read, None, None, FilePolicy::default()).unwrap();
        assert!(denied(grant.read("a.md")).starts_with("the host has no file storage"));
    }
}
