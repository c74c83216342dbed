"""The MCP Python SDK 1.x (its `ClientSession` over `streamable_http_client`) against `host
serve --http` with a root, the conformance plugin (plugins/conformance, its manifest,
--plugin-ask) and --confirm write_file: the same checks as rich_sdk2.py, on the newest
revision 1.x speaks (2025-11-25, initialize; the server asks through `elicitation/create`),
plus a task: `session.experimental.call_tool_as_task`, polled with `poll_task` to its
result (`get_task_result`), then `list_tasks` and a refused `cancel_task` of the ended task;
and a task whose tool asks its user (`input_required`; the question comes through the
client's elicitation callback, tied to the task, and the answer reaches the result).

    python rich_sdk1.py URL ROOT [--expect-tasks]

Without --expect-tasks, a server that does not declare the `tasks` capability gets a
SKIPPING line instead of the task checks; with it, that is a failure. Prints one line per
check; exits 1 on the first mismatch.
"""

import base64
import json
import os
import sys
import warnings

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError

# call_tool_as_task and friends warn that 2.x drops them; that is why this is the 1.x test.
warnings.filterwarnings("ignore", message=".*experimental tasks API is deprecated.*")

PIXEL_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
    "0000000c49444154789c63f8cfc0000003010100c9fe92ef0000000049454e44ae426082"
)
NOTES = "notes from the root\nsecond line\n"
STATIC_TEXT = "This is the content of the static text resource."
ERA = "sdk 1.x"
# The tool run as a task (about 240 ms) and its result.
TASK_TOOL = "test_tool_with_progress"
TASK_RESULT = "Reported progress 0, 50 and 100 of 100."


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


async def all_pages(list_page, items):
    """Every page of a paginated list, following nextCursor (bounded: 10 pages)."""
    found, cursor = [], None
    for _ in range(10):
        page = await list_page(params=types.PaginatedRequestParams(cursor=cursor))
        found.extend(getattr(page, items))
        cursor = page.nextCursor
        if cursor is None:
            return found
    check(False, f"{items}: more than 10 pages")


async def rich_content(session):
    result = await session.call_tool("test_image_content", {})
    check(not result.isError and len(result.content) == 1, f"{ERA}: test_image_content gives one block")
    image = result.content[0]
    check(isinstance(image, types.ImageContent), f"{ERA}: the block is an ImageContent ({type(image).__name__})")
    check(image.mimeType == "image/png", f"{ERA}: image mimeType {image.mimeType}")
    check(base64.b64decode(image.data, validate=True) == PIXEL_PNG, f"{ERA}: image data decodes to the plugin's 69-byte PNG")


async def resources(session):
    # The root's files come first, then the plugin's resources (a page of their own).
    listed = {str(r.uri): r for r in await all_pages(session.list_resources, "resources")}
    expected = ["file:///notes.txt", "file:///pixel.png", "test://static-binary", "test://static-text"]
    check(sorted(listed) == expected, f"{ERA}: resources/list is exactly {expected} ({sorted(listed)})")
    notes_entry = listed["file:///notes.txt"]
    check(notes_entry.mimeType == "text/plain" and notes_entry.size == len(NOTES), f"{ERA}: notes.txt text/plain, {notes_entry.size} bytes")
    check(listed["file:///pixel.png"].mimeType == "image/png", f"{ERA}: pixel.png mimeType {listed['file:///pixel.png'].mimeType}")
    check(listed["test://static-text"].mimeType == "text/plain", f"{ERA}: test://static-text mimeType")
    templates = sorted(t.uriTemplate for t in await all_pages(session.list_resource_templates, "resourceTemplates"))
    check(templates == ["file:///{path}", "test://template/{id}/data"], f"{ERA}: resources/templates/list {templates}")

    (notes,) = (await session.read_resource("file:///notes.txt")).contents
    check(isinstance(notes, types.TextResourceContents) and notes.text == NOTES, f"{ERA}: read file:///notes.txt gives its text")
    check(notes.mimeType == "text/plain", f"{ERA}: read file:///notes.txt mimeType {notes.mimeType}")
    (pixel,) = (await session.read_resource("file:///pixel.png")).contents
    check(isinstance(pixel, types.BlobResourceContents), f"{ERA}: read file:///pixel.png gives a blob")
    check(base64.b64decode(pixel.blob) == PIXEL_PNG and pixel.mimeType == "image/png", f"{ERA}: the blob is the PNG's bytes, image/png")
    (static,) = (await session.read_resource("test://static-text")).contents
    check(static.text == STATIC_TEXT and static.mimeType == "text/plain", f"{ERA}: read test://static-text gives the plugin's text")
    (data,) = (await session.read_resource("test://template/42/data")).contents
    check(json.loads(data.text) == {"id": "42", "templateTest": True, "data": "Data for ID: 42"}, f"{ERA}: read test://template/42/data")


