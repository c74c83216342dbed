"""OAuth principals through a per-principal policy, end to end: `host serve --http` with
--oauth-issuer and --policy (no static token file), two Authlib clients with different
scopes.

    python policy_check.py HOST_BINARY PLUGINS_DIR

Starts tests/oauth/issuer.py and the host on 127.0.0.1 with a policy mapping scope
`tools:files` to a profile offering the file tools and scope `tools:greet` to one
offering only the greet plugin's tool (3 calls a minute). Then, with client-credentials
tokens of `files-client` and `greet-client`:
- each one's tools/list is exactly its profile's;
- a tool the profile does not offer is refused by name (as an unknown tool), and nothing
  is written;
- each one's file tools work in its own root (the template's {client} is its sub);
- one's session id presented with the other's token: 404;
- greet-client at its calls-per-minute quota: 429 with Retry-After (1 to 20 s) naming
  the quota, while files-client's calls go on succeeding.
Prints one line per check; exits 1 on the first failure.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import httpx2

from check import check, free_port

POLICY = """
[[principal]]
scope = "tools:files"
profile = "files"

[[principal]]
scope = "tools:greet"
profile = "greeter"

[profile.files]
tools = ["read_file", "write_file", "list_files"]
files = "read-write"
quota = { calls_per_minute = 600 }

[profile.greeter]
plugins = ["greet"]
files = "none"
quota = { calls_per_minute = 3 }
"""

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "oauth-policy-check", "version": "1"}}}


def message(reply):
    """The JSON-RPC message of a reply, plain JSON or one SSE event."""
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in reply.text.splitlines() if line.startswith("data:")]
        data = [d for d in data if d]
        return json.loads(data[-1])
    return reply.json()


def strings(value):
    """Every string inside a JSON value, joined (to find a message wherever it is)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return " ".join(strings(v) for v in value.values())
    if isinstance(value, list):
        return " ".join(strings(v) for v in value)
    return ""


class Client:
    def __init__(self, http, url, token):
        self.http, self.url, self.token, self.session = http, url, token, None
        self.next_id = 10

    def post(self, body, session=None):
        headers = {**HEADERS, "authorization": f"Bearer {self.token}", "connection": "close"}
        session = session or self.session
        if session:
            headers["mcp-session-id"] = session
        return self.http.post(self.url, json=body, headers=headers)

    def open(self):
        reply = self.post(INIT)
        check(reply.status_code == 200, f"initialize: {reply.status_code} {reply.text[:200]}")
        self.session = reply.headers["mcp-session-id"]
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def request(self, method, params, session=None):
        self.next_id += 1
        return self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}, session)

    def tools(self):
        reply = self.request("tools/list", {})
        check(reply.status_code == 200, f"tools/list: {reply.status_code}")
        return sorted(tool["name"] for tool in message(reply)["result"]["tools"])

    def call(self, name, arguments):
        return self.request("tools/call", {"name": name, "arguments": arguments})


