"""Three `host serve --http --policy ... --state redis://...` processes behind HAProxy
(round robin, no stickiness) sharing one Redis; run by scripts/state-check after
state_check.py, on the same Redis (its pid in WORK/redis.pid):

1. quotas across processes: alice's profile allows 10 calls a minute; 15 calls through
   the balancer (5 reach each process): exactly 10 served, 5 refused 429 (a fixed
   window: the run waits until the minute has 20 s left, so all 15 fall in one);
   bob (no quota) is served throughout;
2. sessions across processes: bob's session, opened through the balancer, is served by
   every process (the session id carries its binding to bob, signed with the shared
   --session-key-file); alice presenting it to each process gets 404;
3. list_changed across processes: every process watches the same policy file
   (--watch); a change reaches bob's session event stream on each of them, and his
   tool list on each is the new one;
4. Redis stopped: alice's calls refused 503 (fail closed), bob's served; Redis back:
   alice's calls counted again.

Standard library only; loopback only; every wait is bounded."""

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import time

from processes import free_port, start_haproxy, stop_all
from processes import wait_port as listening

ALICE = "token-alice-aaaaaaaaaaaaaaaa"
BOB = "token-bob-bbbbbbbbbbbbbbbbbbbb"
LIMIT = 10
POLICY = f"""
[[principal]]
token = "alice"
profile = "limited"

[profile.limited]
tools = ["test_simple_text"]
quota = {{ calls_per_minute = {LIMIT} }}

[profile.default]
"""
NARROWED = POLICY + 'tools = ["test_simple_text"]\n'


def fail(message):
    print(f"state-check (quotas): FAILED: {message}", file=sys.stderr)
    sys.exit(1)



def wait_port(port, process, what, log):
    if not listening(port, process):
        fail(f"{what} did not start: " + open(log).read()[-2000:])


def post(port, body, token, version="2026-07-28", session=None, method=None, name=None):
    """One POST; (status, headers, JSON answer or None)."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version,
        "Authorization": f"Bearer {token}",
    }
    if method:
        headers["Mcp-Method"] = method
    if name:
        headers["Mcp-Name"] = name
    if session:
        headers["Mcp-Session-Id"] = session
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request("POST", "/mcp", json.dumps(body), headers)
        reply = conn.getresponse()
        text = reply.read().decode()
        status, got = reply.status, {k.lower(): v for k, v in reply.getheaders()}
    finally:
        conn.close()
    for line in text.splitlines():
        if line.startswith("data: "):
            text = line[len("data: "):]
            break
    try:
        answer = json.loads(text) if text.strip() else None
    except ValueError:
        fail(f"POST on :{port}: not JSON ({status}): {text!r}")
    return status, got, answer


def modern_call(port, token):
    """A 2026-07-28 tools/call of test_simple_text standing alone (no session)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "test_simple_text", "arguments": {}, "_meta": meta}}
    return post(port, body, token, method="tools/call", name="test_simple_text")


def served(answer):
    return (answer or {}).get("result", {}).get("content", [{}])[0].get("text") == \
        "This is a simple text response for testing."


