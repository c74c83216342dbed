//! `manifest`: arbitrary manifest text, resolved against a host configuration the
//! fuzzer picks (file access allowed, read-only, hidden paths, raised maxima).
//!
//! Invariants: a clear load error (a manifest error, a denied grant or a limit above the
//! maximum, naming the manifest file), or a plugin whose grant stays within the
//! operator's (no write on a read-only host), whose root is a valid path inside the store
//! (never a hidden one under --hide-hidden), and whose every limit is positive where it
//! must be and within the operator's ceiling.
#![no_main]

use std::path::Path;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use toolhost::vfs::validate_path;
use toolhost::vfs::FilePolicy;
use toolhost_fuzz::paths::model_hidden;
use toolhost_plugin::manifest::{apply, parse};
use toolhost_plugin::{FileAccess, PluginErrorKind, PluginHostConfig, PluginLimits};

fn within(limits: &PluginLimits, max: &PluginLimits) -> bool {
    let fuel = match (limits.fuel(), max.fuel()) {
        (_, None) => true,
        (Some(f), Some(m)) => f <= m,
        (None, Some(_)) => false,
    };
    let (i, m) = (limits.imports(), max.imports());
    fuel && limits.timeout() <= max.timeout()
        && limits.memory_bytes() <= max.memory_bytes()
        && limits.max_output_bytes() <= max.max_output_bytes()
        && limits.max_stderr_bytes() <= max.max_stderr_bytes()
        && limits.max_instances() <= max.max_instances()
        && limits.max_tables() <= max.max_tables()
        && limits.max_handles() <= max.max_handles()
        && i.max_file_calls() <= m.max_file_calls()
        && i.max_read_bytes_per_call() <= m.max_read_bytes_per_call()
        && i.max_write_bytes_per_call() <= m.max_write_bytes_per_call()
        && i.max_files_written_per_call() <= m.max_files_written_per_call()
        && i.max_write_bytes_total() <= m.max_write_bytes_total()
        && i.max_files_written_total() <= m.max_files_written_total()
        && i.log_lines_per_second() <= m.log_lines_per_second()
        && i.log_burst() <= m.log_burst()
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, text)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let mut config = PluginHostConfig::builder();
    config
        .cache_dir(None)
        .max_file_access(match flags % 3 {
            0 => FileAccess::None,
            1 => FileAccess::Read,
            _ => FileAccess::ReadWrite,
        })
        .file_policy(
            FilePolicy::default()
                .with_read_only(flags & 4 != 0)
                .with_hide_hidden_paths(flags & 8 != 0),
        );
    if flags & 16 != 0 {
        // An operator who raised the ceiling (--plugin-max-timeout, --plugin-max-memory).
        config.max_limits(
            PluginLimits::default()
                .with_timeout(Duration::from_secs(60))
                .with_memory_bytes(512 << 20)
                .with_fuel(Some(1 << 40)),
        );
    }
    let config = config.build();
    let path = Path::new("plugins/fuzzed.toml");
    let resolved = match parse(path, text).and_then(|manifest| apply(path, manifest, &config)) {
        Ok(resolved) => resolved,
        Err(err) => {
            assert!(
                matches!(
                    err.kind(),
                    PluginErrorKind::Manifest { .. }
                        | PluginErrorKind::GrantDenied { .. }
                        | PluginErrorKind::LimitTooHigh { .. }
                ),
                "unexpected error kind: {err:?}"
            );
            let message = err.to_string();
            assert!(message.starts_with("plugins/fuzzed.toml: "), "{message}");
            // toml's message, a line number and the list of keys: never the whole input.
            assert!(
                message.len() <= 4096 + text.len(),
                "{} bytes: {message}",
                message.len()
            );
            return;
        }
    };
    assert!(resolved.files <= config.max_file_access(), "{resolved:?}");
    if config.file_policy().read_only() {
        assert_ne!(resolved.files, FileAccess::ReadWrite);
    }
    if let Some(root) = &resolved.root {
        assert_eq!(validate_path("root", root), Ok(()), "root {root:?}");
        if config.file_policy().hide_hidden_paths() {
            assert!(!model_hidden(root), "hidden root {root:?}");
        }
    }
    let limits = &resolved.limits;
    assert!(
        within(limits, config.max_limits()),
        "{limits:?} above {:?}",
        config.max_limits()
    );
    assert!(
        limits.timeout() > Duration::ZERO && limits.memory_bytes() > 0,
        "{limits:?}"
    );
    assert_ne!(limits.fuel(), Some(0));
});
