//! [`FileAccess`]: how much of the host's storage a plugin may touch, the grant every
//! call of the `files` import is checked against first.

use std::fmt;

/// How much of the host's storage a plugin may touch, through the `files` import.
///
/// Ordered: `None < Read < ReadWrite`. A plugin's manifest asks for one; the host's
/// [`PluginHostConfigBuilder::max_file_access`](crate::PluginHostConfigBuilder::max_file_access) caps what any plugin may get.
///
/// # The `files` import
/// Every call checks, in order: the grant ([`FileAccess::Read`] for `read` and `list`,
/// [`FileAccess::ReadWrite`] for `write` and `delete`), that the host has a storage, the
/// path policy ([`FilePolicy::check`](toolhost::vfs::FilePolicy::check), as the built-in file tools; for `write` and
/// `delete` also [`FilePolicy::read_only`](toolhost::vfs::FilePolicy::read_only)), the size cap for writes. A manifest `root`
/// confines the plugin to that sub-tree through [`toolhost::vfs::scope`]: paths are
/// relative to it, and nothing outside is reachable. Denials are logged (target
/// `plugin`).
///
/// # Sandbox
/// The policy decides on the full store path, `root/path`, exactly as a built-in tool
/// decides on its path argument: the root is checked when the grant is made
/// ([`FilePolicy::check_root`](toolhost::vfs::FilePolicy::check_root): a hidden root such as `.git` is refused when the host
/// hides hidden paths), each path is checked relative to the root (so errors name the
/// plugin's own path) and then in full (so no rule of the policy can depend on where
/// the root is), and a listing shows what the policy shows of the full paths. A
/// property test checks, for every policy combination and thousands of
/// generated roots and paths, that a plugin addresses exactly what the built-in tools
/// allow.
///
/// # Time and budgets
/// The storage is blocking; the import is async (`bindgen` `imports`), and each call
/// runs the storage work on tokio's blocking pool while the
/// guest waits. So a slow storage holds no async worker, and the call's deadline (a
/// timer around the whole guest call) fires while the plugin waits in the host: the
/// call is answered `TimedOut`, the storage call ends in the background and its result
/// is dropped. Storage calls in flight are bounded host-wide, abandoned ones included.
///
/// Before it reaches the storage, each call is counted against the call's budget
/// ([`ImportLimits`](crate::limits::ImportLimits)): file calls per call; a read is capped at the smallest of the
/// plugin's memory, the host's read cap and what is left of the call's read budget
/// (listings count too); a write reserves its bytes and one file against the call's and
/// the plugin's lifetime quotas after the grant and the policy accepted it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileAccess {
    /// No file access: every `files` call returns `denied`.
    #[default]
    None,
    /// `read` and `list`.
    Read,
    /// `read`, `list`, `write` and `delete`.
    ReadWrite,
}

impl FileAccess {
    /// The manifest and command-line spelling: `none`, `read`, `read-write`.
    pub fn as_str(self) -> &'static str {
        match self {
            FileAccess::None => "none",
            FileAccess::Read => "read",
            FileAccess::ReadWrite => "read-write",
        }
    }

    /// Parses the spelling of [`FileAccess::as_str`].
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "none" => Some(FileAccess::None),
            "read" => Some(FileAccess::Read),
            "read-write" => Some(FileAccess::ReadWrite),
            _ => None,
        }
    }
}

impl fmt::Display for FileAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