def stop_redis(pid):
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while True:
        try:
            os.kill(pid, 0)
        except OSError:
            return
        if time.monotonic() > deadline:
            fail("redis-server did not stop")
        time.sleep(0.1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--redis-port", type=int, required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--haproxy", required=True)
    args = parser.parse_args()
    work = args.work
    state = f"redis://127.0.0.1:{args.redis_port}/0"
    tokens = os.path.join(work, "quota-tokens")
    with open(tokens, "w") as f:
        f.write(f"{ALICE} alice\n{BOB} bob\n")
    os.chmod(tokens, 0o600)
    key = os.path.join(work, "session.key")
    with open(key, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    os.chmod(key, 0o600)
    policy = os.path.join(work, "policy.toml")
    with open(policy, "w") as f:
        f.write(POLICY)
    tenants = os.path.join(work, "tenants")
    os.makedirs(tenants, exist_ok=True)

    processes, ports = [], []
    try:
        for n in range(3):
            port = free_port()
            log = os.path.join(work, f"policed{n}.log")
            process = subprocess.Popen(
                [args.host, "serve", "--http", f"127.0.0.1:{port}",
                 "--root", os.path.join(work, "root"), "--plugins", os.path.join(work, "plugins"),
                 "--cache-dir", os.path.join(work, "cache"), "--plugin-ask",
                 "--auth-token-file", tokens, "--policy", policy, "--watch",
                 "--session-root-template", os.path.join(tenants, "{client}"),
                 "--session-key-file", key,
                 "--state", state, "--state-password-file", os.path.join(work, "redis.pass")],
                stdout=open(log, "w"), stderr=subprocess.STDOUT)
            processes.append(process)
            wait_port(port, process, f"policed host {n}", log)
            ports.append(port)
        front, proxy, proxy_log = start_haproxy(args.haproxy, work, "quota-haproxy", ports)
        processes.append(proxy)
        wait_port(front, proxy, "haproxy", proxy_log)

        # 1. 15 calls of alice's within one minute (fixed windows of the Redis clock,
        # the same machine's): exactly LIMIT served.
        into = time.time() % 60
        if into > 40:
            time.sleep(60 - into + 0.2)
        statuses = []
        for _ in range(15):
            status, headers, answer = modern_call(front, ALICE)
            if status == 200:
                if not served(answer):
                    fail(f"alice's call answered 200 without its result: {answer}")
            elif status == 429:
                message = answer["error"]["message"]
                if f"calls_per_minute (limit {LIMIT})" not in message or \
                        not 1 <= int(headers.get("retry-after", "0")) <= 60:
                    fail(f"alice's refusal: {headers} {answer}")
            else:
                fail(f"alice's call: {status} {answer}")
            statuses.append(status)
        if statuses.count(200) != LIMIT or statuses.count(429) != 15 - LIMIT:
            fail(f"alice's 15 calls through 3 processes: {statuses} "
                 f"(wanted exactly {LIMIT} served, {15 - LIMIT} refused)")
        for _ in range(6):
            status, _, answer = modern_call(front, BOB)
            if status != 200 or not served(answer):
                fail(f"bob (no quota) while alice is at hers: {status} {answer}")
        print(f"state-check: alice's quota of {LIMIT} calls/min held across 3 processes: "
              f"{statuses.count(200)} of 15 served, {statuses.count(429)} refused 429; "
              "bob served throughout", file=sys.stderr)

        # 2. bob's session through the balancer: every process serves it; alice
        # presenting its id gets 404 from each.
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "quota-check", "version": "1"}}}
        status, headers, answer = post(front, init, BOB, version="2025-11-25")
        session = headers.get("mcp-session-id")
        if status != 200 or not session:
            fail(f"bob's initialize through the balancer: {status} {answer}")
        status, _, _ = post(front, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                            BOB, version="2025-11-25", session=session)
        if status != 202:
            fail(f"bob's notifications/initialized: {status}")
        for i in range(6):
            body = {"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                    "params": {"name": "test_simple_text", "arguments": {}}}
            status, _, answer = post(front, body, BOB, version="2025-11-25", session=session)
            if status != 200 or not served(answer):
                fail(f"bob's session, request {i} through the balancer: {status} {answer}")
        for port in ports:
            body = {"jsonrpc": "2.0", "id": 20, "method": "tools/list"}
            status, _, answer = post(port, body, ALICE, version="2025-11-25", session=session)
            if status != 404:
                fail(f"alice presenting bob's session to :{port}: {status} {answer}")
        print("state-check: bob's session served by all 3 processes through the balancer "
              "(6 calls); alice presenting its id: 404 from each", file=sys.stderr)

        # 3. The policy changed once, on disk: each process reloads it and tells bob's
        # session on its event stream.
        streams = []
        for port in ports:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
            conn.request("GET", "/mcp", headers={
                "Accept": "text/event-stream", "MCP-Protocol-Version": "2025-11-25",
                "Authorization": f"Bearer {BOB}", "Mcp-Session-Id": session})
            reply = conn.getresponse()
            if reply.status != 200:
                fail(f"bob's event stream on :{port}: {reply.status} {reply.read()[:300]}")
            streams.append((port, conn, reply))
        time.sleep(0.5)
        with open(policy + ".new", "w") as f:
            f.write(NARROWED)
        os.replace(policy + ".new", policy)
        changed = time.monotonic()
        for port, conn, reply in streams:
            deadline = time.monotonic() + 10
            while True:
                line = reply.readline().decode()
                if "notifications/tools/list_changed" in line:
                    break
                if not line or time.monotonic() > deadline:
                    fail(f"no tools/list_changed on bob's stream on :{port} after the policy changed")
            conn.close()
        took = time.monotonic() - changed
        for port in ports:
            body = {"jsonrpc": "2.0", "id": 30, "method": "tools/list"}
            status, _, answer = post(port, body, BOB, version="2025-11-25", session=session)
            names = sorted(t["name"] for t in (answer or {}).get("result", {}).get("tools", []))
            if status != 200 or names != ["test_simple_text"]:
                fail(f"bob's tools on :{port} after the policy changed: {status} {names}")
        print(f"state-check: a policy change reached bob's session on all 3 processes "
              f"(tools/list_changed within {took:.2f} s; each process watches the file)",
              file=sys.stderr)

        # 4. Redis stopped: alice refused 503, bob served; Redis back: alice counted again.
        pid_file = os.path.join(work, "redis.pid")
        stop_redis(int(open(pid_file).read()))
        for port in ports:
            status, headers, answer = modern_call(port, ALICE)
            message = (answer or {}).get("error", {}).get("message", "")
            if status != 503 or "the quota state server cannot count" not in message \
                    or headers.get("retry-after") != "1":
                fail(f"alice with Redis down on :{port}: {status} {headers} {answer}")
            status, _, answer = modern_call(port, BOB)
            if status != 200 or not served(answer):
                fail(f"bob with Redis down on :{port}: {status} {answer}")
        print(f"state-check: Redis down: alice refused 503 ({message[:90]}...), bob served",
              file=sys.stderr)
        redis = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(args.redis_port), "--dir", work,
             "--save", "", "--appendonly", "yes", "--appendfsync", "always",
             "--requirepass", open(os.path.join(work, "redis.pass")).read().strip()],
            stdout=open(os.path.join(work, "redis3.log"), "w"), stderr=subprocess.STDOUT)
        with open(pid_file, "w") as pid:
            pid.write(str(redis.pid))
        deadline = time.monotonic() + 20
        while True:
            status, _, answer = modern_call(ports[0], ALICE)
            if status in (200, 429):
                break
            if time.monotonic() > deadline:
                fail(f"alice after Redis came back: {status} {answer}")
            time.sleep(0.2)
        print(f"state-check: Redis back: alice's calls counted again ({status})", file=sys.stderr)
    finally:
        stop_all(processes)


if __name__ == "__main__":
    main()
