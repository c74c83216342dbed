//! Subscriptions to resources (`resources/subscribe`, `resources/unsubscribe`,
//! `subscriptions/listen`): which URIs may be watched (a catalog source's, or a file
//! under the watched root) and the `notifications/resources/updated` a change sends.

use std::sync::Arc;

use serde_json::{json, Value};
use tracing::debug;

use super::catalog_work::invalid;
use super::{Message, Session, LOG_TARGET};
use crate::jsonrpc::{Params, RequestId, RpcError};
use crate::limits::MAX_RESOURCE_SUBSCRIPTIONS;
use crate::resources::subscribe::Subscribed;
use crate::resources::{shown, FileResources, FILE_URI_PREFIX, MAX_URI_BYTES};

impl Session {
    /// Tells the client that the subscribed resource `uri` changed (or may have).
    pub(super) async fn tell_resource_updated(&self, uri: &str) {
        let note = json!({
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": { "uri": uri },
        });
        self.notifier().send(Message::text(note.to_string())).await;
    }

    /// What a resource URI to subscribe to is: a resource of a catalog source, or a
    /// file under the watched root (its path and the files), checked as
    /// `resources/read` checks it; else the `-32602` to answer.
    fn subscribable(&self, id: &RequestId, uri: &str) -> Result<Target, RpcError> {
        if uri.len() <= MAX_URI_BYTES
            && self.registry().catalog().resource_source_for(uri).is_some()
        {
            return Ok(Target::Source);
        }
        let files = match self.0.catalog.resources.as_ref() {
            Some(files) if self.offer().files && self.offer().list_changed => files,
            _ => {
                return Err(invalid(
                    id,
                    format!(
                        "\"{}\" cannot be subscribed to: no resource source owns it (resources/list gives the resources there are; files under the root need a root and --watch)",
                        shown(uri)
                    ),
                ))
            }
        };
        if !uri.starts_with(FILE_URI_PREFIX) {
            return Err(invalid(
                id,
                format!(
                    "\"{}\" cannot be subscribed to: only the files under the root (file:///PATH) can",
                    shown(uri)
                ),
            ));
        }
        let path = files.path_of(uri).map_err(|message| invalid(id, message))?;
        Ok(Target::File(path, files.clone()))
    }

    /// `resources/subscribe` or `resources/unsubscribe` of a file under the root, or of a
    /// resource under a catalog source's namespace.
    pub(super) fn subscription(
        &self,
        id: &RequestId,
        method: &str,
        params: &Params,
    ) -> Result<(), RpcError> {
        let Some(uri) = params.str("uri") else {
            return Err(invalid(
                id,
                "\"uri\" must be a string: a resource URI as resources/list gives it",
            ));
        };
        let (path, files) = match self.subscribable(id, &uri)? {
            Target::Source if method == "resources/unsubscribe" => {
                self.0.subscribed.unsubscribe_source(&uri);
                return Ok(());
            }
            Target::Source => {
                return self
                    .0
                    .subscribed
                    .subscribe_source(uri)
                    .map_err(|message| invalid(id, message))
            }
            Target::File(path, files) => (path, files),
        };
        if method == "resources/unsubscribe" {
            self.0.subscribed.unsubscribe(&path);
            return Ok(());
        }
        let start = self
            .0
            .subscribed
            .subscribe(uri, path)
            .map_err(|message| invalid(id, message))?;
        if start {
            let session = Arc::downgrade(&self.0);
            let poller =
                self.0
                    .subscribed
                    .clone()
                    .poll(files, self.0.state.closing.clone(), move |uri| {
                        let session = session.upgrade().map(Session);
                        async move {
                            let Some(session) = session else { return };
                            debug!(target: LOG_TARGET, uri, "a subscribed file changed");
                            session.tell_resource_updated(&uri).await;
                        }
                    });
            tokio::spawn(poller);
        }
        Ok(())
    }

    /// The resources a `subscriptions/listen` (2026-07-28) asks to watch
    /// (`notifications.resourceSubscriptions`), under the rules of `resources/subscribe`:
    /// at most [`MAX_RESOURCE_SUBSCRIPTIONS`] URIs (more is `-32602`, before any is
    /// looked at); a URI `resources/subscribe` would refuse is left out of the
    /// acknowledgement. `None` when the request asks for none.
    pub(super) fn listen_resources(
        &self,
        id: &RequestId,
        params: &Params,
    ) -> Result<Option<ListenResources>, RpcError> {
        let Some(Value::Object(filter)) = params.value("notifications") else {
            return Ok(None);
        };
        let uris = match filter.get("resourceSubscriptions") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(uris)) => uris,
            Some(_) => {
                return Err(invalid(
                    id,
                    "\"notifications.resourceSubscriptions\" must be an array of resource URIs",
                ))
            }
        };
        if uris.len() > MAX_RESOURCE_SUBSCRIPTIONS {
            return Err(invalid(
                id,
                format!(
                    "\"notifications.resourceSubscriptions\" names {} resources; one subscription may watch at most {MAX_RESOURCE_SUBSCRIPTIONS}",
                    uris.len()
                ),
            ));
        }
        let watched = ListenResources::default();
        if !self.offer().subscribe() {
            return Ok(Some(watched));
        }
        let mut watched = watched;
        for uri in uris {
            let Value::String(uri) = uri else {
                return Err(invalid(
                    id,
                    "\"notifications.resourceSubscriptions\" must hold strings, resource URIs as resources/list gives them",
                ));
            };
            if watched.uris.contains(uri) {
                continue;
            }
            let held = match self.subscribable(id, uri) {
                Ok(Target::Source) => watched.subscribed.subscribe_source(uri.clone()),
                Ok(Target::File(path, files)) => {
                    watched.files = Some(files);
                    watched.subscribed.subscribe(uri.clone(), path).map(drop)
                }
                Err(err) => {
                    debug!(target: LOG_TARGET, "subscriptions/listen: not watching a resource: {}", err.message);
                    continue;
                }
            };
            if held.is_ok() {
                watched.uris.push(uri.clone());
            }
        }
        Ok(Some(watched))
    }
}

/// A URI [`Session::subscribable`] accepts.
enum Target {
    /// A resource of a catalog source.
    Source,
    /// A file under the root: its path, and the files.
    File(String, FileResources),
}

/// The resources one `subscriptions/listen` watches ([`Session::listen_resources`]).
#[derive(Debug, Default)]
pub(crate) struct ListenResources {
    /// The URIs accepted, in the order asked (the acknowledgement's).
    pub(super) uris: Vec<String>,
    /// Them, as `resources/subscribe` holds a session's.
    pub(super) subscribed: Subscribed,
    /// The files, when a file under the root is among them.
    pub(super) files: Option<FileResources>,
}
