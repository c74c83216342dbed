"""textstats: a wasm-toolhost plugin written in Python (built with componentize-py).

Three tools:

- `text_stats` counts the characters, words and lines of a text and lists its most
  frequent words (a structured result, as JSON);
- `word_chart` draws the most frequent words' counts as a small PNG bar chart (a rich
  result: a text block and an image block);
- `count_confirmed` asks the user to confirm before it counts (the `interaction` import;
  the manifest must say `[grants] ask = true` and the operator allow it with
  `--plugin-ask`, else the question is refused and the tool fails saying why).

It targets the world `rich-plugin`, so it offers MCP resources and prompts too: the
resource `plugin://textstats/about` (what it counts), the resource template
`plugin://textstats/letters/{word}` (a word's letter count, as JSON) and the prompt
`describe_text` (argument `text`).

It shows the things every plugin does:

- `definitions()` says which tools the plugin offers: a name, a description for the model
  and a JSON Schema of the arguments, as JSON text;
- `call()` runs one, gets the arguments as JSON text and returns a `ToolResult`: content
  blocks (`ContentBlock_Text`, `ContentBlock_Image`...) and/or `structured` JSON text
  (empty content with `structured` set: the JSON is the one text block, as 0.2.0's JSON
  result was);
- errors are raised as `Err(ToolError_InvalidArguments(...))` (the model sent something
  wrong: say what and how to fix it) or `Err(ToolError_Failed(...))` (the tool ran and
  failed). Any other exception traps the instance: the host reports the tool crashed.

The `wit_world` package is generated from ../../../wit/plugin.wit (toolhost:plugin@0.3.0,
world `rich-plugin`) by componentize-py; see plugins/README.md for the build.
"""

import json
import re
from collections import Counter

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import prompts, resources
from wit_world.imports import interaction, log
from wit_world.imports.types import (
    ContentBlock_Image,
    ContentBlock_Text,
    Environment,
    ResourceBody_Text,
    Media,
    ToolAnnotations,
    ToolDefinition,
    ToolError_Failed,
    ToolError_InvalidArguments,
    ToolResult,
)

MAX_TOP = 20

PARAMETERS = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "The text to count."},
        "top": {
            "type": "integer",
            "description": f"How many of the most frequent words to list (0 to {MAX_TOP}, default 3).",
        },
    },
    "required": ["text"],
}

# The result's JSON Schema (WIT `output-schema`): clients get the result as structured
# content too, and the host checks each result against it.
OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "characters": {"type": "integer"},
        "words": {"type": "integer"},
        "lines": {"type": "integer"},
        "top_words": {"type": "array", "items": {"type": "array"}},
    },
    "required": ["characters", "words", "lines", "top_words"],
}

WORD = re.compile(r"[\w']+")


def invalid(message: str) -> Err:
    """An error the model can fix by sending other arguments."""
    return Err(ToolError_InvalidArguments(message))