async def prompts(session):
    names = sorted(p.name for p in await all_pages(session.list_prompts, "prompts"))
    expected = ["test_prompt_with_arguments", "test_prompt_with_embedded_resource", "test_prompt_with_image", "test_simple_prompt"]
    check(names == expected, f"{ERA}: prompts/list {names}")
    got = await session.get_prompt("test_prompt_with_arguments", {"arg1": "alpha", "arg2": "beta two"})
    check(len(got.messages) == 1 and got.messages[0].role == "user", f"{ERA}: prompts/get gives one user message")
    content = got.messages[0].content
    check(content.type == "text" and content.text == "Prompt with arguments: arg1='alpha', arg2='beta two'", f"{ERA}: the prompt's text carries both arguments ({content.text!r})")


async def elicitation(session, user):
    user.answer = {"username": "ada", "email": "ada@example.com"}
    user.asked.clear()
    result = await session.call_tool("test_elicitation", {"message": "Who is there?"})
    check(len(user.asked) == 1 and user.asked[0].message == "Who is there?", f"{ERA}: the plugin's question reached the user once")
    schema = user.asked[0].requestedSchema
    check(sorted(schema["properties"]) == ["email", "username"] and sorted(schema["required"]) == ["email", "username"], f"{ERA}: with its schema (username, email; both required)")
    check(texts(result) == ['User response: action=accept, content={"email":"ada@example.com","username":"ada"}'], f"{ERA}: accept: the answer reaches the tool's result {texts(result)}")
    user.answer = None
    result = await session.call_tool("test_elicitation", {"message": "Still there?"})
    check(texts(result) == ["User response: action=decline, content={}"], f"{ERA}: decline: the tool sees the decline {texts(result)}")
    user.answer = "cancel"
    result = await session.call_tool("test_elicitation", {"message": "Anyone?"})
    check(texts(result) == ["User response: action=decline, content={}"], f"{ERA}: cancel: the tool hears no, as for decline {texts(result)}")
    user.answer = {"username": "ada"}
    result = await session.call_tool("test_elicitation", {"message": "Who?"})
    check(texts(result) == ['test_elicitation: could not ask the user: the answer does not match the question\'s schema: the required field "email" is missing'], f"{ERA}: an answer outside the schema never reaches the tool as content {texts(result)}")


async def approval(session, user, root):
    path = os.path.join(root, "approved-sdk1.txt")
    user.answer = {}
    user.asked.clear()
    result = await session.call_tool("write_file", {"path": "approved-sdk1.txt", "content": "yes"})
    check(len(user.asked) == 1 and "write_file" in user.asked[0].message, f"{ERA}: --confirm write_file asks the user first")
    check(not result.isError and open(path).read() == "yes", f"{ERA}: accepted: the file is written")
    os.remove(path)
    user.answer = None
    result = await session.call_tool("write_file", {"path": "declined-sdk1.txt", "content": "no"})
    check(result.isError and texts(result) and "write_file: not run: the user declined this call" in texts(result)[0], f"{ERA}: declined: a tool error {texts(result)}")
    check(not os.path.exists(os.path.join(root, "declined-sdk1.txt")), f"{ERA}: declined: nothing written")


