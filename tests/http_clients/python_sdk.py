"""Drives `host run --http` through the official MCP Python SDK's Streamable HTTP client.

    python python_sdk.py URL TOKEN [--expect-isolated-roots]

Opens two sessions with the bearer TOKEN, lists the tools, writes and reads a file in
each, calls a missing tool, and (with --expect-isolated-roots, for a server started with
--session-root-template DIR/{session}) checks that each session sees only its own file.
A session without the token must be refused. Prints one line per check; exits 1 on the
first failure.
"""

import sys

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def check(condition, what):
    if not condition:
        print(f"FAIL {what}", flush=True)
        sys.exit(1)
    print(f"ok   {what}", flush=True)


def text(result):
    return "".join(block.text for block in result.content if block.type == "text")


async def session_work(url, token, name, isolated):
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with client, streamable_http_client(url, http_client=client) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "wasm-toolhost", f"{name}: initialize answered by {init.server_info.name}")
            check(init.protocol_version in ("2025-11-25", "2025-06-18", "2025-03-26"), f"{name}: protocol {init.protocol_version}")
            tools = [tool.name for tool in (await session.list_tools()).tools]
            check({"read_file", "write_file", "list_files"} <= set(tools), f"{name}: tools/list offers the file tools ({len(tools)} tools)")
            wrote = await session.call_tool("write_file", {"path": "notes.md", "content": f"written by {name}"})
            check(not wrote.is_error, f"{name}: write_file notes.md")
            read = await session.call_tool("read_file", {"path": "notes.md"})
            check(not read.is_error and f"written by {name}" in text(read), f"{name}: read_file gives its own content back")
            missing = await session.call_tool("no_such_tool", {})
            check(missing.is_error and "unknown tool" in text(missing), f"{name}: an unknown tool is a tool error")
            return text(await session.call_tool("list_files", {}))


async def refused_without_token(url):
    async with httpx2.AsyncClient() as client:
        response = await client.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
            headers={"Accept": "application/json, text/event-stream"},
        )
        check(response.status_code == 401, f"no token: HTTP {response.status_code}")
        check(response.headers.get("www-authenticate", "").startswith("Bearer"), "no token: WWW-Authenticate: Bearer")


async def main():
    url, token = sys.argv[1], sys.argv[2]
    isolated = "--expect-isolated-roots" in sys.argv[3:]
    await refused_without_token(url)
    listings = {}

    async def run(name):
        listings[name] = await session_work(url, token, name, isolated)

    async with anyio.create_task_group() as group:
        group.start_soon(run, "alpha")
        group.start_soon(run, "beta")
    if isolated:
        for name in ("alpha", "beta"):
            check(listings[name].count("notes.md") == 1, f"{name}: sees one notes.md, its own ({listings[name]})")
    print("python sdk: all checks passed", flush=True)


anyio.run(main)
