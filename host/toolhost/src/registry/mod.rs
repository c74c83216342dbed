//! The tool registry: definitions offered to the model, and dispatch of its calls.
//!
//! A [`Registry`] holds tools in registration order. The agent offers
//! [`Registry::definitions`] to the model and runs [`Registry::dispatch`] for every call.
//! Built-in tools and plugin tools live in the same registry.
//!
//! Two rules guard what the model sees. A plugin cannot pass for another tool: the
//! built-in tools' names are reserved to [`Registry::register_builtin`], and no two tools
//! may have names that differ only in case, `-` or `_` (see [`name_key`]). And nothing a
//! call returns is larger than the result cap, errors included: dispatch cuts any error's
//! text to it, whatever produced the error.
//!
//! ```
//! use toolhost::registry::{Arguments, CallContext, Environment, Registry, ToolDefinition, ToolResult};
//! use toolhost_sdk::schema::{object, string};
//!
//! let registry = Registry::new();
//! registry.register(
//!     ToolDefinition::new(
//!         "greet",
//!         "Greet a person by name.",
//!         object([("name", string("Who to greet."))], ["name"]),
//!     ),
//!     |_ctx: CallContext, args: Arguments, _env: Environment| async move {
//!         Ok(ToolResult::new(format!("Hello, {}!", args.required_str("name")?)))
//!     },
//! )?;
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! let result = registry
//!     .dispatch(&CallContext::new(), &toolhost::registry::ToolCall::new("greet", r#"{"name":"Ada"}"#), &Environment::default())
//!     .await?;
//! assert_eq!(result.content, "Hello, Ada!");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The spec's dispatch example: a `divide` tool whose handler panics on zero.
//!
//! ```
//! use toolhost::registry::{Arguments, CallContext, Environment, Registry, ToolCall, ToolDefinition, ToolError, ToolResult};
//! use toolhost_sdk::schema::{number, object};
//!
//! let registry = Registry::new();
//! registry.register(
//!     ToolDefinition::new("divide", "Divide 100 by a number.", object([("by", number("Divisor."))], ["by"])),
//!     |_ctx: CallContext, args: Arguments, _env: Environment| async move {
//!         let by = args.get("by").and_then(|v| v.as_i64()).unwrap_or(1);
//!         if by == 0 {
//!             panic!("division by zero");
//!         }
//!         Ok(ToolResult::new(100 / by))
//!     },
//! )?;
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! let (ctx, env) = (CallContext::new(), Environment::default());
//! let err = registry.dispatch(&ctx, &ToolCall::new("divide", "{}"), &env).await.unwrap_err();
//! assert!(matches!(err, ToolError::InvalidArguments { .. }));
//! let err = registry.dispatch(&ctx, &ToolCall::new("divide", r#"{"by":0}"#), &env).await.unwrap_err();
//! assert!(matches!(err, ToolError::ToolPanicked { .. }));
//! let err = registry.dispatch(&ctx, &ToolCall::new("multiply", ""), &env).await.unwrap_err();
//! assert!(matches!(err, ToolError::UnknownTool { .. }));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

mod arguments;
mod cap;
mod dispatch;
mod error;
mod handler;
mod metadata;
mod names;
mod panic;
mod types;

pub use arguments::{json_type, Arguments};
pub use error::{Limit, RegisterError, ToolError};
pub use handler::{CallContext, Handler, HandlerFuture};
pub use metadata::{check_output, title_key, MAX_TITLE_CHARS, RESERVED_TOOL_TITLES};
pub use names::{name_key, RESERVED_TOOL_NAMES};
pub use panic::{install_panic_hook, MAX_PANIC_MESSAGE_BYTES};
pub use types::{Environment, ToolAnnotations, ToolCall, ToolDefinition, ToolResult};

pub use error::{format_bytes, format_duration};

/// Default per-call time limit: a call still running after this is stopped with
/// [`ToolError::TimedOut`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Default cap on one result's JSON encoding (64 KiB). Larger results become
/// [`ToolError::ResultTooLarge`] rather than reaching the model cut in half; the file
/// tools size their windows (40 KiB of content) to stay under it.
pub const DEFAULT_RESULT_CAP: usize = 64 * 1024;

