//! The figures a Python script of `scripts/` measures (figures 16 and 18): run it with
//! `python3`, echo the lines it shows, and read its one `FIGURES name=value ...` line.
//! A script that cannot run here prints `SKIP <why>` instead.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// What a script run gave: its figures, or why it was skipped.
pub(crate) enum ScriptRun {
    Figures(Figures),
    Skipped(String),
}

/// A script's `FIGURES` line.
pub(crate) struct Figures {
    line: String,
}

impl Figures {
    /// The value of `name` on the line.
    pub(crate) fn value(&self, name: &str) -> Result<f64> {
        let figures = &self.line;
        figures
            .split_whitespace()
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            .with_context(|| format!("no {name} in {figures:?}"))?
            .parse()
            .with_context(|| format!("{name} in {figures:?}"))
    }
}

/// Runs `python3 scripts/<name> <args>`, printing (indented) each line of its output
/// that `show` accepts; skipped when python3 is not installed or the script says `SKIP`.
pub(crate) fn run_script(
    name: &str,
    args: &[&OsStr],
    show: impl Fn(&str) -> bool,
) -> Result<ScriptRun> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .context("host/cli/ is not two levels below the repository")?;
    let script = repo.join("scripts").join(name);
    let output = match Command::new("python3").arg(&script).args(args).output() {
        Ok(output) => output,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(ScriptRun::Skipped("python3 is not installed".to_owned()));
        }
        Err(err) => return Err(err).with_context(|| format!("cannot run scripts/{name}")),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    if let Some(why) = stdout.lines().find_map(|l| l.strip_prefix("SKIP ")) {
        return Ok(ScriptRun::Skipped(why.to_owned()));
    }
    for line in stdout.lines().filter(|l| show(l)) {
        println!("  {line}");
    }
    let Some(line) = stdout.lines().find_map(|l| l.strip_prefix("FIGURES ")) else {
        bail!(
            "scripts/{name} gave no figures (exit {:?}): {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        );
    };
    Ok(ScriptRun::Figures(Figures {
        line: line.to_owned(),
    }))
}
