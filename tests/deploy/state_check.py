"""Three `host serve --http --stateless --state redis://...` processes sharing MCP tasks
(2026-07-28 tasks extension) through one Redis; run by scripts/state-check, which
starts Redis and gives its port and pid. Standard library only; loopback only; every
wait is bounded."""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from processes import free_port, start_haproxy, stop_all, wait_port

ALICE = "token-alice-aaaaaaaaaaaaaaaa"
BOB = "token-bob-bbbbbbbbbbbbbbbbbbbb"
LEASE_S = 2
EXPIRED = "the process running it stopped"


def fail(message):
    print(f"state-check: FAILED: {message}", file=sys.stderr)
    sys.exit(1)



def meta(tasks=True, asks=False):
    caps = {}
    if tasks:
        caps["extensions"] = {"io.modelcontextprotocol/tasks": {}}
    if asks:
        caps["elicitation"] = {}
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
    }


def rpc(port, method, params, token=ALICE, tasks=True, asks=False, timeout=10):
    params = dict(params)
    params["_meta"] = meta(tasks, asks)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
        "Authorization": f"Bearer {token}",
    }
    name = params.get("name") if method == "tools/call" else params.get("taskId")
    if name:
        headers["Mcp-Name"] = name
    request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", body, headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            text = reply.read().decode()
    except urllib.error.HTTPError as err:
        text = err.read().decode()
    for line in text.splitlines():
        if line.startswith("data: "):
            text = line[len("data: "):]
            break
    try:
        return json.loads(text)
    except ValueError:
        fail(f"{method} on :{port}: not JSON: {text!r}")


