//! What a client is offered of a composing tool: its description ends with the tools
//! it may call ([`Registry::offered_definitions`](super::Registry::offered_definitions)).

use std::sync::Arc;

/// The most tools a composing tool's offered description lists; the rest are counted
/// ("and N more").
pub(super) const LISTED_TOOLS: usize = 40;
/// The most characters of a listed tool's description (its first line).
pub(super) const LISTED_DESCRIPTION_CHARS: usize = 120;

/// Ends `definition`'s description (a composing tool's, run by `handler`) with the tools
/// of `entries` it may call: not composing, allowed by its grant.
pub(super) fn describe_callable(
    definition: &mut super::ToolDefinition,
    handler: &dyn super::Handler,
    entries: &[Arc<super::Entry>],
) {
    use std::fmt::Write as _;
    let callable = entries
        .iter()
        .filter(|entry| !entry.handler.composes() && handler.may_call(&entry.definition.name));
    let mut text = String::from("\n\nTools the program can call:");
    let mut listed = 0usize;
    let mut more = 0usize;
    for entry in callable {
        if listed == LISTED_TOOLS {
            more += 1;
            continue;
        }
        listed += 1;
        let line = entry
            .definition
            .description
            .lines()
            .next()
            .unwrap_or("")
            .trim();
        let line: String = if line.chars().count() > LISTED_DESCRIPTION_CHARS {
            line.chars()
                .take(LISTED_DESCRIPTION_CHARS - 1)
                .chain(std::iter::once('…'))
                .collect()
        } else {
            line.to_owned()
        };
        let _ = write!(text, "\n- {}: {line}", entry.definition.name);
    }
    if listed == 0 {
        text.push_str(" none (the operator allows this tool no others)");
    }
    if more > 0 {
        let _ = write!(text, "\n- and {more} more: list them from the program");
    }
    definition.description.push_str(&text);
}
