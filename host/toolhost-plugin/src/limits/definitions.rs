//! [`DefinitionLimits`]: what a plugin may declare when it is loaded (tools, schema and
//! description sizes, nesting, the time to answer), and [`DefinitionCap`], the cap a
//! refused declaration went over.

use std::time::Duration;

use toolhost::registry::format_bytes;

/// Default of [`DefinitionLimits::max_tools`]: 128 tools per plugin. The SDK's examples
/// declare 1 to 3; a plugin with more is a tool collection better split up, and every
/// tool costs every model request its definition.
pub(crate) const DEFAULT_MAX_TOOLS: usize = 128;
/// Default of [`DefinitionLimits::max_schema_bytes`]: 64 KiB of parameters schema per
/// tool. The built-in tools' schemas are under 2 KiB; a schema is sent with every
/// `tools/list`, so a large one multiplies into every client's memory.
pub(crate) const DEFAULT_MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Default of [`DefinitionLimits::max_description_bytes`]: 4 KiB per description, a
/// page of text (the built-ins' longest is under 2 KiB).
pub(crate) const DEFAULT_MAX_DESCRIPTION_BYTES: usize = 4 * 1024;
/// Default of [`DefinitionLimits::max_title_bytes`]: 256 bytes, a line of a user
/// interface (MCP titles are short display names such as "Read file").
pub(crate) const DEFAULT_MAX_TITLE_BYTES: usize = 256;
/// Default of [`DefinitionLimits::max_schema_depth`]: 32 levels of nested JSON, far
/// more than any argument object needs (the built-ins nest 4), and well under
/// serde_json's recursion limit of 128, so a schema that passes is safe to walk
/// recursively.
pub(crate) const DEFAULT_MAX_SCHEMA_DEPTH: usize = 32;
/// Default of [`DefinitionLimits::max_total_bytes`]: 1 MiB for all of a plugin's names,
/// descriptions and schemas together, so one plugin adds at most that to each
/// `tools/list` answer.
pub(crate) const DEFAULT_MAX_DEFINITIONS_BYTES: usize = 1024 * 1024;
/// Default of [`DefinitionLimits::timeout`]: 5 s to answer `definitions`. A plugin
/// builds a constant list (the SDK's examples take well under a millisecond); a longer
/// wait only delays the host's start, and loading waits for the slowest plugin.
pub(crate) const DEFAULT_DEFINITIONS_TIMEOUT: Duration = Duration::from_secs(5);

/// Caps on what a plugin may declare in `definitions`, checked at load: a plugin over
/// any of them is not loaded ([`PluginErrorKind::DefinitionsTooLarge`](crate::PluginErrorKind::DefinitionsTooLarge)
/// names the tool, the cap and both values), and the deadline for answering. Built from
/// [`DefinitionLimits::default`] with the `with_*` setters (each states its default).
///
/// ```
/// use toolhost_plugin::limits::DefinitionLimits;
///
/// let caps = DefinitionLimits::default();
/// assert_eq!(caps.max_tools(), 128);
/// assert_eq!(caps.max_schema_bytes(), 64 * 1024);
/// assert_eq!(caps.with_max_tools(8).max_tools(), 8);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionLimits {
    /// Tools one plugin may declare.
    pub(crate) max_tools: usize,
    /// Bytes of one tool's parameters schema (its JSON text), and of its output schema.
    pub(crate) max_schema_bytes: usize,
    /// Bytes of one tool's title.
    pub(crate) max_title_bytes: usize,
    /// Bytes of one tool's description.
    pub(crate) max_description_bytes: usize,
    /// Nesting depth of one tool's parameters schema, and of its output schema (an
    /// empty object is depth 1).
    pub(crate) max_schema_depth: usize,
    /// Bytes of all names, descriptions and schemas of one plugin together.
    pub(crate) max_total_bytes: usize,
    /// Time the plugin has to answer `definitions` (or its call timeout, if shorter). A
    /// plugin over it is not loaded; the others load meanwhile.
    pub(crate) timeout: Duration,
}

