#!/usr/bin/env python3
"""Scale-out throughput (docs/deploy.md "Scale-out: tasks shared through Redis").

1. greet through HAProxy (round robin, kept-alive connections) in front of 1, then 3
   `host serve --http --stateless` processes: calls a second from CLIENTS threads for
   SECONDS each;
2. task create + fetch: a 2026-07-28 tools/call of greet as a task, then tasks/get
   until it is completed (its result inline), one after another, on one process
   keeping tasks in memory, then on one given `--state redis://...`: tasks a second
   and the p50 of one create + fetch.

Needs haproxy and redis-server: without one, prints `SKIP <why>` and exits 0 (figure 18
of the benchmark suite, `scripts/bench scaleout`, then shows the figure skipped).
Prints `FIGURES greet_1=... greet_3=... tasks_memory=... tasks_redis=...
task_p50_memory_us=... task_p50_redis_us=...` last.

Usage: scripts/scaleout-bench.py HOST_BINARY GREET_WASM. Loopback only; every loop
is bounded.
"""

import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "deploy"))
from processes import free_port, start_haproxy, stop_all, wait_port  # noqa: E402

CLIENTS = 8
SECONDS = 3.0
TASKS = 200


def wait_started(port, process, what):
    """Waits for `process` to listen on `port`; stops the run when it does not."""
    if not wait_port(port, process):
        sys.exit(f"scaleout-bench: {what} did not start")


def start_host(host, work, plugins, state=None):
    command = [host, "serve", "--http", "127.0.0.1:0", "--stateless", "--plugins", plugins,
               "--cache-dir", os.path.join(work, "cache"), "--root", os.path.join(work, "root"),
               "--max-in-flight", "256", "--max-tasks", "1024", "--max-tasks-per-session", "512"]
    if state:
        command += ["--state", state]
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "RUST_LOG": "warn,toolhost_mcp=info"})
    deadline = time.time() + 60
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        found = re.search(r"Streamable HTTP on http://([0-9.]+):(\d+)", line)
        if found:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, int(found.group(2))
    proc.kill()
    sys.exit("scaleout-bench: a host did not start")


def post(conn, message, headers):
    conn.request("POST", "/mcp", json.dumps(message), headers)
    response = conn.getresponse()
    body = response.read()
    if response.status != 200:
        sys.exit(f"scaleout-bench: {message.get('method')} answered {response.status}: {body[:200]!r}")
    text = body.decode()
    for line in text.splitlines():
        if line.startswith("data: "):
            text = line[len("data: "):]
            break
    return json.loads(text)


GREET = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
         "params": {"name": "greet", "arguments": {"name": "bench"}}}
LEGACY = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
          "MCP-Protocol-Version": "2025-06-18"}


def greet_rate(port):
    """Calls a second through `port` from CLIENTS kept-alive connections."""
    counts = []
    stop_at = time.monotonic() + SECONDS

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        done = 0
        while time.monotonic() < stop_at and done < 10_000_000:
            answer = post(conn, GREET, LEGACY)
            if answer.get("result", {}).get("isError") is not False:
                sys.exit(f"scaleout-bench: greet failed: {answer}")
            done += 1
        counts.append(done)
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.monotonic() - started)


META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}}}


def modern(method, name):
    return {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name}


def task_rate(port):
    """(tasks a second, p50 µs) of TASKS creates + fetches, one after another."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    times = []
    started = time.monotonic()
    for _ in range(TASKS):
        begun = time.perf_counter()
        created = post(conn, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "greet", "arguments": {"name": "bench"}, "_meta": META}},
            modern("tools/call", "greet"))
        task = created.get("result", {}).get("taskId")
        if not task:
            sys.exit(f"scaleout-bench: no task: {created}")
        for _ in range(10_000):
            got = post(conn, {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {
                "taskId": task, "_meta": META}}, modern("tasks/get", task))
            status = got.get("result", {}).get("status")
            if status == "completed":
                break
            if status != "working":
                sys.exit(f"scaleout-bench: task {task}: {got}")
        else:
            sys.exit(f"scaleout-bench: task {task} never completed")
        times.append(time.perf_counter() - begun)
    rate = TASKS / (time.monotonic() - started)
    conn.close()
    return rate, statistics.median(times) * 1e6


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: scaleout-bench.py HOST_BINARY GREET_WASM")
    host, greet = sys.argv[1], sys.argv[2]
    haproxy = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else None)
    redis = shutil.which("redis-server")
    if not haproxy:
        print("SKIP haproxy is not installed (apt-get install haproxy)")
        return
    if not redis:
        print("SKIP redis-server is not installed (apt-get install redis-server)")
        return
    processes = []
    with tempfile.TemporaryDirectory() as work:
        try:
            plugins = os.path.join(work, "plugins")
            os.makedirs(plugins)
            os.makedirs(os.path.join(work, "root"))
            os.makedirs(os.path.join(work, "cache"), mode=0o700)
            shutil.copy(greet, os.path.join(plugins, "greet.wasm"))
            with open(os.path.join(plugins, "greet.toml"), "w") as f:
                f.write('task_support = "optional"\n')
            redis_port = free_port()
            redis_proc = subprocess.Popen(
                [redis, "--bind", "127.0.0.1", "--port", str(redis_port), "--save", "",
                 "--appendonly", "no", "--dir", work],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            processes.append(redis_proc)
            wait_started(redis_port, redis_proc, "redis-server")
            hosts = []
            for _ in range(3):
                proc, port = start_host(host, work, plugins)
                processes.append(proc)
                hosts.append(port)
            figures = {}
            for n in (1, 3):
                front, proxy, _ = start_haproxy(haproxy, work, f"haproxy{n}", hosts[:n],
                                                maxconn=512)
                processes.append(proxy)
                wait_started(front, proxy, "haproxy")
                greet_rate(front)  # warm-up
                figures[f"greet_{n}"] = greet_rate(front)
                print(f"greet through HAProxy, {n} process(es), {CLIENTS} clients: "
                      f"{figures[f'greet_{n}']:.0f} calls/s")
                proxy.terminate()
                proxy.wait(timeout=10)
            memory_rate, memory_p50 = task_rate(hosts[0])
            proc, redis_host = start_host(host, work, plugins, f"redis://127.0.0.1:{redis_port}/0")
            processes.append(proc)
            redis_rate, redis_p50 = task_rate(redis_host)
            print(f"task create + fetch, in memory: {memory_rate:.0f}/s (p50 {memory_p50:.0f} µs); "
                  f"through Redis: {redis_rate:.0f}/s (p50 {redis_p50:.0f} µs)")
            print(f"FIGURES greet_1={figures['greet_1']:.1f} greet_3={figures['greet_3']:.1f} "
                  f"tasks_memory={memory_rate:.1f} tasks_redis={redis_rate:.1f} "
                  f"task_p50_memory_us={memory_p50:.0f} task_p50_redis_us={redis_p50:.0f}")
        finally:
            stop_all(processes)


if __name__ == "__main__":
    main()
