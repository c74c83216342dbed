use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::registry::{CallContext, Environment, ToolError};

struct Prompts(Vec<&'static str>);

impl PromptSource for Prompts {
    fn definitions(&self) -> Vec<PromptDefinition> {
        self.0
            .iter()
            .map(|name| PromptDefinition {
                name: (*name).to_owned(),
                title: None,
                description: None,
                arguments: Vec::new(),
            })
            .collect()
    }

    fn get(
        &self,
        _ctx: CallContext,
        name: String,
        _arguments: BTreeMap<String, String>,
        _env: Environment,
    ) -> SourceFuture<PromptResult, ToolError> {
        Box::pin(async move {
            Ok(PromptResult {
                description: Some(name),
                messages: Vec::new(),
            })
        })
    }
}

struct Resources(&'static str);

impl ResourceSource for Resources {
    fn templates(&self) -> Vec<ResourceTemplate> {
        vec![ResourceTemplate {
            uri_template: self.0.to_owned(),
            name: "t".into(),
            title: None,
            description: None,
            mime_type: None,
        }]
    }

    fn list(
        &self,
        _ctx: CallContext,
        _cursor: Option<String>,
        _env: Environment,
    ) -> SourceFuture<ResourcePage, ResourceError> {
        Box::pin(async { Ok(ResourcePage::default()) })
    }

    fn read(
        &self,
        _ctx: CallContext,
        uri: String,
        _env: Environment,
    ) -> SourceFuture<Vec<ResourceContents>, ResourceError> {
        Box::pin(async move { Err(ResourceError::NotFound(uri)) })
    }
}

#[test]
fn prompt_names_are_unique_across_owners_and_follow_the_tool_rules() {
    let catalog = Catalog::new();
    catalog
        .replace(
            "a",
            Some(Arc::new(Prompts(vec!["review", "summarise"]))),
            None,
            None,
        )
        .unwrap();
    assert_eq!(
        catalog.replace("b", Some(Arc::new(Prompts(vec!["Review"]))), None, None),
        Err(CatalogError::DuplicatePrompt {
            name: "Review".into(),
            other: "a".into()
        })
    );
    assert!(matches!(
        catalog.replace("b", Some(Arc::new(Prompts(vec!["no spaces"]))), None, None),
        Err(CatalogError::BadPromptName { .. })
    ));
    // The owner itself may replace its own prompts.
    catalog
        .replace("a", Some(Arc::new(Prompts(vec!["review"]))), None, None)
        .unwrap();
    let names: Vec<String> = catalog.prompts().into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["review"]);
    assert!(catalog.prompt("summarise").is_none());
    assert!(catalog.remove("a"));
    assert!(!catalog.remove("a"));
    assert!(catalog.prompts().is_empty());
}

#[test]
fn a_resource_source_answers_only_under_its_own_namespace() {
    let catalog = Catalog::new();
    assert_eq!(
        catalog.replace(
            "evil",
            None,
            Some(Arc::new(Resources("file:///{path}"))),
            None
        ),
        Err(CatalogError::OutsideNamespace {
            owner: "evil".into(),
            template: "file:///{path}".into(),
            namespace: "plugin://evil/".into(),
        })
    );
    assert_eq!(
        catalog
            .replace("evil", None, Some(Arc::new(Resources("plugin://other/{x}"))), None)
            .map_err(|e| e.to_string()),
        Err("resource template \"plugin://other/{x}\" of evil is outside its namespace plugin://evil/; every URI it offers must start with it".into())
    );
    let generation = catalog.generation();
    catalog
        .replace(
            "w",
            None,
            Some(Arc::new(Resources("plugin://w/{city}"))),
            None,
        )
        .unwrap();
    assert_eq!(catalog.generation(), generation + 1);
    assert!(catalog.resource_source_for("plugin://w/paris").is_some());
    assert!(catalog.resource_source_for("plugin://wx/paris").is_none());
    assert!(catalog.resource_source_for("file:///etc/passwd").is_none());
    assert_eq!(catalog.resource_templates().len(), 1);
}

#[test]
fn a_namespace_is_a_uri_prefix_never_file_and_never_overlapping_another() {
    let catalog = Catalog::new();
    let source = || -> Option<Arc<dyn ResourceSource>> { Some(Arc::new(Resources("test://{x}"))) };
    catalog
        .replace("conf", None, source(), Some("test://"))
        .unwrap();
    assert!(catalog.resource_source_for("test://static-text").is_some());
    for (namespace, problem) in [
        ("test://", "overlaps conf's namespace"),
        ("test://deeper/", "overlaps conf's namespace"),
        ("file:///", "file:// is the host's own files"),
        ("FILE://x/", "file:// is the host's own files"),
        ("no-scheme", "a namespace is a URI prefix"),
        ("1x://a/", "its scheme must be"),
        ("x://a b/", "without spaces"),
    ] {
        let err = catalog
            .replace(
                "other",
                None,
                Some(Arc::new(Resources(Box::leak(
                    format!("{namespace}{{x}}").into_boxed_str(),
                )))),
                Some(namespace),
            )
            .unwrap_err();
        assert!(
            matches!(&err, CatalogError::BadNamespace { .. }) && err.to_string().contains(problem),
            "{namespace}: {err}"
        );
    }
    // The owner itself may keep or move its own namespace.
    catalog
        .replace("conf", None, source(), Some("test://"))
        .unwrap();
}
