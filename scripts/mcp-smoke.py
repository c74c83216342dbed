#!/usr/bin/env python3
"""Smoke test of `host run` with a real MCP client: the MCP Python SDK's stdio client.

Starts `host run --root <temp dir> --plan [--plugins DIR]` as the SDK's child process,
then initializes, lists the tools, writes and reads a file, calls an unknown tool (an
isError result, not a protocol error) and, with --plugins, calls `greet`.

    python3 -m venv /tmp/mcp-venv && /tmp/mcp-venv/bin/pip install mcp
    cargo build -p host
    /tmp/mcp-venv/bin/python scripts/mcp-smoke.py [--host target/debug/host] [--plugins plugins/dist]

Exits 0 when every check passed, 1 otherwise.
"""

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent
BUILTINS = [
    "read_file", "list_files", "write_file", "delete_file", "grep", "glob",
    "edit_file", "multi_edit", "move_file", "todo_write",
]


def text_of(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def check(condition: bool, what: str) -> None:
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        check.failed = True


check.failed = False


async def smoke(host: str, plugins: str | None, root: str) -> None:
    args = ["run", "--root", root, "--plan"]
    if plugins:
        args += ["--plugins", plugins]
    params = StdioServerParameters(command=host, args=args)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            print(f"server: {init.server_info.name} {init.server_info.version}, "
                  f"protocol {init.protocol_version}")
            check(init.server_info.name == "wasm-toolhost", "initialize: serverInfo.name")

            tools = (await session.list_tools()).tools
            names = [tool.name for tool in tools]
            print(f"tools ({len(names)}): {', '.join(names)}")
            check(names[: len(BUILTINS)] == BUILTINS, "tools/list: built-ins in spec order, then todo_write")

            written = await session.call_tool(
                "write_file", {"path": "hello.md", "content": "# Hello\nfrom MCP\n"})
            print(f"write_file -> isError={written.is_error} {text_of(written)}")
            check(not written.is_error, "write_file succeeds")

            read_back = await session.call_tool("read_file", {"path": "hello.md"})
            content = json.loads(text_of(read_back))["content"]
            print(f"read_file -> isError={read_back.is_error} content={content!r}")
            check(content == "1\t# Hello\n2\tfrom MCP\n", "read_file returns the exact content")

            unknown = await session.call_tool("no_such_tool", {})
            print(f"no_such_tool -> isError={unknown.is_error} {text_of(unknown)}")
            check(unknown.is_error and "no_such_tool" in text_of(unknown),
                  "unknown tool is an isError result naming the tool")

            bad = await session.call_tool("read_file", {})
            print(f"read_file {{}} -> isError={bad.is_error} {text_of(bad)}")
            check(bool(bad.is_error), "missing argument is an isError result")

            if plugins:
                greeting = await session.call_tool("greet", {"name": "Ada"})
                print(f"greet -> isError={greeting.is_error} {text_of(greeting)}")
                check(text_of(greeting) == "Hello, Ada!", "plugin tool greet")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=str(REPO / "target" / "debug" / "host"),
                        help="the host binary (default: target/debug/host)")
    parser.add_argument("--plugins", help="a plugin directory to load, e.g. plugins/dist")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        asyncio.run(smoke(options.host, options.plugins, root))
        on_disk = (Path(root) / "hello.md").read_text()
        check(on_disk == "# Hello\nfrom MCP\n", "the file is on disk under --root")
    print("all checks passed" if not check.failed else "some checks FAILED")
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
