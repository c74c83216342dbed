import anyio, mcp_types as types
from mcp import Client
answers = []
async def cb(ctx, params):
    print("ASKED:", params.message[:90].replace("\n"," "))
    return answers.pop(0)
async def main():
    for mode in ("legacy", "auto"):
      async with Client("http://127.0.0.1:36661/mcp", mode=mode, elicitation_callback=cb) as c:
        answers[:] = [types.ElicitResult(action="accept", content={}), types.ElicitResult(action="accept", content={"username": "u", "email": "e@x.org"})]
        r = await c.call_tool("test_elicitation", {"message": "second"})
        print(mode, r.content[0].text, r.is_error, "left", answers)
        answers[:] = [types.ElicitResult(action="accept", content={}), types.ElicitResult(action="decline")]
        r = await c.call_tool("test_elicitation", {"message": "second"})
        print(mode, r.content[0].text, r.is_error, "left", answers)
anyio.run(main)
