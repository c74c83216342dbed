//! Figure 7: `read_file` window by window over 1, 4 and 16 MiB files in a MemoryStorage,
//! one of short lines and one that is a single line.
//!
//! By spec each call reads the whole file and returns one window (at most 2000 lines and
//! 40 KiB of content), so a window costs O(file size) and reading a whole file costs
//! O(size²): windows grow with the size, and so does each one. What must stay linear is
//! the time per window: its cost per MiB of file at 16 MiB against at 1 MiB should be ~1
//! (a quadratic window, e.g. one that rescans the file per line, would give ~16).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::json;
use tokio::runtime::Runtime;
use toolhost::registry::{CallContext, Environment, Registry, ToolCall};
use toolhost::tools::{register_vfs_tools, VfsToolOptions};
use toolhost::vfs::{MemoryStorage, Storage};

use super::fixtures::text_of_lines;
use super::report::{time, Row, Samples, Target};

const MIB: usize = 1024 * 1024;
const SIZES: [usize; 3] = [1, 4, 16];

/// `size` bytes of one line of words (ending in a newline).
fn one_line(size: usize, seed: u64) -> Vec<u8> {
    let mut text = text_of_lines(size, seed);
    for byte in &mut text {
        if *byte == b'\n' {
            *byte = b' ';
        }
    }
    if let Some(last) = text.last_mut() {
        *last = b'\n';
    }
    text
}

/// Where the next window starts: after the last shown line, or where a cut line's notice
/// says to go on.
fn next_position(content: &str, offset: u64) -> Result<(u64, u64)> {
    let tail = content.trim_end_matches('\n');
    if let Some(start) = tail.rfind("[line ") {
        if tail.ends_with(']') && tail[start..].contains("is cut here") {
            // "[line N is cut here; read on with offset N and column C]"
            let numbers: Vec<u64> = tail[start..]
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|part| part.parse().ok())
                .collect();
            if let [_, offset, column] = numbers[..] {
                return Ok((offset, column));
            }
            bail!("cannot read the cut-line notice {:?}", &tail[start..]);
        }
    }
    let shown = content.bytes().filter(|&b| b == b'\n').count() as u64;
    Ok((offset + shown, 1))
}

/// Reads `path` window by window; returns the time of each window and the lines seen.
async fn walk(registry: &Registry, path: &str) -> Result<(Samples, u64)> {
    let (ctx, env) = (CallContext::new(), Environment::generate());
    let (mut offset, mut column) = (1u64, 1u64);
    let mut windows = Samples::default();
    loop {
        let call = ToolCall::new(
            "read_file",
            json!({"path": path, "offset": offset, "column": column}).to_string(),
        );
        let started = Instant::now();
        let result = registry.dispatch(&ctx, &call, &env).await?;
        windows.push(started.elapsed());
        let content = result.content["content"]
            .as_str()
            .with_context(|| format!("read_file answered {}", result.content))?;
        let total = result.content["total_lines"].as_u64().unwrap_or(0);
        if result.content["truncated"] != json!(true) {
            let (last, _) = next_position(content, offset)?;
            if last - 1 != total {
                bail!(
                    "the last window of {path} ends at line {}, not {total}",
                    last - 1
                );
            }
            return Ok((windows, total));
        }
        let (next_offset, next_column) = next_position(content, offset)?;
        if (next_offset, next_column) <= (offset, column) {
            bail!("read_file of {path} made no progress at offset {offset} column {column}");
        }
        (offset, column) = (next_offset, next_column);
    }
}

/// Figure 7.
pub(crate) fn read_file(rt: &Runtime) -> Result<Vec<Row>> {
    let storage = Arc::new(MemoryStorage::new());
    for mib in SIZES {
        storage.write(
            &format!("lines-{mib}.txt"),
            &text_of_lines(mib * MIB, 11),
            "",
        )?;
        storage.write(&format!("line-{mib}.txt"), &one_line(mib * MIB, 13), "")?;
    }
    let registry = Registry::new();
    let options = VfsToolOptions::builder(storage).read_only(true).build();
    register_vfs_tools(&registry, options)?;

    let mut rows = Vec::new();
    for (kind, prefix) in [("short lines", "lines"), ("one line", "line")] {
        let mut per_mib = Vec::new();
        let mut measured = Vec::new();
        for mib in SIZES {
            let path = format!("{prefix}-{mib}.txt");
            // Untimed first pass warms the allocator and caches.
            if mib == 1 {
                rt.block_on(walk(&registry, &path))?;
            }
            let (windows, lines) = rt.block_on(walk(&registry, &path))?;
            println!(
                "  read_file {kind} {mib} MiB ({lines} lines): {} windows, per window p50 {} p99 {}, whole file {}",
                windows.len(),
                time(windows.p50()),
                time(windows.p99()),
                time(windows.total())
            );
            per_mib.push(windows.p50() / mib as f64);
            measured.push(format!(
                "{mib} MiB {} x {} = {}",
                windows.len(),
                time(windows.p50()),
                time(windows.total())
            ));
        }
        let linear = per_mib[2] / per_mib[0];
        rows.push(Row::judged(
            format!("7 read_file {kind}: per-window time per MiB, 16 / 1 MiB"),
            format!("windows x p50 = whole file: {}", measured.join("; ")),
            linear,
            format!("{linear:.2} (4/1: {:.2})", per_mib[1] / per_mib[0]),
            Target::AtMost(2.0),
        ));
    }
    Ok(rows)
}
