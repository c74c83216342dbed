#!/usr/bin/env python3
"""Instructions per greet call of `host serve --http` with N sessions, C calling at once.

Figure 17 (docs/benchmarks.md) times 1, 100 and 1,000 sessions calling; timings on a
shared machine are noisy, instruction counts are not. This runs the server under
`valgrind --tool=callgrind` with instrumentation off, opens the sessions (each on its
own HTTP/1.1 keep-alive connection, as the bench does), makes every session's first
calls, then switches instrumentation on (`callgrind_control -i on`) for CALLS calls
only, dumps, and prints the instructions per call.

    scripts/sessions-callgrind.py target/release/host plugins/dist/greet.wasm 100 100 5000
    scripts/sessions-callgrind.py target/release/host plugins/dist/greet.wasm 1000 1000 5000

The plugin pool is 8 slots (`--plugin-pool-memory 512MiB`): valgrind cannot reserve the
default 64 slots' address space. greet runs in one poll, so no call waits for a slot
either way. A first start under valgrind fills the compile cache, so no compilation is
counted.
Keep CALLS small enough that a session's calls come within the server's 10 s idle
timeout under valgrind (about 150-450 calls/s): a closed connection is opened again.
"""

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

GREET = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}'
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "bench", "version": "0"}}})
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})


def serve(host, plugins, cache, log, wrapper=()):
    """Starts the server; returns (process, "ip:port")."""
    args = [*wrapper, host, "serve", "--http", "127.0.0.1:0", "--plugins", plugins,
            "--cache-dir", cache, "--no-builtins", "--plugin-pool-memory", "512MiB"]
    for flag in ("--max-connections", "--max-sessions", "--max-pending-per-peer",
                 "--max-in-flight"):
        args += [flag, "1100"]
    out = open(log, "w")
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=out)
    for _ in range(600):
        found = re.search(r"Streamable HTTP on http://([0-9.:]+)", open(log).read())
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    sys.exit(f"the server did not start; see {log}")


async def post(conn, addr, body, sid=None):
    reader, writer = conn
    head = (f"POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n")
    if sid:
        head += f"Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-06-18\r\n"
    writer.write((head + "\r\n" + body).encode())
    await writer.drain()
    lines = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
    headers = dict((k.strip().lower(), v.strip())
                   for k, _, v in (line.partition(":") for line in lines[1:] if ":" in line))
    if "content-length" in headers:
        answer = await reader.readexactly(int(headers["content-length"]))
    else:
        answer = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            answer += (await reader.readexactly(size + 2))[:size]
            if size == 0:
                break
    return int(lines[0].split()[1]), headers.get("mcp-session-id"), answer


async def open_session(addr, gate):
    host, port = addr.rsplit(":", 1)
    async with gate:
        conn = await asyncio.open_connection(host, int(port))
        status, sid, _ = await post(conn, addr, INIT)
        assert status == 200 and sid, status
        status, _, _ = await post(conn, addr, INITIALIZED, sid)
        assert status == 202, status
        return [conn, sid]


async def calls(addr, sessions, callers, count):
    """`count` greet calls, `callers` at a time, each caller taking its sessions in turn."""
    host, port = addr.rsplit(":", 1)
    left = [count]

    async def caller(group):
        turn = 0
        while left[0] > 0:
            left[0] -= 1
            session = group[turn % len(group)]
            turn += 1
            try:
                status, _, answer = await post(session[0], addr, GREET % turn, session[1])
            except (ConnectionError, asyncio.IncompleteReadError):
                # Closed after 10 s idle: a new connection, once.
                session[0] = await asyncio.open_connection(host, int(port))
                status, _, answer = await post(session[0], addr, GREET % turn, session[1])
            assert status == 200 and b"Hello, Ada!" in answer, (status, answer[:200])

    await asyncio.gather(*(caller(sessions[i::callers]) for i in range(callers)))


async def measure(addr, n, callers, count, before, after):
    gate = asyncio.Semaphore(32)
    sessions = await asyncio.gather(*(open_session(addr, gate) for _ in range(n)))
    await calls(addr, sessions, n, 2 * n)
    before()
    started = time.time()
    await calls(addr, sessions, callers, count)
    took = time.time() - started
    after()
    return took


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    host, wasm, n, callers, count = sys.argv[1:3] + [int(a) for a in sys.argv[3:6]]
    work = tempfile.mkdtemp(prefix="sessions-callgrind")
    try:
        plugins, cache = os.path.join(work, "plugins"), os.path.join(work, "cache")
        os.makedirs(plugins)
        shutil.copy(wasm, plugins)
        # A first start under valgrind fills the compile cache: valgrind shows the
        # engine other CPU features than the machine does, so the code it runs is
        # compiled (and cached) under valgrind, and the optimized tier is compiled in
        # the background after the start. Wait until that is cached (at most 10 min).
        proc, addr = serve(host, plugins, cache, os.path.join(work, "warm.log"),
                           ["valgrind", "--tool=none"])
        asyncio.run(measure(addr, 1, 1, 50, lambda: None, lambda: None))
        for _ in range(3000):
            if any(f.endswith(".cwasm") for f in os.listdir(cache)):
                break
            time.sleep(0.2)
        proc.terminate()
        proc.wait()
        out = os.path.join(work, "callgrind.out")
        proc, addr = serve(host, plugins, cache, os.path.join(work, "server.log"),
                           ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                            f"--callgrind-out-file={out}"])

        def control(*args):
            subprocess.run(["callgrind_control", *args, str(proc.pid)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        took = asyncio.run(measure(addr, n, callers, count,
                                   lambda: control("-i", "on"),
                                   lambda: (control("-i", "off"), control("-d"))))
        proc.terminate()
        proc.wait()
        dump = max((f for f in os.listdir(work) if f.startswith("callgrind.out.")),
                   key=lambda f: os.path.getmtime(os.path.join(work, f)))
        totals = subprocess.run(["callgrind_annotate", os.path.join(work, dump)],
                                capture_output=True, text=True, check=True).stdout
        found = re.search(r"^\s*([\d,]+)\s.*PROGRAM TOTALS", totals, re.M)
        if not found:
            sys.exit("no totals in the callgrind dump")
        total = int(found.group(1).replace(",", ""))
        print(f"{n} sessions, {callers} calling: {count} calls in {took:.1f} s under "
              f"callgrind; {total:,} instructions, {total // count:,} per call")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
