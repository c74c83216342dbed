//! Messages the server sends on its own: a transport's [`Outlet`] and the [`Notifier`]
//! handle calls and sessions send through.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

#[cfg(test)]
use serde_json::Value;

use super::Message;

/// Where messages the server sends on its own go: a transport's outlet.
pub(crate) trait Outlet: Send + Sync + 'static {
    /// Sends `message`, waiting for room if the transport bounds what waits. A transport
    /// whose client is gone drops it.
    fn send(&self, message: Message) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;

    /// Sends `message` if that needs no waiting; `false` when it was dropped (the
    /// default: such a transport gets no progress or log lines). Progress and log lines
    /// go this way, so they never hold up a call. Must not log: it runs inside the log
    /// layer.
    fn try_send(&self, message: Message) -> bool {
        drop(message);
        false
    }
}

/// A handle for sending notifications through an [`Outlet`], or nowhere
/// ([`Notifier::none`]: the client cannot take them, e.g. a plain-JSON HTTP request).
#[derive(Clone, Default)]
pub(crate) struct Notifier(Option<Arc<dyn Outlet>>);

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Notifier(outlet)"
        } else {
            "Notifier(none)"
        })
    }
}

impl Notifier {
    /// Sends through `outlet`.
    pub(crate) fn new(outlet: Arc<dyn Outlet>) -> Self {
        Self(Some(outlet))
    }

    /// Sends nothing: every notification is dropped.
    pub(crate) fn none() -> Self {
        Self(None)
    }

    /// Whether anything reaches a client.
    pub(crate) fn is_connected(&self) -> bool {
        self.0.is_some()
    }

    /// Sends the notification `method` with `params`; nothing when not connected. Only
    /// the tests send this way: the server's own notifications are built where they are
    /// sent (progress, log lines, list changes) and go through [`Notifier::send`] or
    /// [`Notifier::try_send`].
    #[cfg(test)]
    pub(crate) async fn notify(&self, method: &str, params: Option<&Value>) {
        if let Some(outlet) = &self.0 {
            outlet.send(Message::notification(method, params)).await;
        }
    }

    /// Sends `message` as it is; nothing when not connected.
    pub(crate) async fn send(&self, message: Message) {
        if let Some(outlet) = &self.0 {
            outlet.send(message).await;
        }
    }

    /// Sends `message` if the outlet takes it without waiting ([`Outlet::try_send`]);
    /// `false` when it was dropped.
    pub(crate) fn try_send(&self, message: Message) -> bool {
        self.0
            .as_ref()
            .is_some_and(|outlet| outlet.try_send(message))
    }
}
