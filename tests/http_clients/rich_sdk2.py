"""The MCP Python SDK 2.x (its `mcp.Client`) against `host serve --http` with a root, the
conformance plugin (plugins/conformance, its manifest, --plugin-ask), --watch and
--confirm write_file.

    python rich_sdk2.py URL ROOT [-- HOST run --root ROOT ... --confirm write_file]

With a command after --, the same checks run again over stdio against it (`host run`),
where the server's questions go out on stdout.

Writes notes.txt and pixel.png into ROOT (the server's --root), then runs every check once
on the legacy revision (initialize, 2025-11-25: the server asks through
`elicitation/create`) and once on the modern one (server/discover, 2026-07-28: it asks
through `input_required` rounds the SDK answers): image and audio results with their
exact bytes; resources (list over all pages, templates, reads of a root file, a root PNG,
the plugin's test://static-text and a template; on the legacy revision a subscription to
a file, told of its creation); prompts (with arguments, with an image, with an embedded
resource); a plugin's question answered with accept (the content reaches the result) and
with decline (and cancel), an answer outside the schema refused, every enum form;
--confirm's approval accepted (the file is written) and declined (a tool error, nothing
written). Tasks: 2.x has no client task API (tasks left the core protocol
in 2026-07-28, and its `send_request` checks a tools/call answer as a CallToolResult, so a
task-augmented call cannot go through it): this says so and leaves tasks to the 1.x
client (rich_sdk1.py). Prints one line per check; exits 1 on the first mismatch.
"""

import base64
import json
import os
import sys
import warnings

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters

PIXEL_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
    "0000000c49444154789c63f8cfc0000003010100c9fe92ef0000000049454e44ae426082"
)
# The plugin's WAV: 8 silent 16-bit mono samples at 8 kHz.
SILENCE_WAV = bytes.fromhex("524946463400000057415645666d74201000000001000100401f0000803e0000020010006461746110000000") + bytes(16)
NOTES = "notes from the root\nsecond line\n"
STATIC_TEXT = "This is the content of the static text resource."
# resources/subscribe warns that 2026-07-28 replaced it: it is checked on 2025-11-25 only.
warnings.filterwarnings("ignore", message="resources/(un)?subscribe is removed as of 2026-07-28")
REVISION = {"legacy": "2025-11-25", "auto": "2026-07-28"}


def check(condition, what):
    if not condition:
        print(f"FAIL {what}", flush=True)
        # Not sys.exit: inside the SDK's task groups that is an exception group's traceback.
        os._exit(1)
    print(f"ok   {what}", flush=True)


def texts(result):
    return [block.text for block in result.content if block.type == "text"]


class User:
    """The person behind the client: answers the server's questions as told, records them."""

    def __init__(self):
        self.answer = None
        self.asked = []

    async def __call__(self, context, params):
        self.asked.append(params)
        if self.answer is None:
            return types.ElicitResult(action="decline")
        if self.answer == "cancel":
            return types.ElicitResult(action="cancel")
        return types.ElicitResult(action="accept", content=self.answer)


async def rich_content(client, era):
    result = await client.call_tool("test_image_content", {})
    check(not result.is_error and len(result.content) == 1, f"{era}: test_image_content gives one block")
    image = result.content[0]
    check(isinstance(image, types.ImageContent), f"{era}: the block is an ImageContent ({type(image).__name__})")
    check(image.mime_type == "image/png", f"{era}: image mimeType {image.mime_type}")
    check(base64.b64decode(image.data, validate=True) == PIXEL_PNG, f"{era}: image data decodes to the plugin's 69-byte PNG")
    (audio,) = (await client.call_tool("test_audio_content", {})).content
    check(isinstance(audio, types.AudioContent) and audio.mime_type == "audio/wav", f"{era}: test_audio_content gives an AudioContent, audio/wav")
    check(base64.b64decode(audio.data, validate=True) == SILENCE_WAV, f"{era}: its data decodes to the plugin's 60-byte WAV")


async def all_pages(list_page, items):
    """Every page of a paginated list, following nextCursor (bounded: 10 pages)."""
    found, cursor = [], None
    for _ in range(10):
        page = await list_page(cursor=cursor)
        found.extend(getattr(page, items))
        cursor = page.next_cursor
        if cursor is None:
            return found
    check(False, f"{items}: more than 10 pages")


