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
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

mod arguments;
mod cap;
pub mod catalog;
mod compose;
mod content;
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
mod trace;
mod types;

pub use arguments::{json_type, Arguments};
pub use compose::Composer;
pub use content::{ContentBlock, EmbeddedResource, Media, ResourceBody, ResourceLink};
pub use error::{Limit, RegisterError, ToolError};
pub use handler::{
    CallContext, CallGate, Handler, HandlerFuture, OutgoingGate, Progress, ProgressHook,
};
pub use interaction::{Interaction, InteractionError, InteractionFuture};
pub use metadata::{check_output, title_key, MAX_TITLE_CHARS, RESERVED_TOOL_TITLES};
pub use names::{name_key, RESERVED_TOOL_NAMES};
pub use observe::{
    CallEnd, CallObserver, CallStart, HandlerRun, ObserverAlreadySet, ObserverRefusal,
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
    /// Built-in tools are never replaced or removed.
    origin: Origin,
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

    /// The tools' definitions, in registration order.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.read()
            .entries
            .iter()
            .map(|entry| entry.definition.clone())
            .collect()
    }

    /// The definitions as a client is offered them (`tools/list`): those of
    /// [`Registry::definitions`], except that a composing tool's description ends with
    /// the tools it may call, each with the first line of its description (at most 40 of
    /// them, the rest counted), so the model knows what its program can use without a
    /// round trip.
    ///
    /// ```
    /// use serde_json::json;
    /// use toolhost::registry::{Arguments, CallContext, Environment, Handler, HandlerFuture};
    /// use toolhost::registry::{Registry, ToolDefinition, ToolResult};
    ///
    /// struct Code;
    /// impl Handler for Code {
    ///     fn call(&self, _: CallContext, _: Arguments, _: Environment) -> HandlerFuture {
    ///         Box::pin(async { Ok(ToolResult::new(json!(null))) })
    ///     }
    ///     fn composes(&self) -> bool {
    ///         true
    ///     }
    /// }
    /// let registry = Registry::new();
    /// let object = json!({"type": "object"});
    /// registry
    ///     .register(ToolDefinition::new("code", "Runs a program.", object.clone()), Code)
    ///     .unwrap();
    /// registry
    ///     .register(
    ///         ToolDefinition::new("greet", "Greets someone.\nLonger text.", object),
    ///         |_: CallContext, _: Arguments, _: Environment| async { Ok(ToolResult::new("hi")) },
    ///     )
    ///     .unwrap();
    /// let offered = registry.offered_definitions();
    /// assert_eq!(
    ///     offered[0].description,
    ///     "Runs a program.\n\nTools the program can call:\n- greet: Greets someone."
    /// );
    /// assert_eq!(offered[1].description, "Greets someone.\nLonger text.");
    /// ```
    pub fn offered_definitions(&self) -> Vec<ToolDefinition> {
        let tools = self.read();
        let mut definitions: Vec<ToolDefinition> = tools
            .entries
            .iter()
            .map(|entry| entry.definition.clone())
            .collect();
        for (definition, entry) in definitions.iter_mut().zip(&tools.entries) {
            if entry.handler.composes() {
                offered::describe_callable(definition, &*entry.handler, &tools.entries);
            }
        }
        definitions
    }

    /// The definitions of the tools a composing tool may call
    /// ([`Composer::definitions`]): every tool but the composing ones, in registration
    /// order.
    pub fn composable_definitions(&self) -> Vec<ToolDefinition> {
        self.read()
            .entries
            .iter()
            .filter(|entry| !entry.handler.composes())
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

    /// What `f` makes of the definition of tool `name`, read in place (no copy), or
    /// `None` when no such tool is registered.
    pub fn with_definition<R>(
        &self,
        name: &str,
        f: impl FnOnce(&ToolDefinition) -> R,
    ) -> Option<R> {
        let tools = self.read();
        tools
            .by_name
            .get(name)
            .map(|&index| f(&tools.entries[index].definition))
    }

    /// Whether tool `name` is registered and composes other tools
    /// ([`Handler::composes`]): what a handler that delegates to this registry answers
    /// for its own `composes`, so the registry it is offered in serves its nested calls.
    pub fn composes(&self, name: &str) -> bool {
        self.lookup(name)
            .is_some_and(|entry| entry.handler.composes())
    }

    /// Whether the composing tool `composer` may call tool `name` ([`Handler::may_call`]);
    /// `false` when `composer` is not registered.
    pub fn may_call(&self, composer: &str, name: &str) -> bool {
        self.lookup(composer)
            .is_some_and(|entry| entry.handler.may_call(name))
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

impl Tools {
    /// The tools of `entries`, in that order.
    fn from_entries(entries: Vec<Arc<Entry>>) -> Self {
        let mut tools = Tools::default();
        for entry in entries {
            tools.push(entry);
        }
        tools
    }

    /// Adds one entry at the end (its name already checked).
    fn push(&mut self, entry: Arc<Entry>) {
        let index = self.entries.len();
        self.by_name.insert(entry.definition.name.clone(), index);
        self.by_key.insert(name_key(&entry.definition.name), index);
        self.entries.push(entry);
    }
}

/// Checks every name of `tools` against `registered` and the rest of the batch, then adds
/// them all at the end; on a refusal, `registered` is left as it was.
fn insert_batch(
    registered: &mut Tools,
    tools: Vec<(ToolDefinition, Arc<dyn Handler>)>,
    origin: Origin,
) -> Result<(), RegisterError> {
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
        registered.push(Arc::new(Entry {
            definition,
            required,
            handler,
            origin,
        }));
    }
    Ok(())
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
mod replace_tests {
    use serde_json::json;

    use super::*;

    fn tool(name: &str, answer: &'static str) -> (ToolDefinition, Arc<dyn Handler>) {
        let handler = move |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
            Ok(ToolResult::new(answer))
        };
        (
            ToolDefinition::new(name, "A test tool.", json!({"type": "object"})),
            Arc::new(handler),
        )
    }

    async fn call(registry: &Registry, name: &str) -> Result<ToolResult, ToolError> {
        registry
            .dispatch(
                &CallContext::new(),
                &ToolCall::new(name, ""),
                &Environment::default(),
            )
            .await
    }

    #[tokio::test]
    async fn replace_swaps_in_place_and_counts_generations() {
        let registry = Registry::new();
        assert_eq!(registry.generation(), 0);
        let mut changes = registry.changes();
        registry.register_all(vec![tool("a", "a1")]).unwrap();
        registry
            .register_all(vec![tool("p1", "old"), tool("p2", "old")])
            .unwrap();
        registry.register_all(vec![tool("z", "z1")]).unwrap();
        assert_eq!(registry.generation(), 3);
        assert!(changes.has_changed().unwrap());
        assert_eq!(*changes.borrow_and_update(), 3);

        // The plugin's new version has one tool renamed: it takes the old tools' place.
        registry
            .replace_all(
                &["p1".into(), "p2".into()],
                vec![tool("p1", "new"), tool("p3", "new")],
            )
            .unwrap();
        assert_eq!(registry.names(), ["a", "p1", "p3", "z"]);
        assert_eq!(registry.generation(), 4);
        assert_eq!(call(&registry, "p1").await.unwrap().content, "new");
        assert!(matches!(
            call(&registry, "p2").await,
            Err(ToolError::UnknownTool { .. })
        ));

        // Unloading: nothing added.
        registry
            .replace_all(&["p1".into(), "p3".into()], Vec::new())
            .unwrap();
        assert_eq!(registry.names(), ["a", "z"]);
        assert_eq!(*changes.borrow_and_update(), 5);
    }

    #[tokio::test]
    async fn withdraw_takes_away_built_ins_too_and_they_come_back_only_as_built_ins() {
        let registry = Registry::new();
        registry
            .register_builtin(
                tool("read_file", "builtin").0,
                |_ctx: CallContext, _a: Arguments, _e: Environment| async move {
                    Ok(ToolResult::new("builtin"))
                },
            )
            .unwrap();
        registry.register_all(vec![tool("p1", "p")]).unwrap();
        let generation = registry.generation();
        assert_eq!(registry.withdraw(&["nope".into()]), 0);
        assert_eq!(registry.generation(), generation, "nothing gone: no change");
        assert_eq!(registry.withdraw(&["read_file".into(), "nope".into()]), 1);
        assert_eq!(registry.generation(), generation + 1);
        assert_eq!(registry.names(), ["p1"]);
        assert!(matches!(
            call(&registry, "read_file").await,
            Err(ToolError::UnknownTool { .. })
        ));
        // Its name is still the host's: an outside tool cannot take it.
        assert!(matches!(
            registry.register_all(vec![tool("read_file", "impostor")]),
            Err(RegisterError::Reserved { .. })
        ));
    }

    #[tokio::test]
    async fn a_refused_replacement_changes_nothing() {
        let registry = Registry::new();
        registry
            .register_builtin(
                tool("read_file", "builtin").0,
                |_ctx: CallContext, _a: Arguments, _e: Environment| async move {
                    Ok(ToolResult::new("builtin"))
                },
            )
            .unwrap();
        registry
            .register_all(vec![tool("p1", "old"), tool("other", "o")])
            .unwrap();
        let generation = registry.generation();
        // A look-alike of a tool that stays.
        let err = registry
            .replace_all(&["p1".into()], vec![tool("p1", "new"), tool("OTHER", "x")])
            .unwrap_err();
        assert!(
            matches!(err, RegisterError::LookAlike { ref name, .. } if name == "OTHER"),
            "{err:?}"
        );
        // A built-in is never removed, nor a tool that is not there.
        for name in ["read_file", "missing"] {
            let err = registry
                .replace_all(&[name.into()], Vec::new())
                .unwrap_err();
            assert_eq!(err, RegisterError::NotRemovable { name: name.into() });
        }
        assert_eq!(registry.names(), ["read_file", "p1", "other"]);
        assert_eq!(registry.generation(), generation);
        assert_eq!(call(&registry, "p1").await.unwrap().content, "old");
        // The removed names are free for the new tools: no clash with the old p1.
        registry
            .replace_all(&["p1".into()], vec![tool("P1", "renamed")])
            .unwrap();
        assert_eq!(registry.names(), ["read_file", "P1", "other"]);
    }

    #[tokio::test]
    async fn a_call_in_flight_finishes_on_its_version() {
        let registry = Arc::new(Registry::new());
        let (release, wait) = tokio::sync::oneshot::channel::<()>();
        let wait = Arc::new(std::sync::Mutex::new(Some(wait)));
        let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&started);
        let slow = move |_ctx: CallContext, _args: Arguments, _env: Environment| {
            let wait = wait.lock().unwrap().take();
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            async move {
                if let Some(wait) = wait {
                    let _ = wait.await;
                }
                Ok(ToolResult::new("old version"))
            }
        };
        registry
            .register_shared(
                ToolDefinition::new("p", "Slow.", json!({"type": "object"})),
                Some(Arc::new(slow)),
            )
            .unwrap();
        let running = tokio::spawn({
            let registry = Arc::clone(&registry);
            async move { call(&registry, "p").await }
        });
        while !started.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
        registry
            .replace_all(&["p".into()], vec![tool("p", "new version")])
            .unwrap();
        assert_eq!(call(&registry, "p").await.unwrap().content, "new version");
        release.send(()).unwrap();
        assert_eq!(running.await.unwrap().unwrap().content, "old version");
    }
}
