"""The MCP Inspector's command-line client (`inspector --cli`, pinned by scripts/interop)
against `host serve --http` (URL) and against `host run` over stdio (the command after --),
both serving a root with notes.txt and pixel.png (written by rich_sdk2.py) and the
conformance plugin, with --confirm write_file on the HTTP server.

    python3 inspector_cli.py NODE INSPECTOR_JS URL ROOT -- HOST run --root ROOT ...

Over HTTP on both revisions (`--protocol-era legacy`, 2025-11-25, and `modern`,
2026-07-28; the modern pass without the repeats). Each check is one CLI run (`--format json`, one JSON object on stdout) and one fresh MCP
session: tools/call of test_image_content (the image block, its mimeType and bytes) and
test_multiple_content_types (text, image, embedded resource), resources/list (the root's
files and the plugin's), resources/read of a root file, a root PNG and test://static-text,
resources/templates/list, prompts/get with arguments. The CLI declares no elicitation
capability, so the host must not ask it: the plugin's question fails as "nobody can be
asked", and --confirm write_file refuses the call unrun. Tasks are not checked here: the
CLI's methods (2.12.0) leave out tasks/* ("Unsupported method: tasks/list"), it runs a call
as a task only for a tool whose taskSupport is `required`, and each run is its own session. Prints one line per check; exits 1 on the
first mismatch (and with the CLI's output). The three passes run side by side.
"""

import base64
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

PIXEL_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
    "0000000c49444154789c63f8cfc0000003010100c9fe92ef0000000049454e44ae426082"
)
NOTES = "notes from the root\nsecond line\n"
STATIC_TEXT = "This is the content of the static text resource."


def check(condition, what, output=None):
    if not condition:
        print(f"FAIL {what}", flush=True)
        if output is not None:
            print(output, flush=True)
        # The passes run in threads: end them all.
        os._exit(1)
    print(f"ok   {what}", flush=True)


class Cli:
    def __init__(self, node, inspector, target, home, era="legacy"):
        self.base = [node, inspector, "--cli", "--format", "json", "--quiet", "--protocol-era", era]
        self.target = target
        # The CLI keeps a catalog and secrets under ~/.mcp-inspector: a throwaway HOME.
        self.env = dict(os.environ, HOME=home)

    def run(self, *args, expect_exit=0):
        """One CLI run: its JSON answer (stdout on success, the stderr envelope on failure)."""
        # A URL goes first (--prompt-args and --tool-arg take every word after them), a
        # command after `--`.
        if len(self.target) == 1:
            command = [*self.base, self.target[0], *args]
        else:
            command = [*self.base, *args, "--", *self.target]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=self.env)
        out = done.stdout.strip() or done.stderr.strip()
        if done.returncode != expect_exit:
            check(False, f"inspector {' '.join(args)}: exit {done.returncode}, not {expect_exit}", f"{done.stdout}\n{done.stderr}")
        try:
            return json.loads(done.stdout.strip().splitlines()[0])
        except (IndexError, json.JSONDecodeError):
            check(False, f"inspector {' '.join(args)}: a JSON answer on stdout", out)


def image_block(block, what):
    check(block == {"type": "image", "mimeType": "image/png", "data": block.get("data")}, f"{what}: an image block, image/png", block)
    check(base64.b64decode(block["data"], validate=True) == PIXEL_PNG, f"{what}: its data decodes to the plugin's 69-byte PNG")


