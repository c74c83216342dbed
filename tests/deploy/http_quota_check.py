"""Outgoing plugin HTTP requests per minute counted across processes: two
`host serve --http --stateless --policy ... --state redis://...` processes sharing one
Redis, the hostile_http plugin granted a loopback HTTP server of this script's; run by
scripts/state-check after quota_check.py, on the same Redis (its pid in WORK/redis.pid,
which this check stops at its end):

1. alice's profile allows 4 requests a minute: 3 through one process all go out, then
   of 3 through the other only 1 (the per-process bucket alone would let all 3 out);
   bob (no quota) gets all his;
2. Redis stopped: alice's requests are all refused (fail closed) while her call itself
   is served (she has no calls-per-minute quota); bob's requests go out.

Standard library only; loopback only; every wait is bounded."""

import argparse
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from processes import free_port, stop_all  # noqa: E402
from quota_check import ALICE, BOB, fail, post, stop_redis, wait_port  # noqa: E402

LIMIT = 4
POLICY = f"""
[[principal]]
token = "alice"
profile = "limited"

[profile.limited]
files = "none"
quota = {{ http_requests_per_minute = {LIMIT} }}

[profile.default]
files = "none"
"""


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args):
        pass


def flood(port, token, url, count):
    """The hostile_http plugin's flood tool: (answered, errors)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "flood", "arguments": {"url": url, "count": count},
                       "_meta": meta}}
    status, _, answer = post(port, body, token, method="tools/call", name="flood")
    result = (answer or {}).get("result", {})
    if status != 200 or result.get("isError") is not False:
        fail(f"flood on :{port}: {status} {answer}")
    got = json.loads(result["content"][0]["text"])
    return got["answered"], got["errors"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--redis-port", type=int, required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--plugin", required=True, help="hostile_http.wasm")
    args = parser.parse_args()
    work = args.work
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{web.server_address[1]}"
    url = origin + "/x"
    plugins = os.path.join(work, "http-plugins")
    os.makedirs(plugins, exist_ok=True)
    shutil.copy(args.plugin, os.path.join(plugins, "hostile_http.wasm"))
    with open(os.path.join(plugins, "hostile_http.toml"), "w") as f:
        f.write(f'[grants]\nhttp = ["{origin}"]\n')
    tokens = os.path.join(work, "http-tokens")
    with open(tokens, "w") as f:
        f.write(f"{ALICE} alice\n{BOB} bob\n")
    os.chmod(tokens, 0o600)
    policy = os.path.join(work, "http-policy.toml")
    with open(policy, "w") as f:
        f.write(POLICY)
    os.makedirs(os.path.join(work, "http-tenants"), exist_ok=True)
    processes, ports = [], []
    try:
        for n in range(2):
            port = free_port()
            log = os.path.join(work, f"http-host{n}.log")
            process = subprocess.Popen(
                [args.host, "serve", "--http", f"127.0.0.1:{port}", "--stateless",
                 "--root", os.path.join(work, "root"), "--plugins", plugins,
                 "--cache-dir", os.path.join(work, "cache"),
                 "--plugin-http", origin, "--plugin-http-allow-net", "127.0.0.1",
                 "--auth-token-file", tokens, "--policy", policy,
                 "--session-root-template", os.path.join(work, "http-tenants", "{client}"),
                 "--state", f"redis://127.0.0.1:{args.redis_port}/0",
                 "--state-password-file", os.path.join(work, "redis.pass")],
                stdout=open(log, "w"), stderr=subprocess.STDOUT)
            processes.append(process)
            wait_port(port, process, f"host {n} with a plugin HTTP quota", log)
            ports.append(port)

        # 1. Within one fixed minute of the Redis clock (this machine's).
        into = time.time() % 60
        if into > 40:
            time.sleep(60 - into + 0.2)
        first, errors = flood(ports[0], ALICE, url, 3)
        if (first, errors) != (3, []):
            fail(f"alice's first 3 requests through :{ports[0]}: {first} answered, {errors}")
        second, errors = flood(ports[1], ALICE, url, 3)
        if second != LIMIT - 3 or not errors:
            fail(f"alice's next 3 through :{ports[1]}: {second} answered (expected "
                 f"{LIMIT - 3}), {errors}")
        log = open(os.path.join(work, "http-host1.log")).read()
        if "refused: quota exceeded: http_requests_per_minute (limit 4)" not in log:
            fail(f"the refusal is not logged on :{ports[1]}: {log[-2000:]}")
        bob, errors = flood(ports[1], BOB, url, 3)
        if (bob, errors) != (3, []):
            fail(f"bob through :{ports[1]}: {bob} answered, {errors}")
        print(f"state-check: alice's plugin HTTP quota of {LIMIT}/min held across 2 processes: "
              f"3 + {second} requests went out of 6; bob's 3 went out", file=sys.stderr)

        # 2. Redis stopped: alice's requests refused (fail closed), bob's go out.
        stop_redis(int(open(os.path.join(work, "redis.pid")).read()))
        cut, errors = flood(ports[0], ALICE, url, 2)
        if cut != 0 or not errors:
            fail(f"alice's requests with Redis down: {cut} answered, {errors}")
        log = open(os.path.join(work, "http-host0.log")).read()
        if "the quota state server cannot count this principal's quota now" not in log:
            fail(f"the fail-closed refusal is not logged: {log[-2000:]}")
        bob, errors = flood(ports[0], BOB, url, 2)
        if (bob, errors) != (2, []):
            fail(f"bob with Redis down: {bob} answered, {errors}")
        print("state-check: Redis down: alice's plugin HTTP requests refused (fail closed), "
              "her call served; bob's requests went out", file=sys.stderr)
    finally:
        web.shutdown()
        stop_all(processes)


if __name__ == "__main__":
    main()
