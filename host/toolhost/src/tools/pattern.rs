//! The patterns the search tools compile (`glob`'s `pattern`, grep's `pattern` and
//! `path_glob`), checked before and while they are compiled, so a hostile pattern is an
//! argument error and never a panic, a long compile or a large allocation.
//!
//! - A pattern longer than [`MAX_PATTERN_BYTES`] is refused before anything is compiled.
//! - grep's regular expression is compiled with explicit limits: [`REGEX_SIZE_LIMIT`] for
//!   the compiled program and [`REGEX_DFA_SIZE_LIMIT`] for each search thread's lazy DFA.
//!   A short pattern that grows past the first (`\w{100}`: a Unicode class repeated) is
//!   an argument error saying how to write it smaller.
//! - A glob becomes a regular expression inside globset, whose `compile_matcher` panics
//!   when that expression is too big (a 500 KB glob did, printing megabytes). The
//!   expression is compiled here first, under [`GLOB_SIZE_LIMIT`] (below globset's own
//!   10 MiB, with its settings otherwise), so globset is only given globs it compiles.

use globset::{GlobBuilder, GlobMatcher};
use regex::bytes::{Regex, RegexBuilder};

use crate::registry::{Arguments, ToolError};

/// Longest pattern argument (a glob, or grep's regular expression), in bytes: 4 KiB.
/// Patterns a model writes are tens of bytes, an alternation of fifty identifiers a few
/// hundred; 4 KiB leaves room for those while keeping what one call compiles, and what an
/// error about the pattern can quote back, small.
pub const MAX_PATTERN_BYTES: usize = 4 * 1024;

/// Largest compiled regular expression grep accepts (the `regex` crate's `size_limit`):
/// 4 MiB, where the crate's default is 10 MiB. Ordinary patterns take a few KiB; `\w{50}`
/// (a Unicode class repeated fifty times) about 3 MiB, `\w{100}` over 4 MiB. Each grep
/// call compiles its own pattern, so this bounds both the memory and the compile time
/// (tens of milliseconds) one call can spend before it reads a file.
pub const REGEX_SIZE_LIMIT: usize = 4 * 1024 * 1024;

/// Largest lazy-DFA cache of one grep search thread (`dfa_size_limit`): 2 MiB, the `regex`
/// crate's default, stated here so it is fixed and documented. With up to
/// `grep::MAX_WORKERS` (4) threads a call holds at most 8 MiB of caches; a pattern whose
/// DFA outgrows the cache is still searched, by a slower engine.
pub const REGEX_DFA_SIZE_LIMIT: usize = 2 * 1024 * 1024;

/// Largest compiled form of a glob: 1 MiB. A glob of [`MAX_PATTERN_BYTES`] takes well
/// under 100 KiB (`*`, `?` and classes are small byte classes), so this only refuses what
/// globset would have panicked on.
pub const GLOB_SIZE_LIMIT: usize = 1024 * 1024;

/// Refuses `pattern` (argument `field`) when it is longer than [`MAX_PATTERN_BYTES`];
/// `hint` says what to send instead.
fn check_length(args: &Arguments, field: &str, pattern: &str, hint: &str) -> Result<(), ToolError> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(args.invalid(format!(
            "argument \"{field}\" is {} bytes, over the {MAX_PATTERN_BYTES}-byte limit for a pattern; {hint}",
            pattern.len()
        )));
    }
    Ok(())
}

/// The glob in argument `field`, as the `glob` tool and grep's `path_glob` read it: `*`
/// and `?` stay within a segment, `**` crosses segments.
///
/// # Errors
/// [`ToolError::InvalidArguments`] naming `field` when the pattern is too long, malformed
/// (an unclosed `[` or `{`, ...) or too complex to compile.
pub(super) fn glob_matcher(
    args: &Arguments,
    field: &str,
    pattern: &str,
) -> Result<GlobMatcher, ToolError> {
    check_length(
        args,
        field,
        pattern,
        "use a shorter glob such as \"**/*.md\" or \"docs/*.{md,txt}\"",
    )?;
    let glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|err| {
            args.invalid(format!(
                "argument \"{field}\" is not a valid glob: {err}; use * within a segment, ** across segments, ? for one character, {{a,b}} for alternatives"
            ))
        })?;
    // globset's own settings (new_regex in globset 0.4), with a lower size limit: a glob
    // this compiles, globset compiles too, so compile_matcher below cannot panic.
    RegexBuilder::new(glob.regex())
        .dot_matches_new_line(true)
        .size_limit(GLOB_SIZE_LIMIT)
        .build()
        .map_err(|err| match err {
            regex::Error::CompiledTooBig(_) => args.invalid(format!(
                "argument \"{field}\" is a glob too complex to compile (over the {} MiB limit); use a simpler glob with fewer parts",
                GLOB_SIZE_LIMIT >> 20
            )),
            other => args.invalid(format!(
                "argument \"{field}\" is not a valid glob: {other}; use * within a segment, ** across segments, ? for one character, {{a,b}} for alternatives"
            )),
        })?;
    Ok(glob.compile_matcher())
}

