//! The examples' resources and prompts (world `rich-plugin`), through the registry's
//! catalog.

use super::*;

pub(super) async fn resources_and_prompts(registry: &Registry) {
    // The plugins' resources and prompts (world rich-plugin), through the catalog.
    let catalog = registry.catalog();
    let mut prompts = catalog.prompts();
    prompts.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(
        prompts,
        [
            PromptDefinition {
                name: "describe_text".into(),
                title: Some("Describe a text".into()),
                description: Some("Ask for a short description of a text's style.".into()),
                arguments: vec![PromptArgument {
                    name: "text".into(),
                    description: Some("The text to describe.".into()),
                    required: true,
                }],
            },
            PromptDefinition {
                name: "greeting_card".into(),
                title: Some("Write a greeting card".into()),
                description: Some("Ask for a short greeting card for a person.".into()),
                arguments: vec![PromptArgument {
                    name: "name".into(),
                    description: Some("Who the card is for.".into()),
                    required: true,
                }],
            }
        ]
    );
    let (_, card) = catalog.prompt("greeting_card").expect("greeting_card");
    assert_eq!(
        card.get(
            CallContext::new(),
            "greeting_card".into(),
            [("name".to_owned(), "Ada".to_owned())].into(),
            Environment::generate(),
        )
        .await,
        Ok(PromptResult {
            description: Some("A short greeting card.".into()),
            messages: vec![PromptMessage {
                role: Role::User,
                content: text("Write a two-line greeting card for Ada."),
            }],
        })
    );
    let (_, prompt) = catalog.prompt("describe_text").expect("describe_text");
    assert_eq!(
        prompt
            .get(
                CallContext::new(),
                "describe_text".into(),
                [("text".to_owned(), "Hi.".to_owned())].into(),
                Environment::generate(),
            )
            .await,
        Ok(PromptResult {
            description: Some("A short description of a text's style.".into()),
            messages: vec![PromptMessage {
                role: Role::User,
                content: text("Describe the style of this text in two sentences:\n\nHi."),
            }],
        })
    );
    let mut templates = catalog.resource_templates();
    templates.sort_by(|a, b| a.uri_template.cmp(&b.uri_template));
    assert_eq!(
        templates,
        [
            ResourceTemplate {
                uri_template: "plugin://greeting/hello/{language}".into(),
                name: "hello".into(),
                title: None,
                description: Some("The greeting word of a language.".into()),
                mime_type: Some("text/plain".into()),
            },
            ResourceTemplate {
                uri_template: "plugin://textstats/letters/{word}".into(),
                name: "letters".into(),
                title: None,
                description: Some("How many letters a word has.".into()),
                mime_type: Some("application/json".into()),
            }
        ]
    );
    let js = catalog
        .resource_source_for("plugin://greeting/languages")
        .expect("greeting resources");
    assert_eq!(
        js.list(CallContext::new(), None, Environment::generate())
            .await,
        Ok(ResourcePage {
            resources: vec![ResourceEntry {
                uri: "plugin://greeting/languages".into(),
                name: "languages".into(),
                title: Some("Greeting languages".into()),
                description: None,
                mime_type: Some("application/json".into()),
                size: None,
            }],
            next_cursor: None,
        })
    );
    let js_read = |uri: &str| js.read(CallContext::new(), uri.to_owned(), Environment::generate());
    assert_eq!(
        js_read("plugin://greeting/languages").await,
        Ok(vec![ResourceContents {
            uri: "plugin://greeting/languages".into(),
            mime_type: Some("application/json".into()),
            body: ResourceBody::Text(r#"["en","fr","de","es"]"#.into()),
        }])
    );
    assert_eq!(
        js_read("plugin://greeting/hello/de").await,
        Ok(vec![ResourceContents {
            uri: "plugin://greeting/hello/de".into(),
            mime_type: Some("text/plain".into()),
            body: ResourceBody::Text("Hallo".into()),
        }])
    );
    assert_eq!(
        js_read("plugin://greeting/hello/xx").await,
        Err(ResourceError::NotFound(
            "no resource at plugin://greeting/hello/xx; try plugin://greeting/languages or plugin://greeting/hello/LANGUAGE".into()
        ))
    );
    let about_text = "textstats counts the characters, words and lines of a text (text_stats), charts its most frequent words (word_chart) and counts once the user confirmed (count_confirmed).";
    let source = catalog
        .resource_source_for("plugin://textstats/about")
        .expect("textstats resources");
    assert_eq!(
        source
            .list(CallContext::new(), None, Environment::generate())
            .await,
        Ok(ResourcePage {
            resources: vec![ResourceEntry {
                uri: "plugin://textstats/about".into(),
                name: "about".into(),
                title: Some("About textstats".into()),
                description: Some("What this plugin counts.".into()),
                mime_type: Some("text/plain".into()),
                size: Some(about_text.len() as u64),
            }],
            next_cursor: None,
        })
    );
    let read = |uri: &str| source.read(CallContext::new(), uri.to_owned(), Environment::generate());
    assert_eq!(
        read("plugin://textstats/about").await,
        Ok(vec![ResourceContents {
            uri: "plugin://textstats/about".into(),
            mime_type: Some("text/plain".into()),
            body: ResourceBody::Text(about_text.into()),
        }])
    );
    assert_eq!(
        read("plugin://textstats/letters/it's").await,
        Ok(vec![ResourceContents {
            uri: "plugin://textstats/letters/it's".into(),
            mime_type: Some("application/json".into()),
            body: ResourceBody::Text(r#"{"word": "it's", "letters": 3}"#.into()),
        }])
    );
    assert_eq!(
        read("plugin://textstats/nothing").await,
        Err(ResourceError::NotFound(
            "no resource at plugin://textstats/nothing; try plugin://textstats/about or plugin://textstats/letters/WORD".into()
        ))
    );
}
