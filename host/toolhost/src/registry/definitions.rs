//! What a registry holds, asked without calling anything: the definitions (as
//! registered, as offered to a client, as a composing tool may call them), the names,
//! and whether a tool is there or composes others.

use super::{offered, Registry, ToolDefinition};

impl Registry {
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
    /// ([`Composer::definitions`](super::Composer::definitions)): every tool but the
    /// composing ones, in registration order.
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
    /// ([`Handler::composes`](super::Handler::composes)): what a handler that delegates
    /// to this registry answers for its own `composes`, so the registry it is offered in
    /// serves its nested calls.
    pub fn composes(&self, name: &str) -> bool {
        self.lookup(name)
            .is_some_and(|entry| entry.handler.composes())
    }

    /// Whether the composing tool `composer` may call tool `name`
    /// ([`Handler::may_call`](super::Handler::may_call)); `false` when `composer` is not
    /// registered.
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
}
