//! The one rule for files that hold secrets (`--auth-token-file`, `--session-key-file`,
//! `--plugin-config-file`): a warning when users other than the owner may get at them.
//! Imports nothing of the CLI, so every command's module may use it.

use std::path::Path;

/// The permission bits that let anyone but the owner at a secret file: every group and
/// other bit (`0o077`). Not only the read bits (`0o044`): a group that may write the file
/// may replace the token or the configuration the host trusts, and a group that may read
/// it holds the secret, which is a leak just as a world-readable file is. A secret file is
/// the owner's alone: mode 600 (or 400).
const SHARED_BITS: u32 = 0o077;

/// Whether a file of mode `mode` lets others than its owner read, write or run it.
fn others_may_access(mode: u32) -> bool {
    mode & SHARED_BITS != 0
}

/// Logs a warning when users other than its owner may read or change `path`, named by
/// `flag` as the command line gave it. A warning, not a refusal: mounted secrets are
/// often 0444 inside a container. A file that cannot be read is left to the caller,
/// which reports it as it reads it.
pub(crate) fn warn_if_others_may_access(flag: &str, path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(metadata) = std::fs::metadata(path) {
            let mode = metadata.permissions().mode() & 0o777;
            if others_may_access(mode) {
                tracing::warn!(
                    "{flag} {} may be read or changed by users other than its owner (mode {mode:o}); a file that holds secrets should be its owner's alone: chmod 600 it",
                    path.display()
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (flag, path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_may_get_at_a_secret_file() {
        for private in [0o600, 0o400, 0o700] {
            assert!(!others_may_access(private), "{private:o}");
        }
        // Group-writable or other-executable files warned about under neither rule
        // before, readable ones under both.
        for shared in [0o620, 0o610, 0o602, 0o601, 0o640, 0o604, 0o644, 0o444] {
            assert!(others_may_access(shared), "{shared:o}");
        }
    }
}
