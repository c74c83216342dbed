"""Drives the axum_mount example (toolhost-mcp) through the official MCP Python SDK.

    python mounted.py BASE_URL ROOT

BASE_URL is the application's address (http://127.0.0.1:PORT), ROOT the directory its
file tools serve. Checks that the application's own /health answers beside the MCP
endpoint, that the SDK's Streamable HTTP client works at /agents/mcp (initialize,
tools/list, write_file then read_file, the file landing in ROOT), and that the endpoint
answers nowhere else (/mcp, the server's own path, is 404 here). Prints one line per
check; exits 1 on the first failure.
"""

import os
import sys

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

ROUTE = "/agents/mcp"


def check(condition, what):
    if not condition:
        print(f"FAIL {what}", flush=True)
        sys.exit(1)
    print(f"ok   {what}", flush=True)


def text(result):
    return "".join(block.text for block in result.content if block.type == "text")


async def main():
    base, root = sys.argv[1].rstrip("/"), sys.argv[2]
    async with httpx2.AsyncClient() as client:
        health = await client.get(f"{base}/health")
        check(health.status_code == 200 and health.text == "ok", f"/health: HTTP {health.status_code} {health.text!r}")
        for path in ("/mcp", "/agents", "/"):
            response = await client.post(
                f"{base}{path}",
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Accept": "application/json, text/event-stream"},
            )
            check(response.status_code == 404, f"POST {path}: HTTP {response.status_code} (the endpoint is at {ROUTE} only)")

    client = create_mcp_http_client()
    async with client, streamable_http_client(f"{base}{ROUTE}", http_client=client) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "wasm-toolhost", f"{ROUTE}: initialize answered by {init.server_info.name}")
            tools = [tool.name for tool in (await session.list_tools()).tools]
            check({"read_file", "write_file", "list_files"} <= set(tools), f"{ROUTE}: tools/list offers the file tools ({len(tools)} tools)")
            wrote = await session.call_tool("write_file", {"path": "mounted.md", "content": "through the mount"})
            check(not wrote.is_error, f"{ROUTE}: write_file mounted.md")
            read = await session.call_tool("read_file", {"path": "mounted.md"})
            check(not read.is_error and "through the mount" in text(read), f"{ROUTE}: read_file gives the content back")
            missing = await session.call_tool("no_such_tool", {})
            check(missing.is_error and "unknown tool" in text(missing), f"{ROUTE}: an unknown tool is a tool error")
    with open(os.path.join(root, "mounted.md"), encoding="utf-8") as written:
        check(written.read() == "through the mount", "the file is in the served root")
    print("python sdk (mounted): all checks passed", flush=True)


anyio.run(main)
