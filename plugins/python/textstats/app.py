"""textstats: a wasm-toolhost plugin written in Python (built with componentize-py).

One tool, `text_stats`: counts the characters, words and lines of a text and lists its
most frequent words. It shows the three things every plugin does:

- `definitions()` says which tools the plugin offers: a name, a description for the model
  and a JSON Schema of the arguments, as JSON text;
- `call()` runs one, gets the arguments as JSON text and returns the result as JSON text;
- errors are raised as `Err(ToolError_InvalidArguments(...))` (the model sent something
  wrong: say what and how to fix it) or `Err(ToolError_Failed(...))` (the tool ran and
  failed). Any other exception traps the instance: the host reports the tool crashed.

The `wit_world` package is generated from ../../../wit/legacy/plugin-0.2.0.wit by componentize-py; see
plugins/README.md for the build.
"""

import json
import re
from collections import Counter

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import log
from wit_world.imports.types import (
    Environment,
    ToolAnnotations,
    ToolDefinition,
    ToolError_Failed,
    ToolError_InvalidArguments,
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


def text_stats(arguments: dict) -> dict:
    text = arguments.get("text")
    if not isinstance(text, str):
        raise invalid(f'argument "text" must be a string, got {json_type(text)}')
    top = arguments.get("top", 3)
    if top is None:
        top = 3
    if isinstance(top, bool) or not isinstance(top, int):
        raise invalid(f'argument "top" must be an integer, got {json_type(top)}')
    if not 0 <= top <= MAX_TOP:
        raise invalid(f'argument "top" must be from 0 to {MAX_TOP}, got {top}')
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


TOOLS = {
    "text_stats": (
        "Count the characters, words and lines of a text, and list its most frequent words "
        "(lowercased) with their counts.",
        text_stats,
    ),
}


class Tools(exports.Tools):
    def definitions(self) -> list[ToolDefinition]:
        # title, annotations and output_schema are optional (None says nothing): here a
        # title for people, hints for clients (it only reads its arguments), the result's
        # schema.
        hints = ToolAnnotations(
            read_only_hint=True,
            destructive_hint=None,
            idempotent_hint=True,
            open_world_hint=False,
        )
        return [
            ToolDefinition(
                name=name,
                description=description,
                parameters=json.dumps(PARAMETERS),
                title="Text statistics",
                annotations=hints,
                output_schema=json.dumps(OUTPUT_SCHEMA),
            )
            for name, (description, _) in TOOLS.items()
        ]

    def call(self, name: str, arguments: str, env: Environment) -> str:
        if name not in TOOLS:
            raise Err(ToolError_Failed(f"this plugin has no tool named {name!r}; it offers: {', '.join(TOOLS)}"))
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as err:
            raise invalid(f"the arguments are not valid JSON ({err}); send one JSON object")
        if not isinstance(parsed, dict):
            raise invalid(f"the arguments must be an object, got {json_type(parsed)}")
        _, run = TOOLS[name]
        return json.dumps(run(parsed))