impl Default for DefinitionLimits {
    fn default() -> Self {
        Self {
            max_tools: DEFAULT_MAX_TOOLS,
            max_schema_bytes: DEFAULT_MAX_SCHEMA_BYTES,
            max_title_bytes: DEFAULT_MAX_TITLE_BYTES,
            max_description_bytes: DEFAULT_MAX_DESCRIPTION_BYTES,
            max_schema_depth: DEFAULT_MAX_SCHEMA_DEPTH,
            max_total_bytes: DEFAULT_MAX_DEFINITIONS_BYTES,
            timeout: DEFAULT_DEFINITIONS_TIMEOUT,
        }
    }
}

impl DefinitionLimits {
    /// Tools one plugin may declare ([`with_max_tools`](Self::with_max_tools)).
    pub fn max_tools(&self) -> usize {
        self.max_tools
    }

    /// Tools one plugin may declare. Default: 128 (the SDK's examples declare 1 to 3; every
    /// tool costs every model request its definition). A plugin over it is not loaded ([`PluginErrorKind::DefinitionsTooLarge`](crate::PluginErrorKind::DefinitionsTooLarge), naming the tool and both values).
    #[must_use]
    pub fn with_max_tools(mut self, max_tools: usize) -> Self {
        self.max_tools = max_tools;
        self
    }

    /// Bytes of one tool's parameters (or output) schema ([`with_max_schema_bytes`](Self::with_max_schema_bytes)).
    pub fn max_schema_bytes(&self) -> usize {
        self.max_schema_bytes
    }

    /// Bytes of one tool's parameters schema (its JSON text), and of its output schema.
    /// Default: 64 KiB (a schema is sent with every `tools/list`). A plugin over it is not loaded ([`PluginErrorKind::DefinitionsTooLarge`](crate::PluginErrorKind::DefinitionsTooLarge), naming the tool and both values).
    #[must_use]
    pub fn with_max_schema_bytes(mut self, max_schema_bytes: usize) -> Self {
        self.max_schema_bytes = max_schema_bytes;
        self
    }

    /// Bytes of one tool's title ([`with_max_title_bytes`](Self::with_max_title_bytes)).
    pub fn max_title_bytes(&self) -> usize {
        self.max_title_bytes
    }

    /// Bytes of one tool's title. Default: 256 bytes, a line of a user interface. A plugin over it is not loaded ([`PluginErrorKind::DefinitionsTooLarge`](crate::PluginErrorKind::DefinitionsTooLarge), naming the tool and both values).
    #[must_use]
    pub fn with_max_title_bytes(mut self, max_title_bytes: usize) -> Self {
        self.max_title_bytes = max_title_bytes;
        self
    }

    /// Bytes of one tool's description ([`with_max_description_bytes`](Self::with_max_description_bytes)).
    pub fn max_description_bytes(&self) -> usize {
        self.max_description_bytes
    }

    /// Bytes of one tool's description. Default: 4 KiB, a page of text. A plugin over it is not loaded ([`PluginErrorKind::DefinitionsTooLarge`](crate::PluginErrorKind::DefinitionsTooLarge), naming the tool and both values).
    #[must_use]
    pub fn with_max_description_bytes(mut self, max_description_bytes: usize) -> Self {
        self.max_description_bytes = max_description_bytes;
        self
    }

    /// Nesting depth of one tool's schemas ([`with_max_schema_depth`](Self::with_max_schema_depth)).
    pub fn max_schema_depth(&self) -> usize {
        self.max_schema_depth
    }

    /// Nesting depth of one tool's parameters schema, and of its output schema (an empty
    /// object is depth 1). Default: 32, well under serde_json's recursion limit of 128, so a
    /// schema that passes is safe to walk recursively. A plugin over it is not loaded ([`PluginErrorKind::DefinitionsTooLarge`](crate::PluginErrorKind::DefinitionsTooLarge), naming the tool and both values).
    #[must_use]
    pub fn with_max_schema_depth(mut self, max_schema_depth: usize) -> Self {
        self.max_schema_depth = max_schema_depth;
        self
    }

    /// Bytes of all of one plugin's definitions together ([`with_max_total_bytes`](Self::with_max_total_bytes)).
    pub fn max_total_bytes(&self) -> usize {
        self.max_total_bytes
    }

    /// Bytes of all names, descriptions and schemas of one plugin together. Default: 1 MiB,
    /// so one plugin adds at most that to each `tools/list` answer. A plugin over it is not loaded ([`PluginErrorKind::DefinitionsTooLarge`](crate::PluginErrorKind::DefinitionsTooLarge), naming the tool and both values).
    #[must_use]
    pub fn with_max_total_bytes(mut self, max_total_bytes: usize) -> Self {
        self.max_total_bytes = max_total_bytes;
        self
    }