/// The longest tool name MCP clients accept.
pub const MAX_TOOL_NAME_LEN: usize = 128;

/// A registered tool.
struct Entry {
    definition: ToolDefinition,
    /// The schema's top-level `required` names, read once at registration.
    required: Vec<String>,
    handler: Arc<dyn Handler>,
}

#[derive(Default)]
struct Tools {
    entries: Vec<Arc<Entry>>,
    by_name: HashMap<String, usize>,
    /// Entry index by [`name_key`]: one tool per key, so no two look alike.
    by_key: HashMap<String, usize>,
}

/// Who is registering: the host's own tools may take reserved names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Builtin,
    Outside,
}

/// Tool definitions and their handlers, in registration order.
///
/// `Send + Sync`: share it behind an `Arc`; registration and dispatch take `&self`.
pub struct Registry {
    tools: RwLock<Tools>,
    call_timeout: Duration,
    result_cap: usize,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.names())
            .field("call_timeout", &self.call_timeout)
            .field("result_cap", &self.result_cap)
            .finish()
    }
}

impl Registry {
    /// An empty registry with the default call timeout (30 s) and result cap (64 KiB).
    pub fn new() -> Self {
        Self {
            tools: RwLock::new(Tools::default()),
            call_timeout: DEFAULT_CALL_TIMEOUT,
            result_cap: DEFAULT_RESULT_CAP,
        }
    }

    /// This registry with `timeout` as the per-call time limit.
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// This registry with `cap` bytes as the largest result (as JSON) passed to the model.
    pub fn with_result_cap(mut self, cap: usize) -> Self {
        self.result_cap = cap;
        self
    }

    /// The per-call time limit.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// The result cap in bytes.
    pub fn result_cap(&self) -> usize {
        self.result_cap
    }

    /// Adds a tool.
    ///
    /// The built-in tools' names ([`RESERVED_TOOL_NAMES`]) and their look-alikes are
    /// refused here, whether or not the built-in is registered: the host's own tools come
    /// in through [`Registry::register_builtin`]. A name that differs from a registered
    /// tool's only in case, `-` or `_` ([`name_key`]) is refused too.
    ///
    /// # Errors
    /// [`RegisterError::EmptyName`], [`RegisterError::InvalidName`] (MCP allows 1 to 128
    /// characters of `a-zA-Z0-9_-`), [`RegisterError::Reserved`],
    /// [`RegisterError::DuplicateTool`] or [`RegisterError::LookAlike`].
    pub fn register(
        &self,
        definition: ToolDefinition,
        handler: impl Handler,
    ) -> Result<(), RegisterError> {
        self.register_shared(definition, Some(Arc::new(handler)))
    }

    /// Adds one of the host's own tools. Unlike [`Registry::register`], it may take a name
    /// of [`RESERVED_TOOL_NAMES`]; the other rules (a valid name, not taken, not a
    /// look-alike of a registered tool) are the same.
    ///
    /// # Sandbox
    /// Only for tools the host itself provides (`tools::register_vfs_tools`,
    /// `tools::register_plan_tool`). Never pass it a definition that came from a plugin or
    /// any other outside source: that would let it stand in for a built-in tool.
    ///
    /// # Errors
    /// As [`Registry::register`], except [`RegisterError::Reserved`].
    pub fn register_builtin(
        &self,
        definition: ToolDefinition,
        handler: impl Handler,
    ) -> Result<(), RegisterError> {
        self.register_batch(vec![(definition, Arc::new(handler))], Origin::Builtin)
    }

    /// Adds a tool whose handler is shared or built at run time (plugin loaders).
    ///
    /// # Errors
    /// As [`Registry::register`], and [`RegisterError::MissingHandler`] for `None`.
    pub fn register_shared(
        &self,
        definition: ToolDefinition,
        handler: Option<Arc<dyn Handler>>,
    ) -> Result<(), RegisterError> {
        let Some(handler) = handler else {
            check_name(&definition.name)?;
            return Err(RegisterError::MissingHandler {
                name: definition.name,
            });
        };
        self.register_all(vec![(definition, handler)])
    }

