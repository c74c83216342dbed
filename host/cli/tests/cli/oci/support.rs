//! Running the `host` binary.

use std::process::{Output, Stdio};

/// The exit code of a set-up error.
pub(crate) const EXIT_SETUP: i32 = 3;

/// Runs `host ARGS` with no RUST_LOG, stdin closed, plus `env`. DOCKER_CONFIG points at
/// a directory that does not exist (anonymous) unless `env` sets it: the user's own
/// `~/.docker/config.json` never takes part in a test.
pub(crate) fn host(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = crate::host();
    command
        .env(
            "DOCKER_CONFIG",
            concat!(env!("CARGO_TARGET_TMPDIR"), "/no-docker-config"),
        )
        .args(args)
        .stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run host")
}

/// stdout and stderr, lossily.
pub(crate) fn outputs(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs host and asserts it succeeded; returns stdout.
pub(crate) fn ok(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = host(args, env);
    let (stdout, stderr) = outputs(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "host {args:?}:\n{stdout}\n{stderr}"
    );
    stdout
}

/// Runs host and asserts it failed with a set-up error; returns stderr.
pub(crate) fn fails(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = host(args, env);
    let (stdout, stderr) = outputs(&out);
    assert_eq!(
        out.status.code(),
        Some(EXIT_SETUP),
        "host {args:?}:\n{stdout}\n{stderr}"
    );
    stderr
}
