//! [`Catalog`]: one registry as MCP offers it, with its `tools/list` encoded once per
//! registry generation and shared by every session over it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;

use toolhost::registry::Registry;

use super::state::EncodedTools;
use crate::elicit::Asking;
use crate::jsonrpc::{Params, RequestId, RpcError};
use crate::limits::DEFAULT_PAGE_SIZE;
use crate::protocol::RequestMeta;
use crate::resources::FileResources;

use super::Counters;

/// One registry as MCP offers it: the registry and its `tools/list` (each tool encoded
/// once per registry generation, each page built once), shared by every session over it.
#[derive(Debug)]
pub(crate) struct Catalog {
    pub(crate) registry: Arc<Registry>,
    tools: Mutex<Option<Arc<EncodedTools>>>,
    counters: Arc<Counters>,
    /// Whether clients are told when the tool list changes (hot reload).
    pub(crate) list_changed: bool,
    /// Tools per `tools/list` page (and files per `resources/list` page).
    pub(crate) page_size: usize,
    /// The files offered as resources, if the server has a storage root to offer.
    pub(crate) resources: Option<FileResources>,
    /// How its sessions ask their users (elicitation), and which calls need approval.
    pub(crate) asking: Asking,
}

impl Catalog {
    pub(crate) fn new(registry: Arc<Registry>, counters: Arc<Counters>) -> Self {
        Self {
            registry,
            tools: Mutex::new(None),
            counters,
            list_changed: false,
            page_size: DEFAULT_PAGE_SIZE,
            resources: None,
            asking: Asking::default(),
        }
    }

    /// This catalog asking its users as `asking` says.
    pub(crate) fn with_asking(mut self, asking: Asking) -> Self {
        self.asking = asking;
        self
    }

    /// This catalog offering `resources` (`None`: none, the methods are unknown).
    pub(crate) fn with_resources(mut self, resources: Option<FileResources>) -> Self {
        self.resources = resources;
        self
    }

    /// This catalog telling clients when the registry's tools change.
    pub(crate) fn with_list_changed(mut self, list_changed: bool) -> Self {
        self.list_changed = list_changed;
        self
    }

    /// This catalog listing at most `tools` tools per page (at least 1).
    pub(crate) fn with_page_size(mut self, tools: usize) -> Self {
        self.page_size = tools.max(1);
        self
    }

    /// The tool set encoded, once per registry generation and shared after.
    fn encoded_tools(&self) -> Arc<EncodedTools> {
        let mut cached = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = self.registry.generation();
        if let Some(tools) = cached
            .as_ref()
            .filter(|tools| tools.generation == generation)
        {
            return Arc::clone(tools);
        }
        // Read after the generation: a change in between makes the next list encode again.
        let tools = Arc::new(EncodedTools::new(
            generation,
            &self.registry.offered_definitions(),
        ));
        self.counters
            .tools_list_encodings
            .fetch_add(1, Ordering::SeqCst);
        *cached = Some(Arc::clone(&tools));
        tools
    }

    /// How tool `name` may run as a task, and the task time limit it asks for.
    pub(super) fn task_settings(
        &self,
        name: &str,
    ) -> (toolhost::registry::TaskSupport, Option<std::time::Duration>) {
        self.encoded_tools().task_settings(name)
    }

    /// Whether any of the registry's tools may run as a task (else no tasks are
    /// declared).
    pub(super) fn offers_tasks(&self) -> bool {
        self.encoded_tools().any_task_support()
    }

    /// The `tools/list` page `params` asks for, shaped for the request's revision.
    pub(super) fn tools_list(
        &self,
        id: &RequestId,
        params: &Params,
        meta: &RequestMeta,
    ) -> Result<Bytes, RpcError> {
        self.encoded_tools()
            .page(id, params, meta, self.page_size, self.list_changed)
    }
}
