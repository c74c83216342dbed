"""run_python: code mode's Python tool (built with componentize-py).

The model writes a short Python program that calls the registry's tools; it runs here,
inside this plugin's sandbox (CPython compiled to WebAssembly), so twenty tool calls cost
one model round trip instead of twenty.

What the program gets:

- it runs as a module: `tools.NAME(arg=value)` calls registry tool NAME through the
  `registry` import (toolhost:plugin/registry@0.3.0) and returns the tool's result, parsed
  from JSON; a failed call raises `ToolError` whose message is the text the model would
  read for a direct call; `tools.call("NAME", {...})` does the same for any name;
  `tools.list()` gives `[{"name", "description"}]` of the tools it may call;
- the value of the top-level variable `result` when it ends is the result (any JSON
  value; `None` when unset);
- `print` (stdout and stderr) is captured and returned with the result.

The host enforces the sandbox: the grant (`[grants] tools` in run_python.toml and the
operator's `--plugin-tools`), the time and memory limits, `max_tool_calls`, and the
checks of every nested call. This file only shapes what the model sees, within caps:
printed output up to OUTPUT_CAP (16 KiB; the rest is dropped and counted) and a result
of at most RESULT_CAP (32 KiB of JSON; more is an error asking for less), so the whole
answer fits the registry's default 64 KiB cap on one tool result.

Each call runs on a fresh instance, so nothing a program changes (modules, builtins,
`tools` itself) is seen by the next one.
"""

import builtins
import json
import sys
import traceback

# componentize-py bundles only the standard-library modules the app imports: these are
# the ones a program may import too (plain computation; no socket, file or HTTP module
# works in this sandbox anyway).
import base64  # noqa: F401
import bisect  # noqa: F401
import collections  # noqa: F401
import dataclasses  # noqa: F401
import datetime  # noqa: F401
import difflib  # noqa: F401
import fnmatch  # noqa: F401
import functools  # noqa: F401
import heapq  # noqa: F401
import itertools  # noqa: F401
import math  # noqa: F401
import operator  # noqa: F401
import random  # noqa: F401
import re  # noqa: F401
import statistics  # noqa: F401
import string  # noqa: F401
import textwrap  # noqa: F401

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import registry
from wit_world.imports.types import (
    Environment,
    ToolAnnotations,
    ToolDefinition,
    ToolError_Failed,
    ToolError_InvalidArguments,
    ToolResult,
)

# Taken before any program runs: a program that replaces them (json.dumps = ...) changes
# only what it sees, not how its own answer is written.
dumps = json.dumps
loads = json.loads
JSONDecodeError = json.JSONDecodeError

# Printed output returned per call: at most this many bytes of its JSON string (16 KiB).
OUTPUT_CAP = 16 * 1024
# The result: at most this many bytes of JSON (32 KiB).
RESULT_CAP = 32 * 1024
# The file name the program's code has in tracebacks.
PROGRAM = "<program>"

PARAMETERS = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "description": 'A Python program; set `result` to what to return: `result = len(tools.grep(pattern="TODO")["matches"])`',
        }
    },
    "required": ["code"],
}

HOW = [
    "Runs a Python 3 program (in a sandbox) that calls other tools, so many tool calls cost one round trip.",
    "`tools.NAME(arg=value)` calls tool NAME and returns its result as parsed JSON; a failed call raises ToolError whose message says why.",
    '`tools.call("NAME", {...})` does the same for any name; `tools.list()` lists the tools you may call ([{"name", "description"}]).',
    "Set the top-level variable `result` to a JSON value: it is what the call returns.",
    f'The answer is {{"result": <result>, "output": <printed text>}}; output is cut after {OUTPUT_CAP // 1024} KiB, and the result\'s JSON may be at most {RESULT_CAP // 1024} KiB.',
    "Standard modules: re, json, math, statistics, collections, itertools, functools, datetime, string, textwrap, fnmatch, difflib, heapq, bisect, base64, random, operator, dataclasses.",
    "No files, network or environment beyond the tools; each run starts from a fresh sandbox; the host stops a program at its time, memory and tool-call limits.",
]


def invalid(message: str) -> Err:
    return Err(ToolError_InvalidArguments(message))


def failed(message: str) -> Err:
    return Err(ToolError_Failed(message))


def first_line(text: str) -> str:
    line = str(text).split("\n")[0].strip()
    return line if len(line) <= 160 else line[:157] + "..."


def granted_tools() -> list:
    return [{"name": d.name, "description": first_line(d.description)} for d in registry.definitions()]


def description() -> str:
    try:
        listed = granted_tools()
    except Exception:  # noqa: BLE001 - the list is optional; the fixed text still works
        listed = []
    if listed:
        tools_text = "Tools you may call:\n" + "\n".join(f"- {t['name']}: {t['description']}" for t in listed)
    else:
        tools_text = "Call `tools.list()` to see which tools you may call."
    return "\n".join(HOW) + "\n" + tools_text


class ToolError(Exception):
    """A nested tool call failed; the message is what the model would read."""

    def __init__(self, tool: str, message: str):
        super().__init__(message)
        self.tool = tool