def main():
    host_binary, plugins = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    work = tempfile.mkdtemp(prefix="oauth-policy-check-")
    tenants = os.path.join(work, "tenants")
    os.mkdir(tenants)
    policy = os.path.join(work, "policy.toml")
    with open(policy, "w") as f:
        f.write(POLICY)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    issuer_proc = subprocess.Popen(
        [sys.executable, os.path.join(here, "issuer.py"), url, work],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    host = None
    try:
        line = issuer_proc.stdout.readline()
        check(line.startswith("PORT "), f"issuer listening ({line.strip()})")
        issuer = f"http://127.0.0.1:{line.split()[1]}"
        log = os.path.join(work, "host.log")
        host = subprocess.Popen(
            [host_binary, "serve", "--http", f"127.0.0.1:{port}",
             "--session-root-template", os.path.join(tenants, "{client}"),
             "--plugins", plugins, "--policy", policy,
             "--oauth-issuer", issuer, "--oauth-audience", url, "--oauth-scope", "mcp:tools"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(log, "w"),
        )
        http = httpx2.Client(timeout=30)
        for _ in range(400):
            if host.poll() is not None:
                check(False, f"host serve --http --policy with OAuth only exited {host.returncode}: {open(log).read()[-600:]}")
            try:
                http.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp")
                break
            except httpx2.TransportError:
                time.sleep(0.05)
        check(host.poll() is None, "an OAuth-only server (no token file) serves with --policy")
        run_checks(http, url, issuer, tenants)
    finally:
        if host is not None:
            host.terminate()
            host.wait(timeout=20)
        issuer_proc.stdin.close()
        issuer_proc.wait(timeout=20)


def run_checks(http, url, issuer, tenants):
    def token_for(client_id, secret, scope):
        reply = http.post(f"{issuer}/token", data={"grant_type": "client_credentials", "scope": scope, "resource": url},
                          auth=(client_id, secret))
        check(reply.status_code == 200, f"{client_id}: a token for {scope!r} ({reply.status_code})")
        return reply.json()["access_token"]

    files = Client(http, url, token_for("files-client", "files-secret", "mcp:tools tools:files"))
    greet = Client(http, url, token_for("greet-client", "greet-secret", "mcp:tools tools:greet"))
    files.open()
    greet.open()

    listed = files.tools()
    check(listed == ["list_files", "read_file", "write_file"], f"scope tools:files: tools/list is exactly {listed}")
    listed = greet.tools()
    check(listed == ["greet"], f"scope tools:greet: tools/list is exactly {listed}")

    # Tools the profile does not offer: refused by name, as unknown tools; nothing written.
    reply = greet.call("write_file", {"path": "g.txt", "content": "pwned"})
    said = strings(message(reply))
    check('unknown tool "write_file"' in said, f"greet-client's write_file refused by name: {said[:200]}")
    check(not os.path.exists(os.path.join(tenants, "greet-client", "g.txt")), "greet-client wrote nothing")
    reply = files.call("greet", {"name": "Ada"})
    said = strings(message(reply))
    check('unknown tool "greet"' in said, f"files-client's greet refused by name: {said[:200]}")

    # Each one's file tools in its own root: the template's {client} is its token's sub.
    reply = files.call("write_file", {"path": "a.txt", "content": "files-client's"})
    result = message(reply)["result"]
    check(result["isError"] is False, f"files-client's write_file: {strings(result)[:200]}")
    with open(os.path.join(tenants, "files-client", "a.txt")) as f:
        check(f.read() == "files-client's", "written in tenants/files-client (its sub)")

    # One's session id with the other's token: no such session for it.
    reply = greet.request("tools/list", {}, session=files.session)
    check(reply.status_code == 404, f"files-client's session id with greet-client's token: {reply.status_code}")
    reply = files.request("tools/list", {}, session=greet.session)
    check(reply.status_code == 404, f"greet-client's session id with files-client's token: {reply.status_code}")

    # greet-client: 3 calls a minute. Its refused write_file was an unknown tool (never
    # started), so three greets pass and the fourth is 429; files-client goes on.
    for i in range(3):
        reply = greet.call("greet", {"name": "Ada"})
        result = message(reply)["result"]
        said = "".join(block["text"] for block in result["content"] if block["type"] == "text")
        check(said == "Hello, Ada!", f"greet {i + 1} of 3: {said!r}")
    reply = greet.call("greet", {"name": "Ada"})
    retry = reply.headers.get("retry-after", "")
    check(reply.status_code == 429 and retry.isdigit() and 1 <= int(retry) <= 20,
          f"greet-client at its quota: {reply.status_code}, Retry-After {retry!r}")
    check("quota exceeded: calls_per_minute (limit 3)" in reply.text, f"the 429 names the quota: {reply.text[:200]}")
    for i in range(5):
        reply = files.call("read_file", {"path": "a.txt"})
        result = message(reply)["result"]
        if reply.status_code != 200 or result["isError"]:
            check(False, f"files-client's read {i + 1} while greet-client is at its quota: {reply.status_code}")
    check(True, "files-client's 5 calls all succeed while greet-client is refused")
    reply = greet.call("greet", {"name": "Ada"})
    check(reply.status_code == 429, f"greet-client still refused ({reply.status_code})")


if __name__ == "__main__":
    main()