async def resources(client, era):
    # The root's files come first, then the plugin's resources (a page of their own).
    listed = {r.uri: r for r in await all_pages(client.list_resources, "resources")}
    expected = ["file:///notes.txt", "file:///pixel.png", "test://static-binary", "test://static-text"]
    check(sorted(listed) == expected, f"{era}: resources/list is exactly {expected} ({sorted(listed)})")
    check(listed["file:///notes.txt"].mime_type == "text/plain", f"{era}: notes.txt mimeType {listed['file:///notes.txt'].mime_type}")
    check(listed["file:///notes.txt"].size == len(NOTES), f"{era}: notes.txt size {listed['file:///notes.txt'].size}")
    check(listed["file:///pixel.png"].mime_type == "image/png", f"{era}: pixel.png mimeType {listed['file:///pixel.png'].mime_type}")
    check(listed["test://static-text"].mime_type == "text/plain", f"{era}: test://static-text mimeType")
    templates = sorted(t.uri_template for t in await all_pages(client.list_resource_templates, "resource_templates"))
    check(templates == ["file:///{path}", "test://template/{id}/data"], f"{era}: resources/templates/list {templates}")

    (notes,) = (await client.read_resource("file:///notes.txt")).contents
    check(isinstance(notes, types.TextResourceContents) and notes.text == NOTES, f"{era}: read file:///notes.txt gives its text")
    check(notes.mime_type == "text/plain", f"{era}: read file:///notes.txt mimeType {notes.mime_type}")
    (pixel,) = (await client.read_resource("file:///pixel.png")).contents
    check(isinstance(pixel, types.BlobResourceContents), f"{era}: read file:///pixel.png gives a blob")
    check(base64.b64decode(pixel.blob) == PIXEL_PNG and pixel.mime_type == "image/png", f"{era}: the blob is the PNG's bytes, image/png")
    (static,) = (await client.read_resource("test://static-text")).contents
    check(static.text == STATIC_TEXT and static.mime_type == "text/plain", f"{era}: read test://static-text gives the plugin's text")
    (data,) = (await client.read_resource("test://template/42/data")).contents
    check(json.loads(data.text) == {"id": "42", "templateTest": True, "data": "Data for ID: 42"}, f"{era}: read test://template/42/data")


async def prompts(client, era):
    names = sorted(p.name for p in await all_pages(client.list_prompts, "prompts"))
    expected = ["test_prompt_with_arguments", "test_prompt_with_embedded_resource", "test_prompt_with_image", "test_simple_prompt"]
    check(names == expected, f"{era}: prompts/list {names}")
    got = await client.get_prompt("test_prompt_with_arguments", {"arg1": "alpha", "arg2": "beta two"})
    check(len(got.messages) == 1 and got.messages[0].role == "user", f"{era}: prompts/get gives one user message")
    content = got.messages[0].content
    check(content.type == "text" and content.text == "Prompt with arguments: arg1='alpha', arg2='beta two'", f"{era}: the prompt's text carries both arguments ({content.text!r})")
    got = await client.get_prompt("test_prompt_with_image")
    first, second = (m.content for m in got.messages)
    check(isinstance(first, types.ImageContent) and first.mime_type == "image/png" and base64.b64decode(first.data) == PIXEL_PNG, f"{era}: test_prompt_with_image: an ImageContent with the PNG's bytes")
    check(second.type == "text" and second.text == "Please analyze the image above.", f"{era}: then its text")
    got = await client.get_prompt("test_prompt_with_embedded_resource", {"resourceUri": "test://chosen"})
    embedded = got.messages[0].content
    check(isinstance(embedded, types.EmbeddedResource) and embedded.resource.uri == "test://chosen", f"{era}: test_prompt_with_embedded_resource: an EmbeddedResource at the given URI")
    check(embedded.resource.text == "Embedded resource content for testing." and embedded.resource.mime_type == "text/plain", f"{era}: with its text, text/plain")


