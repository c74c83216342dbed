//! What every figure works on: the built plugins, plugin directories assembled from them,
//! a compile cache, and where generated data is kept between runs.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The five plugins of the start and memory figures (six tools: greet, divide, wordcount,
/// upper, lower, hostile_loop). hostile_loop is there to hold calls open for the memory
/// figure; it is never called elsewhere.
pub(crate) const FIVE: [&str; 5] = ["greet", "divide", "wordcount", "multi", "hostile_loop"];

/// The tools the five plugins register.
pub(crate) const FIVE_TOOLS: [&str; 6] = [
    "greet",
    "divide",
    "wordcount",
    "upper",
    "lower",
    "hostile_loop",
];

/// A file of the memory figure, in [`Fixtures::root`]: 1 MiB of text for wordcount.
pub(crate) const COUNTED_FILE: &str = "counted.txt";

pub(crate) struct Fixtures {
    /// Built components: `plugins/target/wasm32-wasip2/release`.
    pub built: PathBuf,
    /// A directory holding only greet.wasm.
    pub greet_dir: PathBuf,
    /// A directory holding the [`FIVE`] plugins (and wordcount's manifest).
    pub five_dir: PathBuf,
    /// The compile cache of the in-process plugin hosts.
    pub cache_dir: PathBuf,
    /// The file-tool root of the spawned hosts (holds [`COUNTED_FILE`]).
    pub root: PathBuf,
    /// Scratch space for this run (removed at the end).
    pub scratch: tempfile::TempDir,
    /// Kept between runs: `target/bench-data`.
    pub data_dir: PathBuf,
}

impl Fixtures {
    pub(crate) fn new() -> Result<Self> {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .context("host/cli/ is not two levels below the repository")?
            .to_owned();
        let built = repo.join("plugins/target/wasm32-wasip2/release");
        let missing: Vec<String> = FIVE
            .iter()
            .map(|name| built.join(format!("{name}.wasm")))
            .filter(|path| !path.is_file())
            .map(|path| path.display().to_string())
            .collect();
        if !missing.is_empty() {
            bail!(
                "the plugins are not built (missing {}); run `bash scripts/build-plugins` first, or use `scripts/bench`, which does",
                missing.join(", ")
            );
        }
        let scratch = tempfile::Builder::new()
            .prefix("toolhost-bench")
            .tempdir()?;
        let greet_dir = scratch.path().join("greet-only");
        let five_dir = scratch.path().join("five");
        let cache_dir = scratch.path().join("cache");
        let root = scratch.path().join("root");
        for dir in [&greet_dir, &five_dir, &cache_dir, &root] {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::copy(built.join("greet.wasm"), greet_dir.join("greet.wasm"))?;
        for name in FIVE {
            std::fs::copy(
                built.join(format!("{name}.wasm")),
                five_dir.join(format!("{name}.wasm")),
            )?;
            let manifest = repo.join(format!("plugins/{name}/{name}.toml"));
            if manifest.is_file() {
                std::fs::copy(&manifest, five_dir.join(format!("{name}.toml")))?;
            }
        }
        std::fs::write(root.join(COUNTED_FILE), text_of_lines(1024 * 1024, 7))?;
        Ok(Fixtures {
            data_dir: target_dir(&repo).join("bench-data"),
            built,
            greet_dir,
            five_dir,
            cache_dir,
            root,
            scratch,
        })
    }

    pub(crate) fn greet_wasm(&self) -> PathBuf {
        self.built.join("greet.wasm")
    }
}

/// The target directory this bench was built into (`target/release/deps/suite-*` is the
/// running executable), else `<repo>/target`.
fn target_dir(repo: &Path) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(Path::to_owned))
        .filter(|dir| dir.join("CACHEDIR.TAG").is_file() || dir.join("release").is_dir())
        .unwrap_or_else(|| repo.join("target"))
}

/// A small deterministic generator (xorshift64*), so generated data is the same on every
/// run and machine.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.next() >> 32) * n) >> 32
    }

    /// Uniform in `low..=high`.
    pub(crate) fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high - low + 1)
    }
}

/// Lower-case words, some hyphenated, some with digits: the text of generated files.
pub(crate) const WORDS: [&str; 64] = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "from",
    "or",
    "have",
    "an",
    "they",
    "which",
    "one",
    "you",
    "were",
    "her",
    "all",
    "she",
    "there",
    "would",
    "their",
    "we",
    "him",
    "been",
    "has",
    "when",
    "who",
    "will",
    "more",
    "no",
    "if",
    "out",
    "so",
    "said",
    "what",
    "up",
    "its",
    "about",
    "into",
    "than",
    "them",
    "can",
    "only",
    "other",
    "new",
    "some",
    "could",
    "well-known",
    "re-use",
    "x86-64",
    "utf-8",
    "2024",
    "v1.2",
];

/// Appends one line of words (20 to 100 bytes, first word capitalised) and its newline.
pub(crate) fn push_line(out: &mut Vec<u8>, rng: &mut Rng) {
    let target = rng.between(20, 100) as usize;
    let start = out.len();
    while out.len() - start < target {
        if out.len() > start {
            out.push(b' ');
        }
        let word = WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes();
        out.extend_from_slice(word);
    }
    out[start] = out[start].to_ascii_uppercase();
    out.push(b'\n');
}

/// `size` bytes of short lines (the last one cut to fit, still ending in a newline).
pub(crate) fn text_of_lines(size: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(size + 128);
    while out.len() < size {
        push_line(&mut out, &mut rng);
    }
    out.truncate(size);
    if let Some(last) = out.last_mut() {
        *last = b'\n';
    }
    out
}
