//! What a session offers beside tools and the files: the registry's catalog (prompts,
//! resources of plugins; [`crate::prompts`], [`crate::resources::catalog`]) and the
//! subscriptions to files ([`crate::resources::subscribe`]), wired into
//! [`Session::receive`]: [`Session::catalog_step`] takes the methods it serves and
//! leaves the rest (and everything a server without a catalog answers) to the
//! existing routing, so a server whose catalog is empty answers as before.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use toolhost::catalog::{PromptSource, ResourceSource};
use toolhost::registry::CallContext;

use super::{Message, Registration, Session, Step, LOG_TARGET};
use crate::jsonrpc::{Params, RequestId, RpcError, INVALID_PARAMS};
use crate::limits::MAX_RESOURCE_SUBSCRIPTIONS;
use crate::limits::MAX_SOURCE_CURSOR_BYTES;
use crate::pagination::CursorError;
use crate::prompts::{self, CompleteRequest, GetRequest};
use crate::protocol::{self, RequestMeta};
use crate::resources::catalog::{
    cut_page, read_result, source_error, template_json, SourcePosition, INTERNAL_ERROR,
};
use crate::resources::subscribe::Subscribed;
use crate::resources::{
    add_cache_hints, shown, templates_result, FileResources, ResourceRequest, FILE_URI_PREFIX,
    MAX_URI_BYTES,
};

/// What a session offers beside tools, read from the catalog when asked.
#[derive(Debug, Clone, Copy)]
pub(super) struct Offer {
    /// Prompts: the catalog has some, or may gain some (hot reload).
    prompts: bool,
    /// Resources of the catalog: it has a source, or may gain one (hot reload).
    catalog_resources: bool,
    /// The files under a root.
    files: bool,
    /// Hot reload: clients are told of changes.
    list_changed: bool,
}

impl Offer {
    /// Whether resources can be subscribed to: files under a root with `--watch`, or
    /// the resources of the catalog's sources.
    fn subscribe(self) -> bool {
        self.files && self.list_changed || self.catalog_resources
    }
}

/// A catalog request to run in a call's slot.
pub(super) enum CatalogWork {
    /// `prompts/get`.
    Get(GetRequest, Arc<dyn PromptSource>),
    /// `completion/complete` of a prompt's argument.
    Complete(CompleteRequest, Arc<dyn PromptSource>),
    /// `resources/list` across the files and the sources.
    List(ListFrom),
    /// `resources/read` of a source's resource.
    Read {
        uri: String,
        namespace: String,
        source: Arc<dyn ResourceSource>,
    },
}

/// Where a `resources/list` page starts.
#[derive(Debug)]
pub(super) enum ListFrom {
    /// Among the files (their own request).
    Files(ResourceRequest),
    /// At the first source, if any (no root).
    FirstSource,
    /// Among a source's resources.
    Source(SourcePosition),
}

impl std::fmt::Debug for CatalogWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Get(request, _) => f.debug_tuple("Get").field(request).finish(),
            Self::Complete(request, _) => f.debug_tuple("Complete").field(request).finish(),
            Self::List(from) => f.debug_tuple("List").field(from).finish(),
            Self::Read { uri, .. } => f.debug_struct("Read").field("uri", uri).finish(),
        }
    }
}

impl CatalogWork {
    /// The method it answers.
    pub(super) fn method(&self) -> &'static str {
        match self {
            Self::Get(..) => "prompts/get",
            Self::Complete(..) => "completion/complete",
            Self::List(..) => "resources/list",
            Self::Read { .. } => "resources/read",
        }
    }

    /// The bytes it holds while it waits.
    pub(super) fn held_bytes(&self) -> usize {
        let map = |m: &std::collections::BTreeMap<String, String>| {
            m.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
        };
        match self {
            Self::Get(request, _) => request.name.len() + map(&request.arguments),
            Self::Complete(request, _) => {
                request.name.len()
                    + request.argument.len()
                    + request.value.len()
                    + map(&request.context)
            }
            Self::List(ListFrom::Files(request)) => request.held_bytes(),
            Self::List(ListFrom::FirstSource) => 0,
            Self::List(ListFrom::Source(position)) => {
                position.namespace.len() + position.cursor.as_ref().map_or(0, String::len)
            }
            Self::Read { uri, namespace, .. } => uri.len() + namespace.len(),
        }
    }
}

fn invalid(id: &RequestId, message: impl std::fmt::Display) -> RpcError {
    RpcError::new(
        id.clone(),
        INVALID_PARAMS,
        format!("Invalid params: {message}"),
    )
}

fn internal(id: &RequestId, message: impl std::fmt::Display) -> RpcError {
    RpcError::new(
        id.clone(),
        INTERNAL_ERROR,
        format!("Internal error: {message}"),
    )
}

