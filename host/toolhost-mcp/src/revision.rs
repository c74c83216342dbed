//! The MCP protocol revisions this server speaks, and what differs between them.
//!
//! Two eras ("dual era", as revision 2026-07-28 calls a server that speaks both):
//! - **legacy** (2024-11-05 to 2025-11-25): the client opens with `initialize`, which
//!   fixes the revision for the whole connection (stdio) or session (HTTP);
//! - **modern** (2026-07-28): no handshake. Every request names its revision and the
//!   client's capabilities in `params._meta` (`io.modelcontextprotocol/protocolVersion`,
//!   `io.modelcontextprotocol/clientCapabilities`); every result carries
//!   `resultType: "complete"` and the server's identity in its `_meta`; a client may ask
//!   `server/discover` first.
//!
//! ```
//! use toolhost_mcp::Revision;
//!
//! let modern = Revision::parse("2026-07-28").unwrap();
//! assert!(modern.is_modern());
//! assert_eq!(Revision::parse("2025-03-26").map(Revision::accepts_batches), Some(true));
//! assert_eq!(Revision::parse("1999-01-01"), None);
//! assert_eq!(Revision::NEWEST_LEGACY.as_str(), "2025-11-25");
//! ```

/// One MCP revision, oldest first (so `<` means older).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Revision {
    /// 2024-11-05, the first release.
    V2024_11_05,
    /// 2025-03-26: JSON-RPC batches (required), tool annotations.
    V2025_03_26,
    /// 2025-06-18: batches removed; titles, output schemas, structured content.
    V2025_06_18,
    /// 2025-11-25: error responses may leave out the id (and may not give it as `null`).
    V2025_11_25,
    /// 2026-07-28: stateless, per-request `_meta`, `server/discover`, `resultType`,
    /// cache hints on lists; `initialize`, `ping` and `logging/setLevel` removed.
    V2026_07_28,
}

impl Revision {
    /// Every revision served, newest first.
    pub const ALL: [Revision; 5] = [
        Revision::V2026_07_28,
        Revision::V2025_11_25,
        Revision::V2025_06_18,
        Revision::V2025_03_26,
        Revision::V2024_11_05,
    ];

    /// The newest revision with an `initialize` handshake: what `initialize` answers a
    /// client asking for a revision this server does not know.
    pub const NEWEST_LEGACY: Revision = Revision::V2025_11_25;

    /// The revision named `version` (`"2025-06-18"`), if served.
    pub fn parse(version: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|revision| revision.as_str() == version)
    }

    /// Its name, as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Revision::V2024_11_05 => "2024-11-05",
            Revision::V2025_03_26 => "2025-03-26",
            Revision::V2025_06_18 => "2025-06-18",
            Revision::V2025_11_25 => "2025-11-25",
            Revision::V2026_07_28 => "2026-07-28",
        }
    }

    /// Whether it is of the modern (stateless, per-request `_meta`) era.
    pub fn is_modern(self) -> bool {
        self >= Revision::V2026_07_28
    }

    /// Whether a JSON-RPC batch (an array of messages on one line) is accepted: only in
    /// 2025-03-26, which requires it; the revisions before had none and the later ones
    /// removed it.
    pub fn accepts_batches(self) -> bool {
        self == Revision::V2025_03_26
    }

    /// Whether tasks are offered (a `tools/call` run in the background, `tasks/*`):
    /// 2025-11-25 defines them (the `tasks` capability), 2026-07-28 as the extension
    /// `io.modelcontextprotocol/tasks`; the revisions before have none.
    pub(crate) fn has_tasks(self) -> bool {
        self >= Revision::V2025_11_25
    }

    /// Whether `tools/list` gives a tool's `execution.taskSupport`: 2025-11-25's `Tool`
    /// has it; 2026-07-28's has no `execution` (tasks are an extension there).
    pub(crate) fn lists_task_support(self) -> bool {
        self == Revision::V2025_11_25
    }

    /// Whether an error answering a message whose id could not be read gives `"id": null`
    /// (JSON-RPC 2.0's rule, which the schemas up to 2025-06-18 do not relax: their id is
    /// required) rather than no `id` member at all (2025-11-25 on, whose schemas make the
    /// id optional and allow no `null`).
    pub fn null_error_id(self) -> bool {
        self <= Revision::V2025_06_18
    }
}

impl std::fmt::Display for Revision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_order() {
        for revision in Revision::ALL {
            assert_eq!(Revision::parse(revision.as_str()), Some(revision));
        }
        assert!(Revision::ALL.windows(2).all(|pair| pair[0] > pair[1]));
        assert_eq!(
            Revision::ALL.map(Revision::is_modern),
            [true, false, false, false, false]
        );
        assert_eq!(
            Revision::ALL.map(Revision::accepts_batches),
            [false, false, false, true, false]
        );
        assert_eq!(
            Revision::ALL.map(Revision::null_error_id),
            [false, false, true, true, true]
        );
        assert_eq!(Revision::parse("2026-07-28 "), None);
    }
}