async def tasks(session, init, expect_tasks):
    if init.capabilities.tasks is None:
        if expect_tasks:
            check(False, f"{ERA}: the server declares the tasks capability (--expect-tasks: this host has the task flags)")
        print(f"SKIPPING {ERA}: tasks: the server does not declare the tasks capability", flush=True)
        return
    caps = init.capabilities.tasks
    check(caps.requests is not None and caps.requests.tools is not None and caps.requests.tools.call is not None, f"{ERA}: tasks capability covers tools/call")
    tools = {t.name: t for t in (await session.list_tools()).tools}
    execution = tools[TASK_TOOL].execution
    check(execution is not None and execution.taskSupport == "optional", f"{ERA}: {TASK_TOOL} says execution.taskSupport optional")
    created = await session.experimental.call_tool_as_task(TASK_TOOL, {}, ttl=60000)
    task_id = created.task.taskId
    check(created.task.status == "working" and len(task_id) >= 32, f"{ERA}: tools/call with task answers at once: working, id {task_id}")
    statuses = []
    with anyio.fail_after(20):
        async for status in session.experimental.poll_task(task_id):
            statuses.append(status.status)
    check(statuses[-1] == "completed" and set(statuses[:-1]) <= {"working"}, f"{ERA}: tasks/get polled to completed ({statuses})")
    result = await session.experimental.get_task_result(task_id, types.CallToolResult)
    check(not result.isError and texts(result) == [TASK_RESULT], f"{ERA}: tasks/result gives the call's own result {texts(result)}")
    listed = {t.taskId: t.status for t in (await session.experimental.list_tasks()).tasks}
    check(listed.get(task_id) == "completed", f"{ERA}: tasks/list holds the task, completed")
    try:
        await session.experimental.cancel_task(task_id)
        check(False, f"{ERA}: tasks/cancel of an ended task is refused")
    except McpError as e:
        check(e.error.code == -32602, f"{ERA}: tasks/cancel of an ended task is refused with -32602 ({e.error.message})")


async def task_asks(session, user):
    """A tool run as a task asks its user: the question (tied to the task) reaches the
    user through the client, the task is working or input_required meanwhile, and the
    answer reaches the tool's result."""
    user.answer = {"username": "ada", "email": "ada@example.com"}
    user.asked.clear()
    created = await session.experimental.call_tool_as_task("test_elicitation", {"message": "Who runs this task?"}, ttl=60000)
    task_id = created.task.taskId
    statuses = []
    with anyio.fail_after(20):
        async for status in session.experimental.poll_task(task_id):
            statuses.append(status.status)
            if status.status == "input_required":
                # MCP: the requestor calls tasks/result, through which the question comes.
                break
    check(set(statuses) <= {"working", "input_required", "completed"}, f"{ERA}: a task that asks is working or input_required until it ends ({statuses})")
    with anyio.fail_after(20):
        result = await session.experimental.get_task_result(task_id, types.CallToolResult)
    check(len(user.asked) == 1 and user.asked[0].message == "Who runs this task?", f"{ERA}: the task's question reached the user once")
    meta = user.asked[0].meta
    related = meta.model_dump(by_alias=True).get("io.modelcontextprotocol/related-task", {}) if meta is not None else {}
    check(related.get("taskId") == task_id, f"{ERA}: the question names its task in _meta ({related})")
    check(texts(result) == ['User response: action=accept, content={"email":"ada@example.com","username":"ada"}'], f"{ERA}: the answer reaches the task's result {texts(result)}")
    got = await session.experimental.get_task(task_id)
    check(got.status == "completed", f"{ERA}: the task completed ({got.status})")


async def main():
    url, root = sys.argv[1], sys.argv[2]
    expect_tasks = "--expect-tasks" in sys.argv[3:]
    with open(os.path.join(root, "notes.txt"), "w") as f:
        f.write(NOTES)
    with open(os.path.join(root, "pixel.png"), "wb") as f:
        f.write(PIXEL_PNG)
    user = User()
    async with streamable_http_client(url) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=user) as session:
            init = await session.initialize()
            check(init.protocolVersion == "2025-11-25", f"{ERA}: protocol {init.protocolVersion}")
            await rich_content(session)
            await resources(session)
            await prompts(session)
            await elicitation(session, user)
            await approval(session, user, root)
            await tasks(session, init, expect_tasks)
            if init.capabilities.tasks is not None:
                await task_asks(session, user)
    print("python sdk 1.x: all checks passed", flush=True)


if __name__ == "__main__":
    anyio.run(main)
