//! What a session offers beside tools and the files: the registry's catalog (prompts,
//! resources of plugins; [`crate::prompts`], [`crate::resources::catalog`]) and the
//! subscriptions to files ([`crate::resources::subscribe`]), wired into
//! [`Session::receive`]: [`Session::catalog_step`] takes the methods it serves and
//! leaves the rest (and everything a server without a catalog answers) to the
//! existing routing, so a server whose catalog is empty answers as before.

use bytes::Bytes;
use serde_json::{json, Value};

use super::catalog_work::{invalid, CatalogWork, ListFrom};
use super::{Message, Session, Step};
use crate::jsonrpc::{Params, RequestId, RpcError, INVALID_PARAMS};
use crate::pagination::CursorError;
use crate::prompts::{self};
use crate::protocol::{self, RequestMeta};
use crate::resources::catalog::{template_json, SourcePosition};
use crate::resources::{shown, templates_result, MAX_URI_BYTES};

/// What a session offers beside tools, read from the catalog when asked.
#[derive(Debug, Clone, Copy)]
pub(super) struct Offer {
    /// Prompts: the catalog has some, or may gain some (hot reload).
    prompts: bool,
    /// Resources of the catalog: it has a source, or may gain one (hot reload).
    catalog_resources: bool,
    /// The files under a root.
    pub(super) files: bool,
    /// Hot reload: clients are told of changes.
    pub(super) list_changed: bool,
}

impl Offer {
    /// Whether resources can be subscribed to: files under a root with `--watch`, or
    /// the resources of the catalog's sources.
    pub(super) fn subscribe(self) -> bool {
        self.files && self.list_changed || self.catalog_resources
    }
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
