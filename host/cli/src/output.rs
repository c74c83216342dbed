//! What the commands show people: writing a report to stdout, the table of `host tools`,
//! and figures written for reading. Imports nothing of the command line, so that every
//! command can use it.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use toolhost::registry::ToolDefinition;

/// Writes to stdout. A reader that closed early (`host tools | head -1`) is not an error.
pub(crate) fn print(text: &str) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(err) => Err(err).context("cannot write to stdout"),
    }
}

/// A duration for people: `1.23s`, `45ms`, `3µs`.
pub(crate) fn format_elapsed(duration: Duration) -> String {
    if duration >= Duration::from_secs(1) {
        format!("{:.2}s", duration.as_secs_f64())
    } else if duration >= Duration::from_millis(1) {
        format!("{}ms", duration.as_millis())
    } else {
        format!("{}µs", duration.as_micros())
    }
}

/// One line per tool: its name, padded, and a summary of its description ([`summary`]).
pub(crate) fn tools_table(definitions: &[ToolDefinition]) -> String {
    let width = definitions.iter().map(|d| d.name.len()).max().unwrap_or(0);
    definitions
        .iter()
        .map(|d| {
            format!("{:width$}  {}", d.name, summary(&d.description))
                .trim_end()
                .to_owned()
                + "\n"
        })
        .collect()
}

/// The longest summary `host tools` prints, in characters (the table stays readable in a
/// terminal; `--json` has the whole description).
const SUMMARY_CHARS: usize = 100;

/// The first sentence of the description's first line, if it fits in [`SUMMARY_CHARS`];
/// otherwise as many whole words as fit, followed by an ellipsis. A sentence ends at `.`,
/// `!` or `?` right after a word (not `such as . (`) that is not an abbreviation (`e.g.`),
/// followed by the end of the line or a space.
fn summary(description: &str) -> String {
    let line = description.lines().next().unwrap_or_default().trim();
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let sentence_end = chars.iter().enumerate().find_map(|(i, &(at, c))| {
        let word = line[..at].rsplit(' ').next().unwrap_or_default();
        let after_word = word.chars().last().is_some_and(|before| {
            before.is_alphanumeric() || matches!(before, ')' | '"' | '\'' | '`' | ']' | '}')
        }) && !word.contains('.');
        let then_space = chars.get(i + 1).is_none_or(|&(_, next)| next == ' ');
        (matches!(c, '.' | '!' | '?') && after_word && then_space).then_some(at + c.len_utf8())
    });
    let sentence = &line[..sentence_end.unwrap_or(line.len())];
    if sentence.chars().count() <= SUMMARY_CHARS {
        return sentence.to_owned();
    }
    // Whole words within the cap (the ellipsis included), without a dangling `,` or `(`.
    let cap = sentence
        .char_indices()
        .nth(SUMMARY_CHARS - 1)
        .map_or(sentence.len(), |(at, _)| at);
    // Up to and including the character at the cap (a space there ends a whole word).
    let upto = cap + sentence[cap..].chars().next().map_or(0, char::len_utf8);
    let cut = match sentence[..upto].rfind(' ') {
        Some(space) if space > 0 => &sentence[..space],
        _ => &sentence[..cap],
    };
    let cut = cut.trim_end_matches(|c: char| !c.is_alphanumeric() && !matches!(c, ')' | '"' | '`'));
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formatting() {
        assert_eq!(format_elapsed(Duration::from_millis(1234)), "1.23s");
        assert_eq!(format_elapsed(Duration::from_millis(45)), "45ms");
        assert_eq!(format_elapsed(Duration::from_micros(3)), "3µs");
    }

    #[test]
    fn table_aligns_names_and_keeps_the_first_line() {
        let defs = [
            ToolDefinition::new(
                "read_file",
                "Read a file. It has lines.\nMore detail.",
                json!({}),
            ),
            ToolDefinition::new("glob", "  Find paths.  ", json!({})),
            ToolDefinition::new("x", "", json!({})),
        ];
        assert_eq!(
            tools_table(&defs),
            "read_file  Read a file.\nglob       Find paths.\nx\n"
        );
    }

    /// grep's description came out as "... escape regex characters such as ." (cut at the
    /// first ". "): a summary ends at a sentence's end or, when that is too long, at a word
    /// with an ellipsis.
    #[test]
    fn summaries_end_at_a_sentence_or_a_word_with_an_ellipsis() {
        assert_eq!(
            summary("Read a file. Returns {content, size}. More."),
            "Read a file."
        );
        assert_eq!(
            summary("Find paths (e.g. docs/*.md) fast"),
            "Find paths (e.g. docs/*.md) fast"
        );
        assert_eq!(
            summary("Edit a file. old_string is the text."),
            "Edit a file."
        );
        assert_eq!(summary("Find paths. * matches a segment."), "Find paths.");
        assert_eq!(summary("Is it? Yes."), "Is it?");
        // One long word: cut inside it, still with the ellipsis.
        let long = "x".repeat(300);
        assert_eq!(summary(&long).chars().count(), SUMMARY_CHARS);
        let dir = tempfile::tempdir().unwrap();
        let registry = toolhost::registry::Registry::new();
        toolhost::tools::register_vfs_tools(
            &registry,
            toolhost::tools::VfsToolOptions::new(std::sync::Arc::new(
                toolhost::vfs::OsStorage::open(dir.path()).unwrap(),
            )),
        )
        .unwrap();
        let definitions = registry.definitions();
        let grep = definitions.iter().find(|d| d.name == "grep").unwrap();
        let text = summary(&grep.description);
        assert_eq!(
            text,
            "Search the contents of files with a regular expression (RE2 syntax: no look-around or…"
        );
        assert!(text.chars().count() <= SUMMARY_CHARS);
        // Every built-in's summary is a whole sentence or ends with the ellipsis.
        for definition in definitions {
            let text = summary(&definition.description);
            assert!(
                text.ends_with('.') || text.ends_with('…'),
                "{}: {text}",
                definition.name
            );
            assert!(!text.ends_with(" ."), "{}: {text}", definition.name);
        }
    }
}