    /// Adds several tools at once, all or nothing: when any one is refused (a bad, taken or
    /// reserved name, a look-alike, a name given twice in `tools`, or two look-alikes in
    /// `tools`), none is registered. Plugin loaders use it so a plugin is never half
    /// registered.
    ///
    /// # Errors
    /// The first refusal, as [`Registry::register_shared`] gives it.
    pub fn register_all(
        &self,
        tools: Vec<(ToolDefinition, Arc<dyn Handler>)>,
    ) -> Result<(), RegisterError> {
        self.register_batch(tools, Origin::Outside)
    }

    /// Checks every name of `tools` against the registry and the rest of the batch, then
    /// registers them all, under one lock.
    fn register_batch(
        &self,
        tools: Vec<(ToolDefinition, Arc<dyn Handler>)>,
        origin: Origin,
    ) -> Result<(), RegisterError> {
        let mut registered = self.write();
        // The batch's names so far, by key.
        let mut batch: HashMap<String, &str> = HashMap::new();
        for (definition, _) in &tools {
            let name = definition.name.as_str();
            check_name(name)?;
            let key = name_key(name);
            if origin == Origin::Outside {
                if let Some(builtin) = names::reserved_for(&key) {
                    return Err(RegisterError::Reserved {
                        name: name.to_owned(),
                        builtin: builtin.to_owned(),
                    });
                }
            }
            let existing = registered
                .by_key
                .get(&key)
                .map(|&index| registered.entries[index].definition.name.as_str())
                .or_else(|| batch.get(&key).copied());
            match existing {
                Some(existing) if existing == name => {
                    return Err(RegisterError::DuplicateTool {
                        name: name.to_owned(),
                    })
                }
                Some(existing) => {
                    return Err(RegisterError::LookAlike {
                        name: name.to_owned(),
                        existing: existing.to_owned(),
                    })
                }
                None => {
                    batch.insert(key, name);
                }
            }
        }
        // Titles and output schemas, once every name is known to be free.
        for (index, (definition, _)) in tools.iter().enumerate() {
            let registered_ones = registered.entries.iter().map(|entry| &entry.definition);
            let others = registered_ones
                .chain(tools[..index].iter().map(|(earlier, _)| earlier))
                .map(|other| (other.name.as_str(), other.title.as_deref()));
            metadata::check(definition, origin == Origin::Outside, others)?;
        }
        for (definition, handler) in tools {
            let required = toolhost_sdk::schema::required_fields(&definition.parameters);
            let index = registered.entries.len();
            registered.by_name.insert(definition.name.clone(), index);
            registered.by_key.insert(name_key(&definition.name), index);
            registered.entries.push(Arc::new(Entry {
                definition,
                required,
                handler,
            }));
        }
        Ok(())
    }

    /// The tools' definitions, in registration order.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.read()
            .entries
            .iter()
            .map(|entry| entry.definition.clone())
            .collect()
    }

    /// The tools' names, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.read()
            .entries
            .iter()
            .map(|entry| entry.definition.name.clone())
            .collect()
    }

    /// Whether a tool of that name is registered.
    pub fn has(&self, name: &str) -> bool {
        self.read().by_name.contains_key(name)
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.read().entries.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lookup(&self, name: &str) -> Option<Arc<Entry>> {
        let tools = self.read();
        tools
            .by_name
            .get(name)
            .map(|&index| Arc::clone(&tools.entries[index]))
    }

    // Handlers never run under the lock, so a poisoned lock only means a panic inside
    // this module's own bookkeeping; the data is still consistent, so carry on.
    fn read(&self) -> RwLockReadGuard<'_, Tools> {
        self.tools
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Tools> {
        self.tools
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Checks a tool name against MCP's rule: 1 to 128 characters of `a-zA-Z0-9_-`.
///
/// # Errors
/// [`RegisterError::EmptyName`] or [`RegisterError::InvalidName`].
pub fn check_name(name: &str) -> Result<(), RegisterError> {
    if name.is_empty() {
        return Err(RegisterError::EmptyName);
    }
    let valid = name.len() <= MAX_TOOL_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(RegisterError::InvalidName {
            name: name.to_owned(),
        })
    }
}
