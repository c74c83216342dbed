//! `rich`: toolhost:plugin@0.3.0 rich results, for the host's and the MCP layer's tests.
//!
//! | tool | result |
//! |---|---|
//! | `pixel` | a text block and a 1x1 red PNG (`image/png`, [`PIXEL_PNG`]) |
//! | `picture` | `{"mime": "..."}`: the same bytes as an image of that MIME type (`text/html`, `image/svg+xml` are refused by the host) |
//! | `big_picture` | `{"mib": N}`: an image of N MiB (zeros claimed as `image/png`), to test the output and memory limits |
//! | `mixed` | text, audio (`audio/wav`), a resource link, an embedded text and an embedded blob resource, and structured `{"parts": 5}` |
//! | `counted` | declares an output schema; structured `{"count": 2}` beside a text block |
//!
//! Resources (namespace `plugin://rich/`): `plugin://rich/notes/b.txt` (text `bee`),
//! `plugin://rich/data/c.bin` (bytes 0, 1, 255), and the template
//! `plugin://rich/items/{id}` (text `item <id>`). Prompt `rich_summary` (argument
//! `topic`, required): a user message `Summarize <topic>.` and one with the pixel.

use toolhost_sdk::catalog::{
    Prompt, PromptMessage, Resource, ResourceContents, ResourceError, ResourceTemplate, Resources,
};
use toolhost_sdk::{
    export_plugin, schema, Content, ContentBlock, Env, ResourceBody, ResourceLink, Tool, ToolError,
};

/// A valid 1x1 PNG: one red pixel.
pub const PIXEL_PNG: [u8; 69] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82];

fn no_parameters() -> serde_json::Value {
    schema::object(Vec::<(String, serde_json::Value)>::new(), Vec::<String>::new())
}

fn pixel(_: serde_json::Value, _env: Env) -> Result<Content, ToolError> {
    Ok(Content::new()
        .text("one red pixel")
        .image(PIXEL_PNG.to_vec(), "image/png"))
}

#[derive(serde::Deserialize)]
struct Picture {
    mime: String,
}

fn picture(args: Picture, _env: Env) -> Result<Content, ToolError> {
    Ok(Content::new().image(PIXEL_PNG.to_vec(), args.mime))
}

#[derive(serde::Deserialize)]
struct BigPicture {
    mib: usize,
}

fn big_picture(args: BigPicture, _env: Env) -> Result<Content, ToolError> {
    Ok(Content::new().image(vec![0; args.mib << 20], "image/png"))
}

fn mixed(_: serde_json::Value, _env: Env) -> Result<Content, ToolError> {
    Ok(Content::new()
        .text("five parts")
        .audio(b"RIFF".to_vec(), "audio/wav")
        .resource_link(
            ResourceLink::new("plugin://rich/notes/a.txt", "a.txt")
                .with_mime_type("text/plain")
                .with_description("A note."),
        )
        .embedded_text("plugin://rich/notes/b.txt", Some("text/plain"), "bee")
        .embedded_blob("plugin://rich/data/c.bin", Some("application/octet-stream"), vec![0, 1, 255])
        .with_structured(serde_json::json!({"parts": 5})))
}

fn counted(_: serde_json::Value, _env: Env) -> Result<Content, ToolError> {
    Ok(Content::new()
        .text("two")
        .with_structured(serde_json::json!({"count": 2})))
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::rich("pixel", "Draws one red pixel.", no_parameters(), pixel),
        Tool::rich(
            "picture",
            "Returns the pixel under any MIME type.",
            schema::object([("mime", schema::string("The MIME type to claim."))], ["mime"]),
            picture,
        ),
        Tool::rich(
            "big_picture",
            "Returns an image of the given size in MiB.",
            schema::object([("mib", schema::integer("Its size in MiB."))], ["mib"]),
            big_picture,
        ),
        Tool::rich("mixed", "Returns one block of each kind.", no_parameters(), mixed),
        Tool::rich("counted", "Counts to two.", no_parameters(), counted).with_output_schema(
            schema::object([("count", schema::integer("How many."))], ["count"]),
        ),
    ]
}

fn resources() -> Resources {
    Resources::new()
        .resource(
            Resource::new("plugin://rich/notes/b.txt", "b.txt").with_mime_type("text/plain"),
            ResourceBody::Text("bee".into()),
        )
        .resource(
            Resource::new("plugin://rich/data/c.bin", "c.bin")
                .with_mime_type("application/octet-stream"),
            ResourceBody::Blob(vec![0, 1, 255]),
        )
        .template(
            ResourceTemplate::new("plugin://rich/items/{id}", "item").with_mime_type("text/plain"),
        )
        .read_with(|uri, _env| match uri.strip_prefix("plugin://rich/items/") {
            Some(id) if !id.is_empty() => Ok(vec![ResourceContents::new(
                uri,
                Some("text/plain"),
                ResourceBody::Text(format!("item {id}")),
            )]),
            _ => Err(ResourceError::NotFound(format!("no resource at {uri}"))),
        })
}

fn prompts() -> Vec<Prompt> {
    vec![Prompt::new("rich_summary", "Summarize a topic.", |arguments, _env| {
        let topic = arguments
            .get("topic")
            .ok_or_else(|| ToolError::invalid_arguments("topic is required"))?;
        Ok(vec![
            PromptMessage::user(ContentBlock::Text(format!("Summarize {topic}."))),
            PromptMessage::user(ContentBlock::Image {
                data: PIXEL_PNG.to_vec(),
                mime_type: "image/png".into(),
            }),
        ])
    })
    .argument("topic", "What to summarize.", true)]
}

export_plugin!(tools, resources = resources, prompts = prompts);
