//! Telling a session's client that the tool, prompt or resource list changed (hot
//! reload): `notifications/{tools,prompts,resources}/list_changed` through the
//! session's notifier.

use tracing::debug;

use super::LOG_TARGET;
use super::{Message, Session};

impl Session {
    /// A receiver of the registry's changes that has seen the tool set as it is now.
    pub(crate) fn tool_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        let mut changes = self.registry().changes();
        changes.borrow_and_update();
        changes
    }

    /// Sends `notifications/tools/list_changed` through the session's notifier each time
    /// the registry's tools change, once a legacy client has initialized, until the session
    /// ends; returns at once when the session does not announce changes. A transport runs
    /// it beside the session (stdio: for the whole input; HTTP: while the session's GET
    /// stream is open). Clients of the modern era subscribe instead
    /// (`subscriptions/listen`).
    ///
    /// `changes` comes from [`Session::tool_changes`], taken before the task is spawned:
    /// a change made before the task first runs is then still announced.
    pub(crate) async fn announce_changes(&self, mut changes: tokio::sync::watch::Receiver<u64>) {
        if !self.announces_changes() {
            return;
        }
        // The catalog's changes (prompts and resources of plugins) are announced the
        // same way, each list only when it may have changed.
        let catalog = self.registry().catalog();
        let mut catalog_changes = catalog.changes();
        catalog_changes.borrow_and_update();
        let mut before = CatalogView::of(catalog);
        loop {
            let tools = tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    changes.borrow_and_update();
                    true
                }
                changed = catalog_changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    catalog_changes.borrow_and_update();
                    false
                }
                () = self.0.closed.cancelled() => return,
            };
            let mut notes: Vec<&str> = Vec::new();
            if tools {
                notes.push("tools");
            } else {
                let now = CatalogView::of(catalog);
                if now.prompts != before.prompts {
                    notes.push("prompts");
                }
                // A source replaced under the same namespace may list other resources.
                if now.resources || before.resources {
                    notes.push("resources");
                }
                before = now;
            }
            // A source that changed may serve other content under the same URIs: each
            // subscribed resource of the catalog is told of.
            let updated = if tools {
                Vec::new()
            } else {
                self.0.subscribed.source_uris()
            };
            if self.0.state.negotiated().is_some() {
                for uri in updated {
                    debug!(target: LOG_TARGET, uri, "the catalog changed: a subscribed resource may have");
                    self.tell_resource_updated(&uri).await;
                }
                for list in notes {
                    debug!(target: LOG_TARGET, list, "list changed: telling the client");
                    self.notifier()
                        .send(Message::text(format!(
                            r#"{{"jsonrpc":"2.0","method":"notifications/{list}/list_changed"}}"#
                        )))
                        .await;
                }
            }
        }
    }
}

/// What a catalog change is compared on.
struct CatalogView {
    prompts: Vec<toolhost::catalog::PromptDefinition>,
    /// Whether it has a resource source.
    resources: bool,
}

impl CatalogView {
    fn of(catalog: &toolhost::catalog::Catalog) -> Self {
        Self {
            prompts: catalog.prompts(),
            resources: !catalog.resource_sources().is_empty(),
        }
    }
}
