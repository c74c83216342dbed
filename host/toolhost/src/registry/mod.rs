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

use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

mod arguments;
mod cap;
pub mod catalog;
mod compose;
mod content;
mod definitions;
mod dispatch;
mod error;
mod handler;
mod interaction;
mod metadata;
mod names;
mod observe;
mod offered;
mod panic;
mod record;
mod sampling;
mod timestamp;
mod tools;
mod trace;
mod types;

pub use arguments::{json_type, Arguments};
pub use compose::Composer;
pub use content::{ContentBlock, EmbeddedResource, Media, ResourceBody, ResourceLink};
pub use error::{Limit, RegisterError, ToolError};
pub use handler::{
    CallContext, CallGate, Handler, HandlerFuture, OutgoingCount, OutgoingGate, Progress,
    ProgressHook,
};
pub use interaction::{Interaction, InteractionError, InteractionFuture};
pub use metadata::{check_output, title_key, MAX_TITLE_CHARS, RESERVED_TOOL_TITLES};
pub use names::{name_key, RESERVED_TOOL_NAMES};
pub use observe::{
    CallEnd, CallObserver, CallStart, CallWatch, HandlerRun, ObserverAlreadySet, ObserverRefusal,
    OUTCOME_CLASSES,
};
pub use panic::{install_panic_hook, MAX_PANIC_MESSAGE_BYTES};
pub use record::{CallRecord, Step, StepKind, Touched, MAX_LISTED, MAX_STEPS, MAX_TEXT_BYTES};
pub use sampling::{
    SamplingMessage, SamplingRequest, SamplingResponse, MAX_SAMPLING_REQUEST_BYTES,
    MAX_SAMPLING_RESPONSE_BYTES,
};
pub use trace::{TraceParent, TRACEPARENT_LEN};
pub use types::{Environment, TaskSupport, ToolAnnotations, ToolCall, ToolDefinition, ToolResult};

pub(crate) use dispatch::encoded_len;
pub use error::{format_bytes, format_duration};
pub use timestamp::format_utc_time;
use tools::{insert_batch, Entry, Origin, Tools};

/// Default per-call time limit: a call still running after this is stopped with
/// [`ToolError::TimedOut`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Default cap on one result's JSON encoding (64 KiB). Larger results become
/// [`ToolError::ResultTooLarge`] rather than reaching the model cut in half; the file
/// tools size their windows (40 KiB of content) to stay under it.
pub const DEFAULT_RESULT_CAP: usize = 64 * 1024;

/// The longest tool name MCP clients accept.
pub const MAX_TOOL_NAME_LEN: usize = 128;