impl Session {
    /// What this session offers beside tools now.
    pub(super) fn offer(&self) -> Offer {
        let catalog = self.registry().catalog();
        let list_changed = self.0.catalog.list_changed;
        Offer {
            prompts: list_changed || !catalog.prompts().is_empty(),
            catalog_resources: list_changed || !catalog.resource_sources().is_empty(),
            files: self.0.catalog.resources.is_some(),
            list_changed,
        }
    }

    /// Adds the capabilities of the catalog and the subscriptions to `capabilities`
    /// (`initialize`'s, `server/discover`'s): `prompts` (with `listChanged`) when there
    /// are prompts or may be; `resources` and `completions` when there are resources of
    /// any kind or may be, `resources.listChanged` with hot reload and
    /// `resources.subscribe` where files can be subscribed to (the legacy era's
    /// `resources/subscribe`, with `--watch`). A server with neither a catalog nor hot
    /// reload keeps what it declared before.
    pub(super) fn add_capabilities(&self, capabilities: &mut Value) {
        let offer = self.offer();
        if offer.prompts {
            capabilities["prompts"] = json!({ "listChanged": offer.list_changed });
        }
        if offer.catalog_resources || offer.files {
            let mut resources = json!({});
            if offer.list_changed {
                resources["listChanged"] = json!(true);
            }
            if offer.subscribe() {
                // Legacy: resources/subscribe; 2026-07-28: subscriptions/listen's
                // resourceSubscriptions.
                resources["subscribe"] = json!(true);
            }
            capabilities["resources"] = resources;
            capabilities["completions"] = json!({});
        }
    }

    /// The step for a method of the catalog or of subscriptions, when this session
    /// serves it that way; `None` leaves the message to the rest of
    /// [`Session::receive`].
    pub(super) fn catalog_step(
        &self,
        id: &RequestId,
        method: &str,
        params: &Params,
        meta: &RequestMeta,
    ) -> Option<Step> {
        if !matches!(
            method,
            "prompts/list"
                | "prompts/get"
                | "completion/complete"
                | "resources/list"
                | "resources/templates/list"
                | "resources/read"
                | "resources/subscribe"
                | "resources/unsubscribe"
        ) {
            return None;
        }
        let offer = self.offer();
        let catalog = self.registry().catalog();
        let page_size = self.0.catalog.page_size;
        let reply = |result: Result<Value, RpcError>| -> Step {
            Step::Reply(match result {
                Ok(result) => Message::response(
                    id,
                    Bytes::from(protocol::complete(meta, result).to_string()),
                ),
                Err(err) => self.error(&err),
            })
        };
        let call = |work: Result<CatalogWork, RpcError>| -> Step {
            match work {
                Ok(work) => Step::Call(self.pending(id.clone(), work.into(), meta.clone())),
                Err(err) => Step::Reply(self.error(&err)),
            }
        };
        let step = match method {
            "prompts/list" if offer.prompts => reply(
                prompts::list(id, params, catalog, page_size).map(|mut result| {
                    if meta.modern {
                        result["ttlMs"] = json!(protocol::ttl_ms(offer.list_changed));
                        result["cacheScope"] = json!("public");
                    }
                    result
                }),
            ),
            "prompts/get" if offer.prompts => call(
                prompts::get_request(id, params, catalog)
                    .map(|(request, source)| CatalogWork::Get(request, source)),
            ),
            "completion/complete" if offer.prompts && is_prompt_ref(params) => call(
                prompts::complete_request(id, params, catalog)
                    .map(|(request, source)| CatalogWork::Complete(request, source)),
            ),
            "resources/list" if offer.catalog_resources => {
                call(self.list_from(id, params).map(CatalogWork::List))
            }
            "resources/templates/list" if offer.catalog_resources => {
                let mut templates = if offer.files {
                    templates_result()["resourceTemplates"].take()
                } else {
                    json!([])
                };
                if let Value::Array(list) = &mut templates {
                    list.extend(catalog.resource_templates().iter().map(template_json));
                }
                let mut result = json!({ "resourceTemplates": templates });
                if meta.modern {
                    result["ttlMs"] = json!(protocol::ttl_ms(offer.list_changed));
                    result["cacheScope"] = json!("public");
                }
                reply(Ok(result))
            }
            "resources/read" if offer.catalog_resources => {
                let Some(uri) = params.str("uri") else {
                    // The files' checks say what is wrong with it.
                    if offer.files {
                        return None;
                    }
                    return Some(reply(Err(invalid(
                        id,
                        "\"uri\" must be a string: a resource URI as resources/list gives it",
                    ))));
                };
                let owner = catalog
                    .resource_sources()
                    .into_iter()
                    .find(|(namespace, _)| uri.starts_with(namespace.as_str()));
                match owner {
                    Some(_) if uri.len() > MAX_URI_BYTES => reply(Err(invalid(
                        id,
                        format!("the uri is {} bytes, over the {MAX_URI_BYTES}-byte limit", uri.len()),
                    ))),
                    Some((namespace, source)) => call(Ok(CatalogWork::Read {
                        uri,
                        namespace,
                        source,
                    })),
                    // The files' own checks and messages.
                    None if offer.files => return None,
                    None => reply(Err(invalid(
                        id,
                        format!(
                            "no resource source owns \"{}\"; resources/list gives the resources there are",
                            shown(&uri)
                        ),
                    ))),
                }
            }
            "resources/subscribe" | "resources/unsubscribe"
                if offer.subscribe() && !meta.modern =>
            {
                reply(self.subscription(id, method, params).map(|()| json!({})))
            }
            _ => return None,
        };
        Some(step)
    }