def legacy(port, method, params, token=ALICE, timeout=20):
    """A 2025-11-25 request standing alone (a stateless server: no session)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
        "Authorization": f"Bearer {token}",
    }
    request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", body, headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            text = reply.read().decode()
    except urllib.error.HTTPError as err:
        text = err.read().decode()
    for line in text.splitlines():
        if line.startswith("data: "):
            text = line[len("data: "):]
            break
    try:
        return json.loads(text)
    except ValueError:
        fail(f"{method} on :{port} (2025-11-25): not JSON: {text!r}")


def start_task(port, tool, arguments, asks=False):
    answer = rpc(port, "tools/call", {"name": tool, "arguments": arguments}, asks=asks)
    result = answer.get("result", {})
    if result.get("resultType") != "task" or result.get("status") != "working":
        fail(f"tools/call {tool} as a task on :{port}: {answer}")
    return result["taskId"]


def get(port, task, token=ALICE):
    return rpc(port, "tasks/get", {"taskId": task}, token=token)


def wait_status(port, task, wanted, within):
    deadline = time.monotonic() + within
    while True:
        answer = get(port, task)
        status = answer.get("result", {}).get("status")
        if status == wanted:
            return answer["result"]
        if time.monotonic() > deadline:
            fail(f"task {task} on :{port}: {status}, not {wanted} within {within} s: {answer}")
        time.sleep(0.05)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--redis-port", type=int, required=True)
    parser.add_argument("--redis-pid", type=int, required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--haproxy", help="HAProxy's binary: also drive tasks through it")
    args = parser.parse_args()
    work = args.work
    state = f"redis://127.0.0.1:{args.redis_port}/0"
    with open(os.path.join(work, "tokens"), "w") as tokens:
        tokens.write(f"{ALICE} alice\n{BOB} bob\n")
    os.chmod(os.path.join(work, "tokens"), 0o600)

    hosts, ports = [], []

    def start_host(n):
        port = free_port()
        log = open(os.path.join(work, f"host{n}.log"), "w")
        process = subprocess.Popen(
            [args.host, "serve", "--http", f"127.0.0.1:{port}", "--stateless",
             "--root", os.path.join(work, "root"), "--plugins", os.path.join(work, "plugins"),
             "--cache-dir", os.path.join(work, "cache"), "--plugin-ask",
             "--auth-token-file", os.path.join(work, "tokens"),
             "--state", state, "--state-password-file", os.path.join(work, "redis.pass"),
             "--task-lease", f"{LEASE_S}s"],
            stdout=log, stderr=subprocess.STDOUT)
        if not wait_port(port, process):
            fail(f"host {n} did not start: see {log.name}: " + open(log.name).read())
        return process, port

    try:
        for n in range(3):
            process, port = start_host(n)
            hosts.append(process)
            ports.append(port)

        # 1. 20 tasks, each created through one process and got, fetched or cancelled
        # through the others: even ones complete (test_simple_text), odd ones wait for
        # their user (test_elicitation) and are cancelled.
        created = []
        for i in range(20):
            port = ports[i % 3]
            if i % 2 == 0:
                task = start_task(port, "test_simple_text", {})
            else:
                task = start_task(port, "test_elicitation", {"message": f"task {i}?"}, asks=True)
            created.append((i, task))
        for i, task in created:
            other, third = ports[(i + 1) % 3], ports[(i + 2) % 3]
            foreign = get(other, task, token=BOB)
            if foreign.get("error", {}).get("code") != -32602:
                fail(f"bob got alice's task {task}: {foreign}")
            if i % 2 == 0:
                done = wait_status(other, task, "completed", 10)
                text = done["result"]["content"][0]["text"]
                if text != "This is a simple text response for testing.":
                    fail(f"task {i}: result {done['result']}")
            else:
                working = get(other, task)["result"]
                if working["status"] not in ("working", "input_required"):
                    fail(f"task {i} through another process: {working}")
                cancelled = rpc(third, "tasks/cancel", {"taskId": task})
                if "error" in cancelled:
                    fail(f"cancel of task {i} through a third process: {cancelled}")
                # It reaches the process running it within a second.
                ran = ports[i % 3]
                asked = time.monotonic()
                seen = wait_status(ran, task, "cancelled", 1.0)
                print(f"state-check: task {i} cancelled through :{third}, seen by its process :{ran} "
                      f"after {time.monotonic() - asked:.2f} s ({seen.get('statusMessage')})", file=sys.stderr)
                again = get(other, task)["result"]
                if again["status"] != "cancelled":
                    fail(f"task {i} after cancel: {again}")
        print("state-check: 20 tasks created, got, fetched and cancelled across 3 processes", file=sys.stderr)

        # 1a. 2025-11-25 without a session: tasks/result through another process waits
        # for the end there, tasks/list through a third lists them all.
        legacy_tasks = []
        for i in range(3):
            answer = legacy(ports[i], "tools/call",
                            {"name": "test_simple_text", "arguments": {}, "task": {}})
            task = answer.get("result", {}).get("task", {}).get("taskId")
            if not task:
                fail(f"2025-11-25 task on :{ports[i]}: {answer}")
            legacy_tasks.append(task)
            done = legacy(ports[(i + 1) % 3], "tasks/result", {"taskId": task})
            if done.get("result", {}).get("content", [{}])[0].get("text") != \
                    "This is a simple text response for testing.":
                fail(f"2025-11-25 tasks/result through another process: {done}")
        listed = legacy(ports[2], "tasks/list", {})
        ids = [task["taskId"] for task in listed.get("result", {}).get("tasks", [])]
        if not set(legacy_tasks) <= set(ids):
            fail(f"2025-11-25 tasks/list through one process: {listed}")
        print("state-check: 3 tasks of 2025-11-25 (stateless) fetched and listed across processes",
              file=sys.stderr)

        # 1b. The same behind HAProxy (round robin, no stickiness): every request of a
        # task lands on another process than the one before.
        if args.haproxy:
            front, proxy, proxy_log = start_haproxy(args.haproxy, work, "haproxy", ports)
            hosts.append(proxy)
            if not wait_port(front, proxy, within=20):
                fail("haproxy did not start: " + open(proxy_log).read())
            for i in range(6):
                if i % 2 == 0:
                    task = start_task(front, "test_simple_text", {})
                    wait_status(front, task, "completed", 10)
                else:
                    task = start_task(front, "test_elicitation", {"message": "via the proxy?"}, asks=True)
                    cancelled = rpc(front, "tasks/cancel", {"taskId": task})
                    if "error" in cancelled:
                        fail(f"cancel through HAProxy: {cancelled}")
                    wait_status(front, task, "cancelled", 2)
            proxy.terminate()
            proxy.wait(timeout=10)
            hosts.remove(proxy)
            print("state-check: 6 tasks created, got and cancelled through HAProxy (round robin)",
                  file=sys.stderr)

        # 2. SIGKILL a process mid-task: its tasks are failed within the lease.
        orphans = [start_task(ports[0], "test_elicitation", {"message": "orphan?"}, asks=True)
                   for _ in range(3)]
        for task in orphans:
            if get(ports[1], task)["result"]["status"] not in ("working", "input_required"):
                fail(f"orphan {task} not working before the kill")
        hosts[0].send_signal(signal.SIGKILL)
        hosts[0].wait(timeout=10)
        killed = time.monotonic()
        for task in orphans:
            failed = wait_status(ports[1], task, "failed", LEASE_S + 3)
            message = failed.get("error", {}).get("message") or failed.get("statusMessage")
            if message != EXPIRED:
                fail(f"orphan {task}: {failed}")
        took = time.monotonic() - killed
        print(f"state-check: a SIGKILLed process's 3 tasks failed ({EXPIRED!r}) "
              f"{took:.2f} s after the kill (lease {LEASE_S} s)", file=sys.stderr)
        # And stay so through the third process.
        for task in orphans:
            if get(ports[2], task)["result"]["status"] != "failed":
                fail(f"orphan {task} through the third process")

        # 3. Redis stopped: task creation refused clearly, plain calls served; Redis back:
        # tasks again, the earlier ones still there.
        os.kill(args.redis_pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while True:
            try:
                os.kill(args.redis_pid, 0)
            except OSError:
                break
            if time.monotonic() > deadline:
                fail("redis-server did not stop")
            time.sleep(0.1)
        refused = rpc(ports[1], "tools/call", {"name": "test_simple_text", "arguments": {}})
        error = refused.get("error", {})
        if error.get("code") != -32000 or not error.get("message", "").startswith(
                "Task refused: the task state server"):
            fail(f"task creation with Redis down: {refused}")
        print(f"state-check: Redis down: {error['message'][:110]}...", file=sys.stderr)
        plain = rpc(ports[2], "tools/call", {"name": "test_simple_text", "arguments": {}}, tasks=False)
        if plain.get("result", {}).get("isError") is not False:
            fail(f"a plain call with Redis down: {plain}")
        redis = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(args.redis_port), "--dir", work,
             "--save", "", "--appendonly", "yes", "--appendfsync", "always",
             "--requirepass", open(os.path.join(work, "redis.pass")).read().strip()],
            stdout=open(os.path.join(work, "redis2.log"), "w"), stderr=subprocess.STDOUT)
        with open(os.path.join(work, "redis.pid"), "w") as pid:
            pid.write(str(redis.pid))
        deadline = time.monotonic() + 20
        while True:
            again = rpc(ports[1], "tools/call", {"name": "test_simple_text", "arguments": {}})
            if again.get("result", {}).get("resultType") == "task":
                break
            if time.monotonic() > deadline:
                fail(f"task creation after Redis came back: {again}")
            time.sleep(0.2)
        wait_status(ports[2], again["result"]["taskId"], "completed", 10)
        for i, task in created:
            kept = get(ports[1 + i % 2], task)
            wanted = "completed" if i % 2 == 0 else "cancelled"
            if kept.get("result", {}).get("status") != wanted:
                fail(f"task {i} after the Redis restart: {kept}")
        print("state-check: Redis restarted: tasks created again, the 20 earlier tasks kept", file=sys.stderr)
    finally:
        stop_all(hosts)


if __name__ == "__main__":
    main()