    /// Time a plugin has to answer `definitions` ([`with_timeout`](Self::with_timeout)).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Time the plugin has to answer `definitions` (or its call timeout, if shorter).
    /// Default: 5 s. A plugin over it is not loaded; the others load meanwhile.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// Which cap of [`DefinitionLimits`] a plugin's definitions broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DefinitionCap {
    /// [`DefinitionLimits::max_tools`].
    Tools,
    /// [`DefinitionLimits::max_schema_bytes`].
    Schema,
    /// [`DefinitionLimits::max_description_bytes`].
    Description,
    /// [`DefinitionLimits::max_schema_depth`].
    SchemaDepth,
    /// [`DefinitionLimits::max_total_bytes`].
    Total,
    /// [`DefinitionLimits::max_title_bytes`].
    Title,
    /// [`DefinitionLimits::max_schema_bytes`], for the output schema.
    OutputSchema,
    /// [`DefinitionLimits::max_schema_depth`], for the output schema.
    OutputSchemaDepth,
}

impl DefinitionCap {
    /// The field of [`DefinitionLimits`] that sets this cap.
    pub fn field(self) -> &'static str {
        match self {
            DefinitionCap::Tools => "max_tools",
            DefinitionCap::Schema | DefinitionCap::OutputSchema => "max_schema_bytes",
            DefinitionCap::Description => "max_description_bytes",
            DefinitionCap::SchemaDepth | DefinitionCap::OutputSchemaDepth => "max_schema_depth",
            DefinitionCap::Total => "max_total_bytes",
            DefinitionCap::Title => "max_title_bytes",
        }
    }

    /// What the plugin's author should do instead.
    fn advice(self) -> &'static str {
        match self {
            DefinitionCap::Tools => "Split it into several plugins",
            DefinitionCap::Schema => "Describe the arguments more briefly",
            DefinitionCap::Description => "Shorten the description",
            DefinitionCap::SchemaDepth => "Flatten the schema",
            DefinitionCap::Total => "Shorten the descriptions and schemas, or split the plugin",
            DefinitionCap::Title => "Shorten the title (a few words)",
            DefinitionCap::OutputSchema => "Describe the result more briefly",
            DefinitionCap::OutputSchemaDepth => "Flatten the output schema",
        }
    }

    /// The message of [`PluginErrorKind::DefinitionsTooLarge`](crate::PluginErrorKind::DefinitionsTooLarge)
    /// after the file name.
    pub(crate) fn describe(self, tool: Option<&str>, actual: u64, limit: u64) -> String {
        let (what, actual, limit) = match self {
            DefinitionCap::Tools => (
                format!("the plugin declares {actual} tools"),
                String::new(),
                limit.to_string(),
            ),
            DefinitionCap::Schema => (
                "its parameters schema is".to_owned(),
                format_bytes(actual),
                format_bytes(limit),
            ),
            DefinitionCap::Description => (
                "its description is".to_owned(),
                format_bytes(actual),
                format_bytes(limit),
            ),
            DefinitionCap::SchemaDepth => (
                format!("its parameters schema nests {actual} levels deep"),
                String::new(),
                limit.to_string(),
            ),
            DefinitionCap::Total => (
                "the plugin's tool definitions total".to_owned(),
                format_bytes(actual),
                format_bytes(limit),
            ),
            DefinitionCap::Title => (
                "its title is".to_owned(),
                format_bytes(actual),
                format_bytes(limit),
            ),
            DefinitionCap::OutputSchema => (
                "its output schema is".to_owned(),
                format_bytes(actual),
                format_bytes(limit),
            ),
            DefinitionCap::OutputSchemaDepth => (
                format!("its output schema nests {actual} levels deep"),
                String::new(),
                limit.to_string(),
            ),
        };
        let subject = match tool {
            Some(tool) => format!("tool \"{tool}\": {what}"),
            None => what,
        };
        let subject = if actual.is_empty() {
            subject
        } else {
            format!("{subject} {actual}")
        };
        format!(
            "{subject}, over the host's cap of {limit} (DefinitionLimits::{}); the plugin was not loaded. {}",
            self.field(),
            self.advice()
        )
    }
}
