//! Telling a session's client that the tool list changed (hot reload):
//! `notifications/tools/list_changed` through the session's notifier.

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
        loop {
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                () = self.0.closed.cancelled() => return,
            }
            changes.borrow_and_update();
            if self.0.state.negotiated().is_some() {
                debug!(target: LOG_TARGET, "tools changed: telling the client");
                self.notifier()
                    .send(Message::text(
                        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#
                            .to_owned(),
                    ))
                    .await;
            }
        }
    }
}