    /// Where the `resources/list` page `params` asks for starts.
    fn list_from(&self, id: &RequestId, params: &Params) -> Result<ListFrom, RpcError> {
        let files = self.0.catalog.resources.as_ref();
        let page_size = self.0.catalog.page_size;
        let cursor = prompts::cursor_param(id, params)?;
        let position = match &cursor {
            Some(text) => SourcePosition::decode(text)
                .map_err(|err| RpcError::new(id.clone(), INVALID_PARAMS, err.to_string()))?,
            None => None,
        };
        match (position, files) {
            (Some(position), _) => Ok(ListFrom::Source(position)),
            (None, Some(files)) => files
                .request(id, "resources/list", params, page_size)
                .map(ListFrom::Files),
            (None, None) if cursor.is_some() => Err(RpcError::new(
                id.clone(),
                INVALID_PARAMS,
                CursorError::Unknown.to_string(),
            )),
            (None, None) => Ok(ListFrom::FirstSource),
        }
    }

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
    fn subscription(&self, id: &RequestId, method: &str, params: &Params) -> Result<(), RpcError> {
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

/// Whether a `completion/complete` completes a prompt's argument.
fn is_prompt_ref(params: &Params) -> bool {
    params
        .value("ref")
        .as_ref()
        .and_then(|r| r.get("type"))
        .and_then(Value::as_str)
        == Some("ref/prompt")
}

/// `future` within `timeout`, unless `cancelled` first (`None`); on a time-out `ctx_token`
/// (the source's own) is cancelled and the answer is `Err(timeout)`.
async fn bounded<T>(
    future: impl Future<Output = T>,
    cancelled: &CancellationToken,
    ctx_token: &CancellationToken,
    timeout: Duration,
) -> Option<Result<T, Duration>> {
    tokio::select! {
        out = tokio::time::timeout(timeout, future) => Some(out.map_err(|_| {
            ctx_token.cancel();
            timeout
        })),
        () = cancelled.cancelled() => None,
    }
}

fn timed_out(id: &RequestId, what: &str, timeout: Duration) -> RpcError {
    internal(
        id,
        format!(
            "{what} did not answer within {} s (the call timeout); try again later",
            timeout.as_secs_f64()
        ),
    )
}

/// Runs a catalog request: its response, or `None` when the client cancelled it (or the
/// session ended) first, which also cancels the source's call.
pub(super) async fn run_catalog(
    registration: Registration,
    id: &RequestId,
    meta: &RequestMeta,
    work: CatalogWork,
) -> Option<Message> {
    let session = registration.session.clone();
    let token = registration.token.clone();
    let registry = Arc::clone(session.registry());
    let timeout = registry.call_timeout();
    let env = session.0.env.next_turn();
    let ctx_token = token.child_token();
    let ctx = CallContext::with_timeout(timeout).with_cancellation(ctx_token.clone());
    let method = work.method();
    debug!(target: LOG_TARGET, request = %id, method, "catalog request");
    let outcome: Result<Value, RpcError> = match work {
        CatalogWork::Get(request, source) => {
            let name = request.name.clone();
            let what = format!("prompt \"{name}\"");
            match bounded(
                source.get(ctx, request.name, request.arguments, env),
                &token,
                &ctx_token,
                timeout,
            )
            .await?
            {
                Ok(Ok(result)) => prompts::get_result(&name, &result, meta.revision)
                    .map_err(|message| internal(id, message)),
                Ok(Err(err)) => Err(internal(id, format!("{what} failed: {err}"))),
                Err(timeout) => Err(timed_out(id, &what, timeout)),
            }
        }
        CatalogWork::Complete(request, source) => {
            let what = format!("completing prompt \"{}\"", request.name);
            match bounded(
                source.complete(
                    ctx,
                    request.name,
                    request.argument,
                    request.value,
                    request.context,
                    env,
                ),
                &token,
                &ctx_token,
                timeout,
            )
            .await?
            {
                Ok(Ok(values)) => Ok(prompts::complete_result(values)),
                Ok(Err(err)) => Err(internal(id, format!("{what} failed: {err}"))),
                Err(timeout) => Err(timed_out(id, &what, timeout)),
            }
        }
        CatalogWork::Read {
            uri,
            namespace,
            source,
        } => {
            let what = format!("the source of \"{}\"", shown(&uri));
            match bounded(
                source.read(ctx, uri.clone(), env),
                &token,
                &ctx_token,
                timeout,
            )
            .await?
            {
                Ok(Ok(contents)) => read_result(id, &uri, &namespace, &contents),
                Ok(Err(err)) => Err(source_error(id, Some(&uri), err)),
                Err(timeout) => Err(timed_out(id, &what, timeout)),
            }
        }
        CatalogWork::List(from) => {
            let position = match from {
                ListFrom::Files(request) => {
                    let files = session.0.catalog.resources.clone()?;
                    let listed = tokio::select! {
                        listed = files.run(id, request) => listed,
                        () = token.cancelled() => return None,
                    };
                    drop(registration);
                    return Some(finish(
                        &session,
                        id,
                        meta,
                        method,
                        listed.map(|mut result| {
                            if result.get("nextCursor").is_none() {
                                if let Some((namespace, _)) =
                                    registry.catalog().resource_sources().into_iter().next()
                                {
                                    result["nextCursor"] =
                                        json!(SourcePosition::start(namespace).encode());
                                }
                            }
                            result
                        }),
                    ));
                }
                ListFrom::FirstSource => {
                    match registry.catalog().resource_sources().into_iter().next() {
                        Some((namespace, _)) => SourcePosition::start(namespace),
                        None => {
                            drop(registration);
                            return Some(finish(
                                &session,
                                id,
                                meta,
                                method,
                                Ok(json!({ "resources": [] })),
                            ));
                        }
                    }
                }
                ListFrom::Source(position) => position,
            };
            let sources = registry.catalog().resource_sources();
            match sources.iter().position(|(namespace, _)| *namespace == position.namespace) {
                None => Err(invalid(
                    id,
                    format!(
                        "the resources changed since this cursor was given (no source owns {} now); list again from the start without a cursor",
                        shown(&position.namespace)
                    ),
                )),
                Some(at) => {
                    let source = Arc::clone(&sources[at].1);
                    let what = format!("the resource source of {}", position.namespace);
                    match bounded(
                        source.list(ctx, position.cursor.clone(), env),
                        &token,
                        &ctx_token,
                        timeout,
                    )
                    .await?
                    {
                        Err(timeout) => Err(timed_out(id, &what, timeout)),
                        Ok(Err(err)) => Err(source_error(id, None, err)),
                        Ok(Ok(page)) => {
                            let page_size = session.0.catalog.page_size;
                            let cut = cut_page(&position, &page.resources, page_size);
                            if cut.outside > 0 {
                                warn!(target: LOG_TARGET, namespace = %position.namespace, left_out = cut.outside, "a resource source listed entries outside its namespace (or too large); they were left out");
                            }
                            match &page.next_cursor {
                                Some(next) if next.len() > MAX_SOURCE_CURSOR_BYTES => Err(internal(
                                    id,
                                    format!(
                                        "{what} gave a cursor of {} bytes, over the {MAX_SOURCE_CURSOR_BYTES}-byte limit",
                                        next.len()
                                    ),
                                )),
                                _ => {
                                    let next = cut
                                        .rest
                                        .or_else(|| {
                                            page.next_cursor.clone().map(|cursor| SourcePosition {
                                                namespace: position.namespace.clone(),
                                                cursor: Some(cursor),
                                                skip: 0,
                                            })
                                        })
                                        .or_else(|| {
                                            sources.get(at + 1).map(|(namespace, _)| {
                                                SourcePosition::start(namespace.clone())
                                            })
                                        });
                                    let mut result = json!({ "resources": cut.resources });
                                    if let Some(next) = next {
                                        result["nextCursor"] = json!(next.encode());
                                    }
                                    Ok(result)
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    drop(registration);
    if token.is_cancelled() {
        return None;
    }
    Some(finish(&session, id, meta, method, outcome))
}

/// The response of a catalog or resource request, as the request's era shapes it.
pub(super) fn finish(
    session: &Session,
    id: &RequestId,
    meta: &RequestMeta,
    method: &str,
    outcome: Result<Value, RpcError>,
) -> Message {
    match outcome {
        Ok(mut result) => {
            if meta.modern {
                add_cache_hints(method, &mut result);
            }
            Message::response(
                id,
                Bytes::from(protocol::complete(meta, result).to_string()),
            )
        }
        Err(err) => {
            debug!(target: LOG_TARGET, request = %id, method, code = err.code, "{}", err.message);
            session.error_message(&err)
        }
    }
}