/// Tool definitions and their handlers, in registration order.
///
/// `Send + Sync`: share it behind an `Arc`; registration and dispatch take `&self`.
///
/// Every change (tools added, replaced or removed) raises the registry's
/// [`generation`](Registry::generation) by one and wakes the receivers of
/// [`Registry::changes`]: an MCP server uses it to know its encoded `tools/list` is stale
/// and to tell clients the list changed (hot reload).
pub struct Registry {
    tools: RwLock<Tools>,
    call_timeout: Duration,
    result_cap: usize,
    /// The generation: how many changes the tool set has seen.
    changes: tokio::sync::watch::Sender<u64>,
    /// Prompts and resources offered beside the tools.
    catalog: catalog::Catalog,
    /// Sees every call ([`Registry::set_observer`]); unset, a call pays one atomic load.
    observer: OnceLock<Arc<dyn CallObserver>>,
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
            changes: tokio::sync::watch::Sender::new(0),
            catalog: catalog::Catalog::new(),
            observer: OnceLock::new(),
        }
    }

    /// Sets the [`CallObserver`] every call of this registry passes (an audit log,
    /// metrics), once: it cannot be changed or removed after.
    ///
    /// # Errors
    /// [`ObserverAlreadySet`] when one is set already (it stays).
    pub fn set_observer(&self, observer: Arc<dyn CallObserver>) -> Result<(), ObserverAlreadySet> {
        self.observer.set(observer).map_err(|_| ObserverAlreadySet)
    }

    /// The [`CallObserver`] set, if any.
    pub fn observer(&self) -> Option<&Arc<dyn CallObserver>> {
        self.observer.get()
    }

    /// Tells the observer, if any, of a call refused before it reached
    /// [`Registry::dispatch`] (an approval declined, say), with the error the caller
    /// gets. Costs nothing without an observer.
    pub fn observe_refusal(&self, call: &ToolCall, env: &Environment, error: &ToolError) {
        self.observe_refusal_in(call, env, error, None);
    }

    /// [`Registry::observe_refusal`] of a nested call of the composing tool `nested_in`.
    pub(crate) fn observe_refusal_in(
        &self,
        call: &ToolCall,
        env: &Environment,
        error: &ToolError,
        nested_in: Option<&str>,
    ) {
        if let Some(observer) = self.observer.get() {
            // Asked now, for the refusal's span; it records nothing (it never ran).
            let watch = observer.watch(&CallStart {
                env,
                call,
                trace_parent: None,
                trace_span_id: None,
                nested_in,
            });
            observer.finished(&CallEnd {
                env,
                call,
                ran: false,
                admitted: false,
                outcome: Err(error),
                duration: Duration::ZERO,
                bytes_out: 0,
                trace_parent: None,
                trace_span_id: None,
                handler: None,
                nested_in,
                record: None,
                watch: CallWatch {
                    record: false,
                    ..watch
                },
            });
        }
    }

    /// The prompts and resources offered beside this registry's tools (plugins that
    /// export them register here; an MCP server serves them).
    pub fn catalog(&self) -> &catalog::Catalog {
        &self.catalog
    }

    /// How many times the tool set has changed (0 for a new registry): a tool list read
    /// at one generation is the registry's as long as the generation is the same.
    pub fn generation(&self) -> u64 {
        *self.changes.borrow()
    }

    /// A receiver that wakes on every change of the tool set, holding the new
    /// [`generation`](Registry::generation). Changes in quick succession may wake it once.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Takes away the tools named `remove` and adds `add`, in one step: a caller sees
    /// either the old tools or the new ones, never a mix and never neither. The new tools
    /// take the place of the first removed one in the order (so a plugin that is
    /// reloaded keeps its place in `tools/list`), or go at the end when nothing is
    /// removed. Calls already running finish on the handler they started with.
    ///
    /// Hot reload uses it to swap a plugin's tools for its new version's, or (with `add`
    /// empty) to unload it.
    ///
    /// # Errors
    /// [`RegisterError::NotRemovable`] when a name of `remove` is not registered or is a
    /// built-in tool; otherwise as [`Registry::register_all`], checked against the tools
    /// that remain. On any error nothing changes.
    pub fn replace_all(
        &self,
        remove: &[String],
        add: Vec<(ToolDefinition, Arc<dyn Handler>)>,
    ) -> Result<(), RegisterError> {
        let mut registered = self.write();
        let mut position = None;
        for name in remove {
            match registered.by_name.get(name) {
                Some(&index) if registered.entries[index].origin == Origin::Outside => {
                    position = Some(position.map_or(index, |p: usize| p.min(index)));
                }
                _ => return Err(RegisterError::NotRemovable { name: name.clone() }),
            }
        }
        let kept: Vec<Arc<Entry>> = registered
            .entries
            .iter()
            .filter(|entry| !remove.contains(&entry.definition.name))
            .cloned()
            .collect();
        // Where the first removed tool was, counted among the tools kept.
        let at = position.map_or(kept.len(), |p| {
            registered.entries[..p]
                .iter()
                .filter(|entry| !remove.contains(&entry.definition.name))
                .count()
        });
        // Checked against every tool that stays, then put in place.
        let mut checked = Tools::from_entries(kept.clone());
        insert_batch(&mut checked, add, Origin::Outside)?;
        let added = checked.entries.split_off(kept.len());
        let mut order = kept;
        let after = order.split_off(at);
        order.extend(added);
        order.extend(after);
        *registered = Tools::from_entries(order);
        drop(registered);
        self.changed();
        Ok(())
    }

    /// Takes away the tools named `names` that are registered, built-in ones too, in
    /// one step, and returns how many went. A server narrowing what one session is
    /// offered (a per-principal policy reloaded) uses it; taking a tool away cannot let
    /// anything stand in for a built-in (adding one back goes through
    /// [`Registry::register_builtin`]). Calls already running finish.
    pub fn withdraw(&self, names: &[String]) -> usize {
        let mut registered = self.write();
        let before = registered.entries.len();
        let kept: Vec<Arc<Entry>> = registered
            .entries
            .iter()
            .filter(|entry| !names.contains(&entry.definition.name))
            .cloned()
            .collect();
        let gone = before - kept.len();
        if gone > 0 {
            *registered = Tools::from_entries(kept);
        }
        drop(registered);
        if gone > 0 {
            self.changed();
        }
        gone
    }

    /// Raises the generation and wakes the watchers.
    fn changed(&self) {
        self.changes.send_modify(|generation| *generation += 1);
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
        insert_batch(&mut registered, tools, origin)?;
        drop(registered);
        self.changed();
        Ok(())
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

#[cfg(test)]
mod replace_tests;
