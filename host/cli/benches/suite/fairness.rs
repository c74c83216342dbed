//! Figure 16: one principal at its quota does not slow another. `scripts/policy-bench.py`
//! (Python's standard library only) starts `host serve --http --policy` with two named
//! tokens, alice (60 calls a minute) and bob (no limit), and measures bob's sequential
//! tools/call p50 alone and while alice floods at her quota (nearly every call answered
//! 429), in interleaved rounds; this figure runs it on the bench's host binary and
//! judges the ratio of the medians.

use std::ffi::OsStr;

use anyhow::Result;

use crate::report::{Row, Target};
use crate::script::{run_script, ScriptRun};

const HOST: &str = env!("CARGO_BIN_EXE_host");
const FIGURE: &str = "16 fairness: bob's p50 with alice flooding at her quota / alone";

/// The figure's row (skipped when there is no `python3`).
pub(crate) fn fairness() -> Result<Vec<Row>> {
    let figures = match run_script("policy-bench.py", &[OsStr::new(HOST)], |l| {
        l.starts_with("round ")
    })? {
        ScriptRun::Figures(figures) => figures,
        ScriptRun::Skipped(why) => return Ok(vec![Row::skipped(FIGURE, &why)]),
    };
    let value = |name: &str| figures.value(name);
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
