#!/usr/bin/env python3
"""One principal at its quota does not slow another (docs/deploy.md "Policies and quotas").

Starts `host serve --http 127.0.0.1:0 --policy` with two named tokens: alice, limited to
60 calls a minute, and bob, unlimited. Measures bob's tools/call latency (read_file of a
small file, one kept-alive connection, calls one after another) alone, then while alice
floods tools/call from several threads (nearly all answered 429), in interleaved rounds.
Prints each round's p50 and the ratio of the medians; exits 1 when bob's loaded p50 is
more than 20% over his p50 alone (MISS), 0 otherwise.

Figure 16 of the benchmark suite (`scripts/bench fairness`) runs this script and reads
its last line (`FIGURES alone_us=... loaded_us=... ratio=... alice_calls=... alice_429=...`).

Usage: scripts/policy-bench.py [HOST_BINARY] (default target/release/host, else
target/debug/host). Loopback only; every loop is bounded.
"""

import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROUNDS = 5
CALLS = 300
FLOODERS = 3
# Alice's flood: at most this many requests a second in all (her quota is 60 a minute,
# so nearly all are refused with 429): at her limit, without taking every core.
FLOOD_RATE = 600

ALICE = "policy-bench-alice-0123456789"
BOB = "policy-bench-bob-0123456789ab"


def binary():
    if len(sys.argv) > 1:
        return sys.argv[1]
    for kind in ("release", "debug"):
        path = os.path.join("target", kind, "host")
        if os.path.exists(path):
            return path
    sys.exit("policy-bench: build the host first (cargo build -p host)")


def start(host, work):
    tokens = os.path.join(work, "tokens")
    with open(tokens, "w") as f:
        f.write(f"{ALICE} alice\n{BOB} bob\n")
    os.chmod(tokens, 0o600)
    base = os.path.join(work, "tenants")
    os.makedirs(os.path.join(base, "bob"))
    with open(os.path.join(base, "bob", "a.md"), "w") as f:
        f.write("hello\n")
    policy = os.path.join(work, "policy.toml")
    with open(policy, "w") as f:
        f.write(
            '[[principal]]\ntoken = "alice"\nprofile = "limited"\n'
            '[[principal]]\ntoken = "bob"\nprofile = "free"\n'
            '[profile.limited]\ntools = ["read_file"]\nquota = { calls_per_minute = 60 }\n'
            '[profile.free]\ntools = ["read_file"]\n'
        )
    proc = subprocess.Popen(
        [host, "serve", "--http", "127.0.0.1:0", "--auth-token-file", tokens,
         "--session-root-template", base + "/{client}", "--policy", policy,
         "--max-in-flight", "256"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "RUST_LOG": "warn,toolhost_mcp=info"},
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        found = re.search(r"Streamable HTTP on http://([0-9.]+):(\d+)", line)
        if found:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, found.group(1), int(found.group(2))
    proc.kill()
    sys.exit("policy-bench: the server did not start")


class Client:
    def __init__(self, addr, port, token):
        self.conn = http.client.HTTPConnection(addr, port, timeout=30)
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        reply, headers, _ = self.post({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "policy-bench", "version": "1"}}})
        self.headers["Mcp-Session-Id"] = headers["mcp-session-id"]
        self.headers["MCP-Protocol-Version"] = "2025-06-18"
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, message):
        self.conn.request("POST", "/mcp", json.dumps(message), self.headers)
        response = self.conn.getresponse()
        body = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body

    def call(self):
        return self.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                          "params": {"name": "read_file", "arguments": {"path": "a.md"}}})[0]


def measure(bob):
    times = []
    for _ in range(CALLS):
        started = time.perf_counter()
        status = bob.call()
        times.append(time.perf_counter() - started)
        if status != 200:
            sys.exit(f"policy-bench: bob's call got {status}")
    return statistics.median(times) * 1e6


def flood(addr, port, stop, counts):
    alice = Client(addr, port, ALICE)
    gap = FLOODERS / FLOOD_RATE
    sent = refused = 0
    next_at = time.perf_counter()
    while not stop.is_set() and sent < 10_000_000:
        status = alice.call()
        sent += 1
        refused += status == 429
        next_at += gap
        pause = next_at - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    counts.append((sent, refused))


def main():
    host = binary()
    with tempfile.TemporaryDirectory() as work:
        proc, addr, port = start(host, work)
        try:
            bob = Client(addr, port, BOB)
            measure(bob)  # warm up
            alone, loaded, floods = [], [], []
            for _ in range(ROUNDS):
                alone.append(measure(bob))
                stop, counts = threading.Event(), []
                threads = [threading.Thread(target=flood, args=(addr, port, stop, counts))
                           for _ in range(FLOODERS)]
                for t in threads:
                    t.start()
                time.sleep(0.3)
                loaded.append(measure(bob))
                stop.set()
                for t in threads:
                    t.join(timeout=60)
                floods.append((sum(c[0] for c in counts), sum(c[1] for c in counts)))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    for i, (a, l, (sent, refused)) in enumerate(zip(alone, loaded, floods), 1):
        print(f"round {i}: bob p50 alone {a:.0f} us, with alice flooding {l:.0f} us "
              f"(alice: {sent} calls, {refused} answered 429)")
    ratio = statistics.median(loaded) / statistics.median(alone)
    verdict = "PASS" if ratio <= 1.2 else "MISS"
    print(f"bob p50 (median of {ROUNDS} rounds): alone {statistics.median(alone):.0f} us, "
          f"with alice at her quota {statistics.median(loaded):.0f} us: {ratio:.2f}x "
          f"(target <= 1.20x): {verdict}")
    print(f"FIGURES alone_us={statistics.median(alone):.1f} loaded_us={statistics.median(loaded):.1f} "
          f"ratio={ratio:.4f} alice_calls={sum(f[0] for f in floods)} alice_429={sum(f[1] for f in floods)}",
          flush=True)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