/// grep's regular expression from argument `field`: `^` and `$` at every line (`\r\n`
/// included), compiled under [`REGEX_SIZE_LIMIT`] and [`REGEX_DFA_SIZE_LIMIT`].
///
/// # Errors
/// [`ToolError::InvalidArguments`] naming `field` when the pattern is too long, not valid
/// RE2 syntax, or compiles to more than [`REGEX_SIZE_LIMIT`].
pub(super) fn grep_regex(
    args: &Arguments,
    field: &str,
    pattern: &str,
    case_insensitive: bool,
) -> Result<Regex, ToolError> {
    check_length(
        args,
        field,
        pattern,
        "search for a shorter, distinctive part of the text and narrow the files with path_glob",
    )?;
    RegexBuilder::new(pattern)
        .multi_line(true)
        .crlf(true)
        .case_insensitive(case_insensitive)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_DFA_SIZE_LIMIT)
        .build()
        .map_err(|err| match err {
            regex::Error::CompiledTooBig(_) => args.invalid(format!(
                "argument \"{field}\" compiles to a regular expression over the {} MiB size limit; large counted repetitions (\\w{{100}}) and Unicode classes make it grow: use + or * instead of large counts, or (?-u) for ASCII-only classes such as (?-u)\\w",
                REGEX_SIZE_LIMIT >> 20
            )),
            other => args.invalid(format!(
                "argument \"{field}\" is not a valid regular expression (RE2 syntax): {other}"
            )),
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::registry::ToolError;
    use crate::tools::testutil::{backend_tests, invalid_arguments, Backend};

    /// The length at which the issue saw globset panic with 32 MB of stderr.
    const LONG: usize = 500_000;

    fn too_long(field: &str, len: usize, hint: &str) -> String {
        format!(
            "argument \"{field}\" is {len} bytes, over the 4096-byte limit for a pattern; {hint}"
        )
    }

    const GLOB_HINT: &str = "use a shorter glob such as \"**/*.md\" or \"docs/*.{md,txt}\"";
    const GREP_HINT: &str =
        "search for a shorter, distinctive part of the text and narrow the files with path_glob";

    async fn long_globs_are_argument_errors_not_panics(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", "x");
        let pattern = "a".repeat(LONG);
        let message = invalid_arguments(h.call("glob", json!({ "pattern": pattern })).await);
        assert_eq!(message, too_long("pattern", LONG, GLOB_HINT));
        let message = invalid_arguments(
            h.call("grep", json!({"pattern": "x", "path_glob": pattern}))
                .await,
        );
        assert_eq!(message, too_long("path_glob", LONG, GLOB_HINT));
        // At the limit, both still work.
        let pattern = format!("{}*", "?".repeat(MAX_PATTERN_BYTES - 1));
        assert_eq!(
            h.call("glob", json!({ "pattern": pattern })).await.unwrap(),
            json!({"paths": [], "truncated": false})
        );
        assert_eq!(
            h.call("grep", json!({"pattern": "x", "path_glob": pattern}))
                .await
                .unwrap(),
            json!({"matches": [], "truncated": false})
        );
    }

    async fn long_regexes_are_argument_errors(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", "xyz\n");
        let pattern = "x".repeat(MAX_PATTERN_BYTES + 1);
        let message = invalid_arguments(h.call("grep", json!({ "pattern": pattern })).await);
        assert_eq!(
            message,
            too_long("pattern", MAX_PATTERN_BYTES + 1, GREP_HINT)
        );
        // At the limit: an alternation that ends in a match.
        let mut pattern = "(?:".to_owned();
        while pattern.len() < MAX_PATTERN_BYTES - 10 {
            pattern.push_str("abcd|");
        }
        pattern.push_str("xyz)");
        assert!(pattern.len() <= MAX_PATTERN_BYTES);
        assert_eq!(
            h.call("grep", json!({ "pattern": pattern })).await.unwrap(),
            json!({"matches": ["a.md:1:xyz"], "truncated": false})
        );
    }

    async fn a_short_regex_that_explodes_is_an_argument_error(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", "word\n");
        for pattern in [r"\w{100}", r"(\w{100}){100}", r"\p{L}{100}"] {
            let message = invalid_arguments(h.call("grep", json!({ "pattern": pattern })).await);
            assert_eq!(
                message,
                "argument \"pattern\" compiles to a regular expression over the 4 MiB size limit; large counted repetitions (\\w{100}) and Unicode classes make it grow: use + or * instead of large counts, or (?-u) for ASCII-only classes such as (?-u)\\w",
                "{pattern}"
            );
        }
        // The advice works.
        assert_eq!(
            h.call("grep", json!({"pattern": r"(?-u)\w{100}|\w+"}))
                .await
                .unwrap(),
            json!({"matches": ["a.md:1:word"], "truncated": false})
        );
    }

    async fn a_15_mib_argument_to_a_builtin_comes_back_within_the_cap(backend: Backend) {
        let h = backend.default_harness();
        h.put("a.md", "x\n");
        // 15 MiB, the echo the issue reproduced, through the argument grep quotes back; 1 MiB
        // (16 times the cap) through the others, which keeps the suite quick.
        let huge = "é".repeat(15 * 1024 * 1024 / 2);
        let big = "é".repeat(1 << 19);
        for (tool, arguments) in [
            ("grep", json!({"pattern": "x", "output_mode": huge})),
            ("glob", json!({ "pattern": big })),
            ("read_file", json!({ "path": big })),
            ("write_file", json!({"path": big, "content": "x"})),
            (
                "edit_file",
                json!({"path": "a.md", "old_string": big, "new_string": "y"}),
            ),
        ] {
            let err = h.call(tool, arguments).await.unwrap_err();
            let len = serde_json::to_string(&err.to_string()).unwrap().len();
            assert!(
                len <= crate::registry::DEFAULT_RESULT_CAP,
                "{tool}: a {} error of {len} bytes",
                err.kind()
            );
            assert!(
                !matches!(err, ToolError::ToolPanicked { .. }),
                "{tool}: {err}"
            );
        }
    }

    backend_tests!(
        long_globs_are_argument_errors_not_panics,
        long_regexes_are_argument_errors,
        a_short_regex_that_explodes_is_an_argument_error,
        a_15_mib_argument_to_a_builtin_comes_back_within_the_cap,
    );
}
