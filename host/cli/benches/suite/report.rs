//! Samples, percentiles, targets with margins, and the final table.

use std::fmt::Write as _;
use std::time::Duration;

/// How far past its target a figure may land before the run fails: 10 %.
pub(crate) const MARGIN: f64 = 0.10;

/// Latencies of one contender, in seconds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Samples(Vec<f64>);

impl Samples {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Samples(Vec::with_capacity(n))
    }

    pub(crate) fn push(&mut self, elapsed: Duration) {
        self.0.push(elapsed.as_secs_f64());
    }

    /// Adds every sample of `other`.
    pub(crate) fn extend(&mut self, other: &Samples) {
        self.0.extend_from_slice(&other.0);
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The `p`-th percentile (0 to 100), nearest rank.
    pub(crate) fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.0.clone();
        sorted.sort_by(f64::total_cmp);
        if sorted.is_empty() {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }

    pub(crate) fn p50(&self) -> f64 {
        self.percentile(50.0)
    }

    pub(crate) fn p99(&self) -> f64 {
        self.percentile(99.0)
    }

    pub(crate) fn total(&self) -> f64 {
        self.0.iter().sum()
    }
}

/// The median of a few values (runs of a whole workload).
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// A time in seconds, with a unit that keeps 3 significant digits.
pub(crate) fn time(seconds: f64) -> String {
    let abs = seconds.abs();
    if abs >= 1.0 {
        format!("{seconds:.2} s")
    } else if abs >= 1e-3 {
        format!("{:.1} ms", seconds * 1e3)
    } else if abs >= 1e-6 {
        format!("{:.2} µs", seconds * 1e6)
    } else {
        format!("{:.0} ns", seconds * 1e9)
    }
}

/// `p50 X / p99 Y`.
pub(crate) fn latency(samples: &Samples) -> String {
    format!("p50 {} p99 {}", time(samples.p50()), time(samples.p99()))
}

/// Bytes with a binary unit.
pub(crate) fn bytes(n: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if n as f64 >= MIB {
        format!("{:.1} MiB", n as f64 / MIB)
    } else {
        format!("{:.0} KiB", n as f64 / 1024.0)
    }
}

/// What a figure is held to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target {
    /// The value must be at most this.
    AtMost(f64),
    /// The value must be at least this.
    AtLeast(f64),
    /// Reported, no target.
    Report,
}

/// The outcome of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Target met.
    Pass,
    /// Target missed, but by less than [`MARGIN`]: noted, the run still passes.
    Margin,
    /// Target missed by more than the margin: the run fails.
    Miss,
    /// No target.
    Info,
    /// Not measured (a peer tool is missing, an input could not be built).
    Skip,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Margin => "MISS<10%",
            Verdict::Miss => "MISS",
            Verdict::Info => "info",
            Verdict::Skip => "SKIP",
        }
    }
}

/// Judges `value` against `target` with [`MARGIN`].
pub(crate) fn judge(value: f64, target: Target) -> Verdict {
    match target {
        Target::Report => Verdict::Info,
        _ if !value.is_finite() => Verdict::Miss,
        Target::AtMost(limit) if value <= limit => Verdict::Pass,
        Target::AtMost(limit) if value <= limit * (1.0 + MARGIN) => Verdict::Margin,
        Target::AtLeast(limit) if value >= limit => Verdict::Pass,
        Target::AtLeast(limit) if value >= limit * (1.0 - MARGIN) => Verdict::Margin,
        Target::AtMost(_) | Target::AtLeast(_) => Verdict::Miss,
    }
}

/// One line of the table.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub figure: String,
    pub measured: String,
    pub ratio: String,
    pub target: String,
    pub verdict: Verdict,
}

impl Row {
    /// A row whose `value` (shown as `ratio`) is judged against `target`.
    pub(crate) fn judged(
        figure: impl Into<String>,
        measured: impl Into<String>,
        value: f64,
        ratio: impl Into<String>,
        target: Target,
    ) -> Self {
        let target_text = match target {
            Target::AtMost(limit) => format!("<= {limit}"),
            Target::AtLeast(limit) => format!(">= {limit}"),
            Target::Report => "report".to_owned(),
        };
        Row {
            figure: figure.into(),
            measured: measured.into(),
            ratio: ratio.into(),
            target: target_text,
            verdict: judge(value, target),
        }
    }

    /// This row with `unit` after its target (`<= 2 µs`).
    pub(crate) fn with_unit(mut self, unit: &str) -> Self {
        self.target.push_str(unit);
        self
    }

    /// A row for a figure that could not be measured, saying why.
    pub(crate) fn skipped(figure: impl Into<String>, why: impl Into<String>) -> Self {
        Row {
            figure: figure.into(),
            measured: why.into(),
            ratio: "-".into(),
            target: "-".into(),
            verdict: Verdict::Skip,
        }
    }

    /// A row for a figure that failed outright (an error, failed calls): a miss.
    pub(crate) fn failed(figure: impl Into<String>, why: impl Into<String>) -> Self {
        Row {
            figure: figure.into(),
            measured: why.into(),
            ratio: "-".into(),
            target: "-".into(),
            verdict: Verdict::Miss,
        }
    }
}

/// The table as Markdown (readable as plain text, pasteable into the docs).
pub(crate) fn table(rows: &[Row]) -> String {
    let header = ["figure", "measured", "ratio", "target", "result"];
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|row| {
            [
                row.figure.clone(),
                row.measured.clone(),
                row.ratio.clone(),
                row.target.clone(),
                row.verdict.label().to_owned(),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::from("|");
        for (cell, width) in cells.iter().zip(widths) {
            let pad = width - cell.chars().count();
            let _ = write!(out, " {cell}{} |", " ".repeat(pad));
        }
        out.push('\n');
        out
    };
    let mut out = line(&header.map(str::to_owned));
    out.push('|');
    for width in widths {
        let _ = write!(out, "{}|", "-".repeat(width + 2));
    }
    out.push('\n');
    for row in &cells {
        out.push_str(&line(row));
    }
    out
}

/// Checks the arithmetic above; run at start (a bench target has no test harness).
pub(crate) fn self_check() {
    let mut samples = Samples::default();
    for ms in 1..=100 {
        samples.push(Duration::from_millis(ms));
    }
    assert_eq!(samples.p50(), 0.050);
    assert_eq!(samples.p99(), 0.099);
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    assert_eq!(judge(1.3, Target::AtMost(1.3)), Verdict::Pass);
    assert_eq!(judge(1.42, Target::AtMost(1.3)), Verdict::Margin);
    assert_eq!(judge(1.44, Target::AtMost(1.3)), Verdict::Miss);
    assert_eq!(judge(1.6, Target::AtLeast(1.7)), Verdict::Margin);
    assert_eq!(judge(1.5, Target::AtLeast(1.7)), Verdict::Miss);
    assert_eq!(judge(f64::NAN, Target::AtLeast(1.7)), Verdict::Miss);
    assert_eq!(judge(7.0, Target::Report), Verdict::Info);
}
