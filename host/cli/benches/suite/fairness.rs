//! Figure 16: one principal at its quota does not slow another. `scripts/policy-bench.py`
//! (Python's standard library only) starts `host serve --http --policy` with two named
//! tokens, alice (60 calls a minute) and bob (no limit), and measures bob's sequential
//! tools/call p50 alone and while alice floods at her quota (nearly every call answered
//! 429), in interleaved rounds; this figure runs it on the bench's host binary and
//! judges the ratio of the medians.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::report::{Row, Target};

const HOST: &str = env!("CARGO_BIN_EXE_host");
const FIGURE: &str = "14 fairness: bob's p50 with alice flooding at her quota / alone";

/// The figure's row (skipped when there is no `python3`).
pub(crate) fn fairness() -> Result<Vec<Row>> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .context("host/cli/ is not two levels below the repository")?;
    let script = repo.join("scripts/policy-bench.py");
    let output = match Command::new("python3").arg(&script).arg(HOST).output() {
        Ok(output) => output,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(vec![Row::skipped(FIGURE, "python3 is not installed")]);
        }
        Err(err) => return Err(err).context("cannot run scripts/policy-bench.py"),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    for line in stdout.lines().filter(|l| l.starts_with("round ")) {
        println!("  {line}");
    }
    let Some(figures) = stdout.lines().find_map(|l| l.strip_prefix("FIGURES ")) else {
        bail!(
            "scripts/policy-bench.py gave no figures (exit {:?}): {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let value = |name: &str| -> Result<f64> {
        figures
            .split_whitespace()
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            .with_context(|| format!("no {name} in {figures:?}"))?
            .parse()
            .with_context(|| format!("{name} in {figures:?}"))
    };
    let (alone, loaded, ratio) = (value("alone_us")?, value("loaded_us")?, value("ratio")?);
    let (sent, refused) = (value("alice_calls")?, value("alice_429")?);
    Ok(vec![Row::judged(
        FIGURE,
        format!(
            "p50 {loaded:.0} µs vs {alone:.0} µs alone (alice: {sent:.0} calls, {refused:.0} answered 429)"
        ),
        ratio,
        format!("{ratio:.2}"),
        Target::AtMost(1.2),
    )])
}
