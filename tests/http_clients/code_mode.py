"""Code mode through a real client: the MCP Python SDK 2.x over stdio against `host run`
with the code tools (run_javascript, run_python) and `--plugin-tools '*'`.

    python code_mode.py ROOT -- HOST run --root ROOT --plugins DIR --plugin-tools '*' ...

Writes 1,000 files into ROOT (every 20th mentions "needle", a few times), then answers one
question three ways and checks they agree: how many lines say "needle" in the files grep
finds. Directly: a grep, then a read_file per matching file (51 tools/call). With
run_javascript and with run_python: one tools/call each, whose program makes the same
calls. Prints one line per check; exits 1 on the first mismatch.
"""

import json
import os
import sys

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

FILES = 1000
EVERY = 20

JS = """
const found = await tools.grep({pattern: "needle", output_mode: "files_with_matches"});
let lines = 0;
for (const path of found.files) {
  const file = await tools.read_file({path});
  lines += file.content.split("\\n").filter((line) => line.includes("needle")).length;
}
console.log(`${found.files.length} files`);
return {files: found.files.length, lines};
"""

PY = """
found = tools.grep(pattern="needle", output_mode="files_with_matches")
lines = 0
for path in found["files"]:
    content = tools.read_file(path=path)["content"]
    lines += sum(1 for line in content.split("\\n") if "needle" in line)
print(f"{len(found['files'])} files")
result = {"files": len(found["files"]), "lines": lines}
"""


def check(condition, what):
    if not condition:
        print(f"FAIL {what}", flush=True)
        os._exit(1)
    print(f"ok   {what}", flush=True)


def answer(result):
    """The JSON a tool call answered (its structured content, else its one text block)."""
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def main():
    root = sys.argv[1]
    command = sys.argv[sys.argv.index("--") + 1:]
    for i in range(FILES):
        with open(os.path.join(root, f"file{i:04}.txt"), "w") as f:
            if i % EVERY == 0:
                f.write("needle\n" * (1 + i % 3) + f"file {i}\n")
            else:
                f.write(f"hay {i}\nmore hay\n")
    server = StdioServerParameters(command=command[0], args=command[1:], env={"RUST_LOG": "warn"})
    async with Client(server) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        check({"run_javascript", "run_python", "grep", "read_file"} <= listed, f"tools/list offers the code tools: {sorted(listed)}")
        # Directly: one call per step.
        found = answer(await client.call_tool("grep", {"pattern": "needle", "output_mode": "files_with_matches"}))
        check(len(found["files"]) == FILES // EVERY and not found.get("truncated"), f"grep found {len(found['files'])} files")
        lines = 0
        for path in found["files"]:
            content = answer(await client.call_tool("read_file", {"path": path}))["content"]
            lines += sum(1 for line in content.split("\n") if "needle" in line)
        direct = {"files": len(found["files"]), "lines": lines}
        print(f"     direct: {direct} in {1 + len(found['files'])} tools/call", flush=True)
        for tool, code in (("run_javascript", JS), ("run_python", PY)):
            result = await client.call_tool(tool, {"code": code})
            check(not result.is_error, f"{tool}: no error ({[getattr(b, 'text', '') for b in result.content]})")
            got = answer(result)
            check(got["result"] == direct, f"{tool} in one tools/call: {got['result']} == {direct}")
            check(got["output"] == f"{direct['files']} files\n", f"{tool}: its console output {got['output']!r}")
    print("code mode: all checks passed", flush=True)


anyio.run(main)