def common(cli, where, full=True):
    """The checks both transports get; `full=False` (stdio) leaves out the repeats."""
    result = cli.run("--method", "tools/call", "--tool-name", "test_image_content")["result"]
    check(result["isError"] is False and len(result["content"]) == 1, f"{where}: test_image_content gives one block", result)
    image_block(result["content"][0], f"{where}: test_image_content")

    if full:
        result = cli.run("--method", "tools/call", "--tool-name", "test_multiple_content_types")["result"]
        content = result["content"]
        check([b["type"] for b in content] == ["text", "image", "resource"], f"{where}: test_multiple_content_types gives text, image, resource", result)
        check(content[0]["text"] == "Multiple content types test:", f"{where}: its text")
        image_block(content[1], f"{where}: its image")
        check(content[2]["resource"] == {"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": '{"test":"data","value":123}'}, f"{where}: its embedded resource", content[2])

    # The CLI follows nextCursor itself: the root's page, then the plugin's.
    resources = cli.run("--method", "resources/list")["result"]["resources"]
    check(resources == [
        {"name": "notes.txt", "uri": "file:///notes.txt", "mimeType": "text/plain", "size": len(NOTES)},
        {"name": "pixel.png", "uri": "file:///pixel.png", "mimeType": "image/png", "size": len(PIXEL_PNG)},
        {"name": "static-text", "uri": "test://static-text", "mimeType": "text/plain"},
        {"name": "static-binary", "uri": "test://static-binary", "mimeType": "image/png"},
    ], f"{where}: resources/list is the root's two files, then the plugin's two resources", resources)
    contents = cli.run("--method", "resources/read", "--uri", "file:///pixel.png")["result"]["contents"]
    check(len(contents) == 1 and contents[0]["mimeType"] == "image/png" and base64.b64decode(contents[0]["blob"]) == PIXEL_PNG, f"{where}: resources/read file:///pixel.png gives the PNG's bytes", contents)
    contents = cli.run("--method", "resources/read", "--uri", "test://static-text")["result"]["contents"]
    check(contents == [{"uri": "test://static-text", "mimeType": "text/plain", "text": STATIC_TEXT}], f"{where}: resources/read test://static-text", contents)
    if full:
        contents = cli.run("--method", "resources/read", "--uri", "file:///notes.txt")["result"]["contents"]
        check(contents == [{"uri": "file:///notes.txt", "mimeType": "text/plain", "text": NOTES}], f"{where}: resources/read file:///notes.txt", contents)
        templates = [t["uriTemplate"] for t in cli.run("--method", "resources/templates/list")["result"]["resourceTemplates"]]
        check(templates == ["file:///{path}", "test://template/{id}/data"], f"{where}: resources/templates/list {templates}")

    prompt = cli.run("--method", "prompts/get", "--prompt-name", "test_prompt_with_arguments", "--prompt-args", "arg1=alpha", "arg2=beta")["result"]
    check(prompt["messages"] == [{"role": "user", "content": {"type": "text", "text": "Prompt with arguments: arg1='alpha', arg2='beta'"}}], f"{where}: prompts/get test_prompt_with_arguments arg1=alpha arg2=beta", prompt)

    if full:
        # Exit 5: the tool answered isError.
        answer = cli.run("--method", "tools/call", "--tool-name", "test_elicitation", "--tool-arg", "message=hi", expect_exit=5)
        text = answer["result"]["content"][0]["text"] if "result" in answer else ""
        check(text.startswith("test_elicitation: could not ask the user: nobody can be asked during this call"), f"{where}: a client without elicitation is never asked (the tool hears so)", answer)


def main():
    node, inspector, url, root = sys.argv[1:5]
    stdio = sys.argv[sys.argv.index("--") + 1:]
    with tempfile.TemporaryDirectory() as home:
        http = Cli(node, inspector, [url], home)

        def http_pass():
            common(http, "http")
            answer = http.run("--method", "tools/call", "--tool-name", "write_file", "--tool-arg", "path=unasked.txt", "content=x", expect_exit=5)
            text = answer["result"]["content"][0]["text"] if "result" in answer else ""
            check(text.startswith("write_file: not run:"), f"http: --confirm write_file with a client that cannot ask: not run ({text})", answer)
            check(not os.path.exists(os.path.join(root, "unasked.txt")), "http: nothing written")

        # 2026-07-28 (server/discover, per-request _meta): the same answers.
        def modern_pass():
            common(Cli(node, inspector, [url], home, era="modern"), "http modern", full=False)

        def stdio_pass():
            common(Cli(node, inspector, stdio, home), "stdio", full=False)

        # One CLI run is mostly Node starting: the three passes run side by side (each
        # line names its pass).
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            for done in [pool.submit(p) for p in (http_pass, modern_pass, stdio_pass)]:
                done.result()
    print("inspector cli: all checks passed", flush=True)


main()