async def elicitation(client, user, era):
    user.answer = {"username": "ada", "email": "ada@example.com"}
    user.asked.clear()
    result = await client.call_tool("test_elicitation", {"message": "Who is there?"})
    check(len(user.asked) == 1 and user.asked[0].message == "Who is there?", f"{era}: the plugin's question reached the user once")
    schema = user.asked[0].requested_schema
    check(sorted(schema["properties"]) == ["email", "username"] and sorted(schema["required"]) == ["email", "username"], f"{era}: with its schema (username, email; both required)")
    check(texts(result) == ['User response: action=accept, content={"email":"ada@example.com","username":"ada"}'], f"{era}: accept: the answer reaches the tool's result {texts(result)}")
    user.answer = None
    result = await client.call_tool("test_elicitation", {"message": "Still there?"})
    check(texts(result) == ["User response: action=decline, content={}"], f"{era}: decline: the tool sees the decline {texts(result)}")
    user.answer = {"untitledSingle": "option2", "titledSingle": "value3", "legacyEnum": "opt1", "untitledMulti": ["option1", "option3"], "titledMulti": ["value2"]}
    result = await client.call_tool("test_elicitation_sep1330_enums", {})
    check(texts(result) == ['Elicitation completed: action=accept, content={"legacyEnum":"opt1","titledMulti":["value2"],"titledSingle":"value3","untitledMulti":["option1","option3"],"untitledSingle":"option2"}'], f"{era}: every enum form (single, titled, legacy enumNames, multi) answered {texts(result)}")
    user.answer = "cancel"
    result = await client.call_tool("test_elicitation", {"message": "Anyone?"})
    check(texts(result) == ["User response: action=decline, content={}"], f"{era}: cancel: the tool hears no, as for decline {texts(result)}")
    user.answer = {"username": "ada"}
    result = await client.call_tool("test_elicitation", {"message": "Who?"})
    check(texts(result) == ['test_elicitation: could not ask the user: the answer does not match the question\'s schema: the required field "email" is missing'], f"{era}: an answer outside the schema never reaches the tool as content {texts(result)}")


async def approval(client, user, root, era, tag):
    path = os.path.join(root, f"approved-{tag}.txt")
    user.answer = {}
    user.asked.clear()
    result = await client.call_tool("write_file", {"path": f"approved-{tag}.txt", "content": "yes"})
    check(len(user.asked) == 1 and "write_file" in user.asked[0].message, f"{era}: --confirm write_file asks the user first")
    check(not result.is_error and open(path).read() == "yes", f"{era}: accepted: the file is written")
    os.remove(path)
    user.answer = None
    result = await client.call_tool("write_file", {"path": f"declined-{tag}.txt", "content": "no"})
    check(result.is_error and texts(result) and "write_file: not run: the user declined this call" in texts(result)[0], f"{era}: declined: a tool error {texts(result)}")
    check(not os.path.exists(os.path.join(root, f"declined-{tag}.txt")), f"{era}: declined: nothing written")


class Updates:
    """The `notifications/resources/updated` URIs the server sent."""

    def __init__(self):
        self.uris = []
        self.arrived = anyio.Event()

    async def __call__(self, message):
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(message.params.uri)
            self.arrived.set()


async def subscription(client, updates, root, era):
    """resources/subscribe (--watch, legacy only) to a file that does not exist yet, then
    created: one notifications/resources/updated for it."""
    caps = client.server_capabilities.resources
    check(caps is not None and caps.subscribe is True, f"{era}: resources.subscribe declared (--watch)")
    await client.subscribe_resource("file:///watched.txt")
    # The server's first poll (each second) sets what later ones compare with: give it
    # time, also on a loaded machine.
    await anyio.sleep(2)
    path = os.path.join(root, "watched.txt")
    with open(path, "w") as f:
        f.write("now here")
    with anyio.move_on_after(10):
        await updates.arrived.wait()
    check(updates.uris == ["file:///watched.txt"], f"{era}: creating the subscribed file sends one notifications/resources/updated ({updates.uris})")
    await client.unsubscribe_resource("file:///watched.txt")
    os.remove(path)


async def run(server, root, mode, transport):
    user = User()
    updates = Updates()
    async with Client(server, mode=mode, elicitation_callback=user, message_handler=updates) as client:
        era = f"sdk 2.x {transport} {mode}"
        check(client.protocol_version == REVISION[mode], f"{era}: protocol {client.protocol_version}")
        await rich_content(client, era)
        await resources(client, era)
        await prompts(client, era)
        await elicitation(client, user, era)
        await approval(client, user, root, era, f"{transport}-{mode}")
        if mode == "legacy" and transport == "http":
            await subscription(client, updates, root, era)
            print(f"SKIPPING {era}: tasks: mcp 2.x has no client task API (tasks are left to the 1.x client)", flush=True)


async def main():
    url, root = sys.argv[1], sys.argv[2]
    stdio = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
    with open(os.path.join(root, "notes.txt"), "w") as f:
        f.write(NOTES)
    with open(os.path.join(root, "pixel.png"), "wb") as f:
        f.write(PIXEL_PNG)
    for mode in ("legacy", "auto"):
        await run(url, root, mode, "http")
    if stdio:
        # The same over stdio (`host run`): the question goes out on stdout there.
        # Its log (stderr, passed through by the SDK) at warn: only what went wrong.
        server = StdioServerParameters(command=stdio[0], args=stdio[1:], env={"RUST_LOG": "warn"})
        for mode in ("legacy", "auto"):
            await run(server, root, mode, "stdio")
    print("python sdk 2.x: all checks passed", flush=True)


anyio.run(main)