def json_type(value) -> str:
    """The JSON type name of a parsed value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def text_arguments(arguments: dict, default_top: int) -> tuple[str, int]:
    """The checked `text` and `top` arguments."""
    text = arguments.get("text")
    if not isinstance(text, str):
        raise invalid(f'argument "text" must be a string, got {json_type(text)}')
    top = arguments.get("top", default_top)
    if top is None:
        top = default_top
    if isinstance(top, bool) or not isinstance(top, int):
        raise invalid(f'argument "top" must be an integer, got {json_type(top)}')
    if not 0 <= top <= MAX_TOP:
        raise invalid(f'argument "top" must be from 0 to {MAX_TOP}, got {top}')
    return text, top


def count(text: str, top: int) -> dict:
    words = [word.lower() for word in WORD.findall(text)]
    log.log(log.Level.DEBUG, f"counting {len(text)} characters")
    return {
        "characters": len(text),
        "words": len(words),
        "lines": len(text.splitlines()),
        # Most frequent first, ties alphabetically, so the answer is the same every time.
        # (Not Counter.most_common(n): it imports heapq when called, and componentize-py
        # only bundles the modules imported while the component is built.)
        "top_words": sorted(Counter(words).items(), key=lambda kv: (-kv[1], kv[0]))[:top],
    }


def text_stats(arguments: dict) -> ToolResult:
    text, top = text_arguments(arguments, 3)
    # No content blocks, only `structured`: the host gives the JSON as the one text block
    # (and as structuredContent, as the tool declares an output schema).
    return ToolResult(content=[], structured=json.dumps(count(text, top)))


# The PNG is written here, byte by byte (componentize-py bundles only the modules the
# code imports; this needs none): 8-bit grayscale, stored (uncompressed) deflate.


def crc32(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def adler32(data: bytes) -> int:
    a, b = 1, 0
    for byte in data:
        a = (a + byte) % 65521
        b = (b + a) % 65521
    return (b << 16) | a


def chunk(kind: bytes, data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + kind + data + crc32(kind + data).to_bytes(4, "big")


def png(width: int, rows: list[bytes]) -> bytes:
    """A grayscale PNG of `rows` (each `width` bytes, 0 black to 255 white)."""
    raw = b"".join(b"\x00" + row for row in rows)  # filter type 0 (none) per row
    blocks = b""
    for start in range(0, max(len(raw), 1), 65535):
        part = raw[start : start + 65535]
        final = 1 if start + 65535 >= len(raw) else 0
        size = len(part)
        blocks += bytes([final]) + size.to_bytes(2, "little") + (size ^ 0xFFFF).to_bytes(2, "little") + part
    deflated = b"\x78\x01" + blocks + adler32(raw).to_bytes(4, "big")
    header = width.to_bytes(4, "big") + len(rows).to_bytes(4, "big") + bytes([8, 0, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", deflated) + chunk(b"IEND", b"")


BAR_WIDTH = 4
CHART_HEIGHT = 16


def word_chart(arguments: dict) -> ToolResult:
    text, top = text_arguments(arguments, 5)
    top_words = count(text, top)["top_words"]
    if not top_words:
        raise invalid('the text has no words to chart (or "top" is 0); send a text with words')
    most = top_words[0][1]
    # One black bar per word, BAR_WIDTH pixels wide, as tall as its count (the most
    # frequent word fills the height), on white.
    heights = [max(1, round(n * CHART_HEIGHT / most)) for _, n in top_words]
    rows = [
        bytes(0 if CHART_HEIGHT - y <= h else 255 for h in heights for _ in range(BAR_WIDTH))
        for y in range(CHART_HEIGHT)
    ]
    caption = ", ".join(f"{word} ({n})" for word, n in top_words)
    return ToolResult(
        content=[
            ContentBlock_Text(f"most frequent words, left to right: {caption}"),
            ContentBlock_Image(Media(data=png(BAR_WIDTH * len(top_words), rows), mime_type="image/png")),
        ],
        structured=None,
    )


def count_confirmed(arguments: dict) -> ToolResult:
    text, _ = text_arguments(arguments, 0)
    try:
        # True only when the user accepted; a refusal (no grant, a client that cannot
        # ask, no answer in time) raises Err(InteractionError_...), never a yes.
        accepted = interaction.confirm(f"Count the words of a text of {len(text)} characters?")
    except Err as err:
        raise Err(ToolError_Failed(f"could not ask the user: {err.value.value}"))
    if not accepted:
        return ToolResult(content=[ContentBlock_Text("the user declined; nothing was counted")], structured=None)
    return ToolResult(content=[ContentBlock_Text(f"{count(text, 0)['words']} words")], structured=None)


TEXT_PARAMETERS = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "The text to count."}},
    "required": ["text"],
}

CHART_PARAMETERS = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "The text to chart."},
        "top": {
            "type": "integer",
            "description": f"How many of the most frequent words to chart (1 to {MAX_TOP}, default 5).",
        },
    },
    "required": ["text"],
}

# Hints for clients: they only read their arguments.
READ_ONLY = ToolAnnotations(
    read_only_hint=True,
    destructive_hint=None,
    idempotent_hint=True,
    open_world_hint=False,
)

# name: (title, description, parameters, output schema, run). title, annotations and
# output_schema are optional (None says nothing).
TOOLS = {
    "text_stats": (
        "Text statistics",
        "Count the characters, words and lines of a text, and list its most frequent words "
        "(lowercased) with their counts.",
        PARAMETERS,
        OUTPUT_SCHEMA,
        text_stats,
    ),
    "word_chart": (
        "Word chart",
        "Draw the counts of a text's most frequent words as a small PNG bar chart, with a caption.",
        CHART_PARAMETERS,
        None,
        word_chart,
    ),
    "count_confirmed": (
        "Count words, once confirmed",
        "Ask the user to confirm, then count the words of a text.",
        TEXT_PARAMETERS,
        None,
        count_confirmed,
    ),
}


class Tools(exports.Tools):
    def definitions(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(
                name=name,
                description=description,
                parameters=json.dumps(parameters),
                title=title,
                annotations=READ_ONLY,
                output_schema=None if output is None else json.dumps(output),
            )
            for name, (title, description, parameters, output, _) in TOOLS.items()
        ]

    def call(self, name: str, arguments: str, env: Environment) -> ToolResult:
        if name not in TOOLS:
            raise Err(ToolError_Failed(f"this plugin has no tool named {name!r}; it offers: {', '.join(TOOLS)}"))
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as err:
            raise invalid(f"the arguments are not valid JSON ({err}); send one JSON object")
        if not isinstance(parsed, dict):
            raise invalid(f"the arguments must be an object, got {json_type(parsed)}")
        run = TOOLS[name][4]
        return run(parsed)


# Resources and prompts (world `rich-plugin`). Every URI starts with the plugin's
# namespace, plugin://textstats/ (the host refuses any other).
NAMESPACE = "plugin://textstats/"
ABOUT = (
    "textstats counts the characters, words and lines of a text (text_stats), charts its "
    "most frequent words (word_chart) and counts once the user confirmed (count_confirmed)."
)


class Resources(exports.Resources):
    def list(self, cursor: str | None, env: Environment) -> resources.ResourcePage:
        about = resources.Resource(
            uri=NAMESPACE + "about",
            name="about",
            title="About textstats",
            description="What this plugin counts.",
            mime_type="text/plain",
            size=len(ABOUT),
        )
        return resources.ResourcePage(resources=[about], next_cursor=None)

    def templates(self) -> list[resources.ResourceTemplate]:
        return [
            resources.ResourceTemplate(
                uri_template=NAMESPACE + "letters/{word}",
                name="letters",
                title=None,
                description="How many letters a word has.",
                mime_type="application/json",
            )
        ]

    def read(self, uri: str, env: Environment) -> list[resources.ResourceContents]:
        if uri == NAMESPACE + "about":
            return [resources.ResourceContents(uri=uri, mime_type="text/plain", body=ResourceBody_Text(ABOUT))]
        word = uri.removeprefix(NAMESPACE + "letters/")
        if word != uri and word and "/" not in word:
            body = json.dumps({"word": word, "letters": sum(c.isalpha() for c in word)})
            return [resources.ResourceContents(uri=uri, mime_type="application/json", body=ResourceBody_Text(body))]
        raise Err(resources.ResourceError_NotFound(f"no resource at {uri}; try {NAMESPACE}about or {NAMESPACE}letters/WORD"))


class Prompts(exports.Prompts):
    def definitions(self) -> list[prompts.Prompt]:
        return [
            prompts.Prompt(
                name="describe_text",
                title="Describe a text",
                description="Ask for a short description of a text's style.",
                arguments=[prompts.PromptArgument(name="text", description="The text to describe.", required=True)],
            )
        ]

    def get(self, name: str, arguments: list[tuple[str, str]], env: Environment) -> prompts.PromptResult:
        if name != "describe_text":
            raise Err(ToolError_Failed(f"this plugin has no prompt named {name!r}; it offers describe_text"))
        text = dict(arguments).get("text", "")
        return prompts.PromptResult(
            description="A short description of a text's style.",
            messages=[
                prompts.PromptMessage(
                    role=prompts.Role.USER,
                    content=ContentBlock_Text(f"Describe the style of this text in two sentences:\n\n{text}"),
                )
            ],
        )
