//! The registry client's settings from the OCI flags (credentials, insecure registries,
//! time limits, size cap) and the download progress line: shared by `host pull`,
//! `host push` and `host sign`.

use std::io::{IsTerminal, Write};

use toolhost::registry::format_bytes;
use toolhost_oci::{
    docker_config_path, from_docker_config, ClientOptions, Credentials, OciReference, ProgressFn,
};

use crate::args::oci::OciArgs;

/// The registry client's settings from the flags.
pub(crate) fn client_options(
    args: &OciArgs,
    reference: &OciReference,
) -> anyhow::Result<ClientOptions> {
    let credentials = match (&args.registry_user, &args.registry_password_env) {
        (Some(user), Some(variable)) => Credentials::from_env(user, variable)?,
        _ => match docker_config_path() {
            Some(path) => from_docker_config(&path, reference.registry())?,
            None => Credentials::Anonymous,
        },
    };
    let options = ClientOptions::default()
        .with_credentials(credentials)
        .with_insecure_registries(args.insecure_registry.clone())
        .with_timeout(args.registry_timeout)
        .with_deadline(args.registry_deadline)
        .with_max_component_bytes(args.max_plugin_bytes);
    Ok(if std::io::stderr().is_terminal() {
        options.with_progress(progress_line())
    } else {
        options
    })
}

/// Downloads over [`PROGRESS_THRESHOLD`] show a progress line on stderr (a terminal).
const PROGRESS_THRESHOLD: u64 = 1024 * 1024;

/// A progress line, redrawn at most every 100 ms, ended when the download is.
fn progress_line() -> ProgressFn {
    let last = std::sync::Mutex::new(None::<std::time::Instant>);
    std::sync::Arc::new(move |what: &str, done: u64, total: u64| {
        let mut last = last.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let due = last.is_none_or(|at| at.elapsed() >= std::time::Duration::from_millis(100));
        if !due && done < total {
            return;
        }
        if let Some(text) = progress_text(what, done, total) {
            *last = Some(std::time::Instant::now());
            let mut stderr = std::io::stderr().lock();
            let _ = stderr.write_all(text.as_bytes());
            let _ = stderr.flush();
        }
    })
}

/// The progress line's text (redrawn over itself; a newline when done), or nothing for
/// a download of at most [`PROGRESS_THRESHOLD`].
fn progress_text(what: &str, done: u64, total: u64) -> Option<String> {
    if total <= PROGRESS_THRESHOLD {
        return None;
    }
    let percent = done.saturating_mul(100) / total;
    let end = if done >= total { "\n" } else { "" };
    Some(format!(
        "\rpulling {what}: {} of {} ({percent}%){end}",
        format_bytes(done),
        format_bytes(total)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_only_over_1_mib_and_ends_its_line() {
        assert_eq!(progress_text("greet.wasm", 10, 1 << 20), None);
        assert_eq!(
            progress_text("big.wasm", 3 << 20, 12 << 20).as_deref(),
            Some("\rpulling big.wasm: 3 MiB of 12 MiB (25%)")
        );
        assert_eq!(
            progress_text("big.wasm", 12 << 20, 12 << 20).as_deref(),
            Some("\rpulling big.wasm: 12 MiB of 12 MiB (100%)\n")
        );
    }
}