def json_bytes(text: str) -> int:
    """Bytes `text` takes as a JSON string's content (escapes included), UTF-8."""
    return len(dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")) - 2


class Output:
    """Printed text, kept while its JSON string fits OUTPUT_CAP; what is dropped is counted."""

    def __init__(self):
        self.parts = []
        self.kept = 0
        self.dropped = 0

    def write(self, text) -> int:
        text = str(text)
        if self.dropped:
            self.dropped += len(text)
            return len(text)
        room = OUTPUT_CAP - self.kept
        size = json_bytes(text)
        if size <= room:
            self.parts.append(text)
            self.kept += size
            return len(text)
        keep = min(len(text), room)
        while keep > 0 and json_bytes(text[:keep]) > room:
            keep = int(keep * 0.9)
        self.parts.append(text[:keep])
        self.kept = OUTPUT_CAP
        self.dropped = len(text) - keep
        return len(text)

    def flush(self):
        pass

    def isatty(self) -> bool:
        return False

    def text(self) -> str:
        kept = "".join(self.parts)
        if not self.dropped:
            return kept
        return f"{kept}\n[output truncated: {self.dropped} more characters were not kept (limit {OUTPUT_CAP // 1024} KiB)]"


def call_tool(name, arguments):
    if not isinstance(name, str):
        raise TypeError(f"a tool name must be a string, got {type(name).__name__}")
    if not isinstance(arguments, dict):
        raise TypeError(f"the arguments of tools.{name} must be keyword arguments or a dict")
    text = dumps(arguments)
    try:
        answer = registry.call(name, text)
    except Err as err:
        raise ToolError(name, getattr(err.value, "value", str(err.value))) from None
    return loads(answer)


class ProgramTools:
    """`tools.NAME(**args)` calls tool NAME; `list` and `call` are helpers."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def tool(arguments=None, /, **keywords):
            given = dict(arguments or {}, **keywords) if arguments is not None else keywords
            return call_tool(name, given)

        tool.__name__ = name
        return tool

    def call(self, name, arguments=None, /, **keywords):
        given = dict(arguments or {}, **keywords) if arguments is not None else keywords
        return call_tool(name, given)

    def list(self):
        return granted_tools()


def program_line(err: BaseException) -> str:
    """"line L" of the innermost frame of the program in `err`'s traceback, or ""."""
    line = ""
    for frame in traceback.extract_tb(err.__traceback__):
        if frame.filename == PROGRAM:
            line = f"line {frame.lineno}"
    return line


def with_output(message: str, output: Output) -> str:
    text = output.text()
    return message if not text else f"{message}\nprinted output before it:\n{text}"


def run_program(code: str) -> str:
    output = Output()
    try:
        compiled = compile(code, PROGRAM, "exec")
    except SyntaxError as err:
        where = f" at line {err.lineno}, column {err.offset}" if err.lineno else ""
        raise invalid(f"SyntaxError{where}: {err.msg}; fix the code and run it again") from None
    except (ValueError, OverflowError, RecursionError, MemoryError) as err:
        raise invalid(f"the program could not be compiled: {type(err).__name__}: {err}") from None
    namespace = {"__name__": "__main__", "tools": ProgramTools(), "ToolError": ToolError}
    saved = sys.stdout, sys.stderr
    # The builtins, put back after the program (it may replace `len` and the like).
    saved_builtins = dict(builtins.__dict__)
    sys.stdout = sys.stderr = output
    try:
        exec(compiled, namespace)  # noqa: S102 - running the model's program is this tool's job
    except SystemExit as err:
        if err.code not in (None, 0):
            raise failed(with_output(f"the program exited with status {err.code!r}", output)) from None
    except BaseException as err:  # noqa: BLE001 - every exception of the program is the model's to read
        line = program_line(err)
        at = f" at {line}" if line else ""
        said = str(err)
        if isinstance(err, MemoryError) and not said:
            said = "out of memory (the sandbox's memory limit); work on less data at once"
        raise failed(with_output(f"the program raised {type(err).__name__}{at}: {said}", output)) from None
    finally:
        sys.stdout, sys.stderr = saved
        builtins.__dict__.clear()
        builtins.__dict__.update(saved_builtins)
    value = namespace.get("result")
    try:
        encoded = dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as err:
        raise failed(with_output(f"`result` is not JSON ({err}); set it to plain data (dict, list, str, int, float, bool, None)", output)) from None
    size = len(encoded.encode("utf-8", "surrogatepass"))
    if size > RESULT_CAP:
        raise failed(
            with_output(
                f"`result` is {size} bytes of JSON, over the limit of {RESULT_CAP // 1024} KiB; return less (a count, a summary, the first items)",
                output,
            )
        )
    return dumps({"result": value, "output": output.text()}, ensure_ascii=False, allow_nan=False)


class Tools(exports.Tools):
    def definitions(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(
                name="run_python",
                description=description(),
                parameters=dumps(PARAMETERS),
                title="Run a Python program that calls tools",
                annotations=ToolAnnotations(
                    read_only_hint=None, destructive_hint=None, idempotent_hint=None, open_world_hint=False
                ),
                output_schema=None,
            )
        ]

    def call(self, name: str, arguments: str, env: Environment) -> ToolResult:
        if name != "run_python":
            raise failed(f"this plugin has no tool named {name!r}; it offers: run_python")
        try:
            parsed = loads(arguments)
        except JSONDecodeError as err:
            raise invalid(f'the arguments are not valid JSON ({err}); send {{"code": "..."}}') from None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("code"), str):
            raise invalid('argument "code" must be a string: a Python program that sets `result`')
        return ToolResult(content=[], structured=run_program(parsed["code"]))
