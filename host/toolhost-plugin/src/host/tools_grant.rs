//! [`ToolsGrant`]: which of its registry's tools a plugin may call (`[grants] tools`, the
//! 0.3.0 `registry` import), and how many calls one of its calls may make.

/// A set of tool names: all of them (`"*"`), or those listed.
///
/// ```
/// use toolhost_plugin::manifest::ToolNames;
///
/// let some = ToolNames::only(["read_file", "grep"]);
/// assert!(some.allows("grep") && !some.allows("write_file"));
/// assert!(ToolNames::All.allows("write_file"));
/// assert_eq!(some.intersect(&ToolNames::only(["grep", "greet"])), ToolNames::only(["grep"]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolNames {
    /// Every tool (written `"*"`).
    All,
    /// The tools named (in the order written, without repeats).
    Only(Vec<String>),
}

impl ToolNames {
    /// The tools named in `names` (repeats dropped; `"*"` among them means all).
    pub fn only<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        let mut kept: Vec<String> = Vec::new();
        for name in names {
            let name = name.into();
            if name == "*" {
                return Self::All;
            }
            if !kept.contains(&name) {
                kept.push(name);
            }
        }
        Self::Only(kept)
    }

    /// Whether tool `name` is in the set.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            Self::All => true,
            Self::Only(names) => names.iter().any(|n| n == name),
        }
    }

    /// The tools in both sets (what the manifest asks and the operator allows).
    #[must_use]
    pub fn intersect(&self, other: &Self) -> Self {
        match (self, other) {
            (Self::All, other) | (other, Self::All) => other.clone(),
            (Self::Only(mine), Self::Only(theirs)) => Self::Only(
                mine.iter()
                    .filter(|name| theirs.contains(name))
                    .cloned()
                    .collect(),
            ),
        }
    }
}

impl std::fmt::Display for ToolNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::All => f.write_str("*"),
            Self::Only(names) if names.is_empty() => f.write_str("(none)"),
            Self::Only(names) => f.write_str(&names.join(", ")),
        }
    }
}

/// What a plugin's manifest asks of its registry's tools (`[grants] tools` and
/// `max_tool_calls`): the tools it may call (within what the operator allows with
/// `--plugin-tools`), and how many calls one of its tool calls may make.
///
/// ```
/// use toolhost_plugin::manifest::{ToolNames, ToolsGrant};
///
/// let grant = ToolsGrant::new(ToolNames::All, None).unwrap();
/// assert_eq!(grant.max_tool_calls, 64);
/// assert_eq!(
///     ToolsGrant::new(ToolNames::All, Some(65)).unwrap_err(),
///     "max_tool_calls is 65; it must be 1 to 64 (tool calls per call of the plugin)"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolsGrant {
    /// The tools the manifest asks to call.
    pub tools: ToolNames,
    /// Calls through the `registry` import per call of the plugin: default and at most
    /// [`ToolsGrant::MAX_TOOL_CALLS`] (a manifest may only lower it).
    pub max_tool_calls: u32,
}

impl ToolsGrant {
    /// The most (and default) tool calls one call of a plugin may make: 64.
    pub const MAX_TOOL_CALLS: u32 = 64;

    /// A grant of `tools`, with at most `max_tool_calls` calls per call (default
    /// [`ToolsGrant::MAX_TOOL_CALLS`]).
    ///
    /// # Errors
    /// A message naming the bound, for 0 or a value over [`ToolsGrant::MAX_TOOL_CALLS`].
    pub fn new(tools: ToolNames, max_tool_calls: Option<u64>) -> Result<Self, String> {
        let max = max_tool_calls.unwrap_or(u64::from(Self::MAX_TOOL_CALLS));
        if !(1..=u64::from(Self::MAX_TOOL_CALLS)).contains(&max) {
            return Err(format!(
                "max_tool_calls is {max}; it must be 1 to {} (tool calls per call of the plugin)",
                Self::MAX_TOOL_CALLS
            ));
        }
        Ok(Self {
            tools,
            // Within 1..=64: fits.
            max_tool_calls: u32::try_from(max).unwrap_or(Self::MAX_TOOL_CALLS),
        })
    }
}
