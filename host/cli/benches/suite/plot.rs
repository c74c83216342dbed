//! Line charts as SVG for the scale curves (figures 10, 11 and 17), written to
//! `docs/benchmarks/*.svg` by the run that measured them.
//!
//! A small writer of its own rather than a plotting crate: the charts are a few
//! polylines over a log or linear axis, ~300 lines here. `plotters` 0.3 with default
//! features off and only `svg_backend` and `line_series` would add three crates to the
//! lock (plotters, plotters-backend, plotters-svg; num-traits is there already) and
//! their review for a dev-only picture, and its log axes and legend take about as much
//! code to set up as these draw.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// One curve: its name in the legend and its points (x, y).
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
}

impl Series {
    pub(crate) fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
        }
    }
}

/// How an axis maps its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scale {
    Linear,
    Log,
}

/// A chart: title, axes and curves.
pub(crate) struct Chart {
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) x_scale: Scale,
    pub(crate) y_scale: Scale,
    pub(crate) series: Vec<Series>,
}

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 400.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 56.0;
const COLOURS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

/// An axis: its range in plotting units (log10 for a log axis) and its ticks.
struct Axis {
    scale: Scale,
    low: f64,
    high: f64,
}

impl Axis {
    fn of(values: impl Iterator<Item = f64>, scale: Scale) -> Axis {
        let (mut low, mut high) = (f64::INFINITY, f64::NEG_INFINITY);
        for value in values.filter(|v| v.is_finite() && (scale == Scale::Linear || *v > 0.0)) {
            let v = if scale == Scale::Log {
                value.log10()
            } else {
                value
            };
            low = low.min(v);
            high = high.max(v);
        }
        if !low.is_finite() {
            (low, high) = (0.0, 1.0);
        }
        match scale {
            Scale::Log => {
                low = low.floor();
                high = high.ceil().max(low + 1.0);
            }
            Scale::Linear => {
                low = low.min(0.0);
                let step = nice_step(high - low);
                high = ((high / step).ceil() * step).max(low + step);
            }
        }
        Axis { scale, low, high }
    }

    /// Where `value` falls, 0 to 1 along the axis.
    fn fraction(&self, value: f64) -> f64 {
        let v = match self.scale {
            Scale::Log => value.max(f64::MIN_POSITIVE).log10(),
            Scale::Linear => value,
        };
        (v - self.low) / (self.high - self.low)
    }

    /// Tick values and their labels.
    fn ticks(&self) -> Vec<(f64, String)> {
        match self.scale {
            Scale::Log => (self.low as i32..=self.high as i32)
                .map(|e| {
                    let v = 10f64.powi(e);
                    (v, number(v))
                })
                .collect(),
            Scale::Linear => {
                let step = nice_step(self.high - self.low);
                let mut ticks = Vec::new();
                let mut v = self.low;
                while v <= self.high + step / 2.0 && ticks.len() < 20 {
                    ticks.push((v, number(v)));
                    v += step;
                }
                ticks
            }
        }
    }
}

/// A step of 1, 2 or 5 times a power of ten giving 4 to 10 ticks over `span`.
fn nice_step(span: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / 5.0;
    let power = 10f64.powf(raw.log10().floor());
    let unit = raw / power;
    let nice = if unit <= 1.0 {
        1.0
    } else if unit <= 2.0 {
        2.0
    } else if unit <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// A tick label: 1k, 10k, 1M for large values, else up to 3 significant digits.
fn number(v: f64) -> String {
    let abs = v.abs();
    if abs >= 1e6 && (v / 1e6).fract() == 0.0 {
        format!("{}M", v / 1e6)
    } else if abs >= 1e3 && (v / 1e3).fract() == 0.0 {
        format!("{}k", v / 1e3)
    } else if abs >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if abs >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned()
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Chart {
    /// The chart as an SVG document.
    pub(crate) fn svg(&self) -> String {
        let points = || self.series.iter().flat_map(|s| s.points.iter());
        let x = Axis::of(points().map(|p| p.0), self.x_scale);
        let y = Axis::of(points().map(|p| p.1), self.y_scale);
        let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
        let px = |v: f64| LEFT + x.fraction(v) * plot_w;
        let py = |v: f64| TOP + (1.0 - y.fraction(v)) * plot_h;
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(
            out,
            r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
            WIDTH / 2.0,
            escape(&self.title)
        );
        for (value, label) in x.ticks() {
            let at = px(value);
            let _ = writeln!(
                out,
                r##"<line x1="{at:.1}" y1="{TOP}" x2="{at:.1}" y2="{:.1}" stroke="#ddd"/><text x="{at:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
                TOP + plot_h,
                TOP + plot_h + 16.0
            );
        }
        for (value, label) in y.ticks() {
            let at = py(value);
            let _ = writeln!(
                out,
                r##"<line x1="{LEFT}" y1="{at:.1}" x2="{:.1}" y2="{at:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"##,
                LEFT + plot_w,
                LEFT - 6.0,
                at + 4.0
            );
        }
        let _ = writeln!(
            out,
            r#"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>"#
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + plot_w / 2.0,
            HEIGHT - 14.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            out,
            r#"<text transform="translate(18,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            TOP + plot_h / 2.0,
            escape(&self.y_label)
        );
        for (index, series) in self.series.iter().enumerate() {
            let colour = COLOURS[index % COLOURS.len()];
            let drawn: Vec<(f64, f64)> = series
                .points
                .iter()
                .filter(|(a, b)| {
                    a.is_finite()
                        && b.is_finite()
                        && (self.x_scale == Scale::Linear || *a > 0.0)
                        && (self.y_scale == Scale::Linear || *b > 0.0)
                })
                .map(|&(a, b)| (px(a), py(b)))
                .collect();
            let path: Vec<String> = drawn
                .iter()
                .map(|(a, b)| format!("{a:.1},{b:.1}"))
                .collect();
            let _ = writeln!(
                out,
                r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
                path.join(" ")
            );
            for (a, b) in &drawn {
                let _ = writeln!(
                    out,
                    r#"<circle cx="{a:.1}" cy="{b:.1}" r="3.5" fill="{colour}"/>"#
                );
            }
            let ly = TOP + 14.0 + index as f64 * 16.0;
            let _ = writeln!(
                out,
                r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="2"/><text x="{:.1}" y="{:.1}">{}</text>"#,
                LEFT + 10.0,
                LEFT + 30.0,
                LEFT + 36.0,
                ly + 4.0,
                escape(&series.name)
            );
        }
        out.push_str("</svg>\n");
        out
    }

    /// Writes the chart to `docs/benchmarks/NAME.svg` in the repository; returns the path.
    pub(crate) fn write(&self, name: &str) -> Result<PathBuf> {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .context("host/cli/ is not two levels below the repository")?;
        let dir = repo.join("docs/benchmarks");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{name}.svg"));
        std::fs::write(&path, self.svg())
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("  picture: {}", path.display());
        Ok(path)
    }
}
