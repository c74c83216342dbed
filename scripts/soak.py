#!/usr/bin/env python3
"""The soak driver behind scripts/soak (see there for the whole story): two host processes,
one over stdio and one over Streamable HTTP, kept busy for MINUTES, their RSS, open file
descriptors and threads sampled every minute; the verdict is "flat" or not.

Standard library only. Every address is loopback. Every loop ends by itself: the run stops
after MINUTES, and a watchdog kills the hosts if the shutdown takes longer than its grace.

    python3 scripts/soak.py --host target/release/host --work DIR --minutes 60 --logs target/soak

DIR holds plugins/ (watched by both hosts: greet, divide, wordcount + its manifest,
hostile_loop), spare/ (pristine copies of the same files, for the reloads), root/ (the file
tools' root) and cache/ (the compiled-plugin cache). Exits 0 when every answer was one of
the expected kinds and every figure stayed within its tolerance, 1 otherwise.
"""

import argparse
import collections
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

# Tolerances of the verdict: the last sample against the one after the warm-up. Memory is
# judged on the anonymous part of RSS (RssAnon: heap, stacks, plugin instance memory), where
# a leak shows; VmRSS also counts pages of the binary and libraries, which the kernel drops
# and reads back under memory pressure (tens of MiB for a dev build), so it is shown, not
# judged.
ANON_GROWTH_FRACTION = 0.10  # or
ANON_GROWTH_MIB = 8.0  # whichever is larger
FDS_SLACK = 16  # open connections and in-flight file reads come and go
THREADS_SLACK = 8  # tokio's blocking pool grows with the load of the moment and shrinks when idle

# The plugin time limit the hosts run with (a runaway call must end with it).
PLUGIN_TIMEOUT_S = 5
# A runaway call must be answered (timed out) within this (the limit plus scheduling on a
# busy machine; far below "never").
RUNAWAY_DEADLINE_S = PLUGIN_TIMEOUT_S + 15
# An ordinary call must be answered within this.
CALL_TIMEOUT_S = 60
# How long a cancelled call may take to be answered (if it finished before the cancel).
CANCEL_WAIT_S = 3

PROTOCOL = "2025-06-18"
BUILTIN_TOOLS = {"read_file", "list_files", "write_file", "delete_file", "grep", "glob",
                 "edit_file", "multi_edit", "move_file", "todo_write"}
PLUGIN_TOOLS = {"greet", "divide", "wordcount", "hostile_loop"}


def log(message):
    print(f"soak: {message}", file=sys.stderr, flush=True)


class Failure(Exception):
    """An answer the soak did not expect (a wrong result, a protocol error, a wrong kind)."""


class Tally:
    """Counts of answers by (transport, tool, outcome), and the failures with their text."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.Counter()
        self.failures = []
        self.notifications = collections.Counter()

    def add(self, transport, what, outcome):
        with self.lock:
            self.counts[(transport, what, outcome)] += 1

    def fail(self, transport, what, text):
        with self.lock:
            self.counts[(transport, what, "FAILURE")] += 1
            if len(self.failures) < 200:
                self.failures.append(f"{time.strftime('%H:%M:%S')} {transport} {what}: {text}")
        log(f"FAILURE {transport} {what}: {text[:500]}")

    def total(self, outcome=None):
        with self.lock:
            return sum(n for (_, _, o), n in self.counts.items() if outcome is None or o == outcome)


def error_kind(text):
    """The kind of a tool error, from its model-facing message (the result carries no code)."""
    if text.startswith("unknown tool"):
        return "unknown_tool"
    if "timed out after" in text:
        return "timed_out"
    if "the call was cancelled" in text:
        return "cancelled"
    if "the tool crashed" in text:
        return "tool_panicked"
    if "stopped at the" in text and "limit" in text:
        return "limit_exceeded"
    return "other_error"


def text_of(result):
    return "".join(block.get("text", "") for block in result.get("content", []))


# ----------------------------------------------------------------------------------------
# The calls, and what each must answer.


class Work:
    """The calls a worker makes, each with the check of its answer: built-in and plugin."""

    def __init__(self, name, rng):
        self.name = name  # a folder of its own under the root: workers never share files
        self.rng = rng
        self.n = 0

    def next_call(self):
        """(tool, arguments, check) where check(result) -> outcome or raises Failure."""
        self.n += 1
        n = self.n
        path = f"{self.name}/f{n % 16}.md"
        body = f"soak {self.name} {n}\nline two {n}\n"
        choice = n % 10

        def must_ok(result):
            if result.get("isError"):
                raise Failure(f"isError: {text_of(result)[:300]}")
            return json.loads(text_of(result)) if text_of(result)[:1] in "{[" else text_of(result)

        if choice == 0:
            def check(result):
                content = must_ok(result)
                if content.get("path") != path:
                    raise Failure(f"write_file answered {content}")
                self.last = (path, body)
                return "ok"
            return "write_file", {"path": path, "content": body}, check
        if choice == 1 and getattr(self, "last", None):
            last_path, last_body = self.last

            def check(result):
                content = must_ok(result)["content"]
                want = "".join(f"{i}\t{line}\n" for i, line in enumerate(last_body.splitlines(), 1))
                if content != want:
                    raise Failure(f"read_file {last_path}: {content!r}, wanted {want!r}")
                return "ok"
            return "read_file", {"path": last_path}, check
        if choice == 2:
            def check(result):
                files = must_ok(result)["files"]
                if not isinstance(files, list) or not files:
                    raise Failure(f"list_files: {files!r}")
                return "ok"
            return "list_files", {}, check
        if choice == 3:
            def check(result):
                must_ok(result)
                return "ok"
            return "grep", {"pattern": "needle [0-9]+", "path": "corpus"}, check
        if choice == 4:
            name = f"{self.name}-{n}"

            def check(result):
                if must_ok(result) != f"Hello, {name}!":
                    raise Failure(f"greet: {text_of(result)!r}")
                return "ok"
            return "greet", {"name": name}, check
        if choice == 5:
            def check(result):
                counts = must_ok(result)
                if (counts.get("lines"), counts.get("words")) != (3, 9):
                    raise Failure(f"wordcount: {counts}")
                return "ok"
            return "wordcount", {"path": "corpus/count.md"}, check
        if choice == 6:
            # divide comes and goes (the reloader removes and re-adds it): while it is
            # gone, "unknown tool" is the right answer.
            by = self.rng.choice([4, 0])

            def check(result):
                text = text_of(result)
                if result.get("isError"):
                    kind = error_kind(text)
                    if kind == "unknown_tool" and "divide" in text:
                        return "unknown_tool (removed)"
                    if kind == "tool_panicked" and by == 0 and "division by zero" in text:
                        return "tool_panicked (by zero)"
                    raise Failure(f"divide by {by}: {text[:300]}")
                if by == 0 or text != "0.25":
                    raise Failure(f"divide by {by}: {text!r}")
                return "ok"
            return "divide", {"by": by}, check
        if choice == 7:
            def check(result):
                todos = must_ok(result)["todos"]
                if [t["content"] for t in todos] != [f"step {n}", "ship"]:
                    raise Failure(f"todo_write: {todos}")
                return "ok"
            return "todo_write", {"todos": [{"content": f"step {n}", "status": "in_progress"},
                                            {"content": "ship", "status": "pending"}]}, check
        if choice == 8:
            def check(result):
                if not result.get("isError") or error_kind(text_of(result)) != "other_error" \
                        or "read_file" not in text_of(result):
                    raise Failure(f"read_file of a missing file: {text_of(result)[:300]}")
                return "not_found (expected)"
            return "read_file", {"path": f"{self.name}/missing-{n}.md"}, check

        def check(result):
            if not result.get("isError") or error_kind(text_of(result)) != "unknown_tool":
                raise Failure(f"unknown tool: {text_of(result)[:300]}")
            return "unknown_tool (expected)"
        return "no_such_tool", {}, check


def run_check(tally, transport, tool, check, result):
    try:
        outcome = check(result)
    except (Failure, KeyError, TypeError, ValueError, AttributeError) as err:
        tally.fail(transport, tool, f"{type(err).__name__}: {err}")
        return
    tally.add(transport, tool, outcome)


# ----------------------------------------------------------------------------------------
# stdio: one host process, one pipe, several workers sharing it (ids tell answers apart).


class StdioHost:
    def __init__(self, argv, logfile, tally):
        self.tally = tally
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=logfile, bufsize=0)
        self.write_lock = threading.Lock()
        self.lock = threading.Lock()
        self.pending = {}  # id -> [event, answer]
        self.cancelled = set()  # ids given up on after a cancel: a late answer is allowed
        self.next_id = 0
        self.closed = False
        self.reader = threading.Thread(target=self._read, daemon=True, name="stdio-reader")
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                self.tally.fail("stdio", "protocol", f"not JSON: {line[:200]!r}")
                continue
            if "method" in message and "id" not in message:
                self.tally.notifications[("stdio", message["method"])] += 1
                continue
            ident = message.get("id")
            with self.lock:
                waiter = self.pending.pop(ident, None)
                late = ident in self.cancelled
                self.cancelled.discard(ident)
            if waiter is not None:
                waiter[1] = message
                waiter[0].set()
            elif late:
                self.tally.add("stdio", "cancel", "answered late")
            else:
                self.tally.fail("stdio", "protocol", f"an answer to no request: {line[:200]!r}")
        self.closed = True
        with self.lock:
            for waiter in self.pending.values():
                waiter[0].set()

    def send(self, message):
        data = (json.dumps(message) + "\n").encode()
        with self.write_lock:
            self.proc.stdin.write(data)

    def start_request(self, method, params):
        with self.lock:
            self.next_id += 1
            ident = self.next_id
            waiter = [threading.Event(), None]
            self.pending[ident] = waiter
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        return ident, waiter

    def wait(self, ident, waiter, timeout):
        if not waiter[0].wait(timeout):
            with self.lock:
                self.pending.pop(ident, None)
            return None
        return waiter[1]

    def request(self, method, params, timeout=CALL_TIMEOUT_S):
        ident, waiter = self.start_request(method, params)
        answer = self.wait(ident, waiter, timeout)
        if answer is None:
            raise Failure(f"{method}: no answer within {timeout} s"
                          + (" (the host's output closed)" if self.closed else ""))
        if "error" in answer:
            raise Failure(f"{method}: protocol error {answer['error']}")
        return answer["result"]

    def give_up(self, ident):
        with self.lock:
            if self.pending.pop(ident, None) is not None:
                self.cancelled.add(ident)


def stdio_worker(host, tally, stop, name, pace):
    work = Work(name, random.Random(name))
    while not stop.is_set():
        tool, args, check = work.next_call()
        try:
            result = host.request("tools/call", {"name": tool, "arguments": args})
        except Failure as err:
            tally.fail("stdio", tool, str(err))
        except OSError as err:
            tally.fail("stdio", tool, f"pipe: {err}")
            return
        else:
            run_check(tally, "stdio", tool, check, result)
        stop.wait(pace)


def stdio_canceller(host, tally, stop, pace):
    """Calls cancelled shortly after they are sent: a runaway plugin (cancelled at 200 ms)
    and a grep (cancelled at once). A cancelled call is not answered (MCP), unless it ended
    before the cancel arrived."""
    n = 0
    while not stop.is_set():
        n += 1
        tool, args, delay = (("hostile_loop", {}, 0.2) if n % 2 else
                             ("grep", {"pattern": "needle", "path": "corpus"}, 0.0))
        ident, waiter = host.start_request("tools/call", {"name": tool, "arguments": args})
        time.sleep(delay)
        host.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": ident, "reason": "soak"}})
        answer = host.wait(ident, waiter, CANCEL_WAIT_S)
        if answer is None:
            host.give_up(ident)
            tally.add("stdio", f"cancel {tool}", "unanswered (cancelled)")
        elif tool == "grep" and "result" in answer and not answer["result"].get("isError"):
            tally.add("stdio", f"cancel {tool}", "finished before the cancel")
        else:
            tally.fail("stdio", f"cancel {tool}", f"answered {json.dumps(answer)[:300]}")
        stop.wait(pace)


# ----------------------------------------------------------------------------------------
# Streamable HTTP: sessions that come and go, each on a connection of its own.


class HttpSession:
    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CALL_TIMEOUT_S)
        self.session = None
        self.next_id = 0

    def post(self, message, conn=None):
        """POST one message; (status, headers, answer or None)."""
        conn = conn or self.conn
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
            headers["MCP-Protocol-Version"] = PROTOCOL
        conn.request("POST", "/mcp", body=json.dumps(message), headers=headers)
        response = conn.getresponse()
        body = response.read()
        answer = None
        kind = response.getheader("Content-Type", "")
        if body and kind.startswith("application/json"):
            answer = json.loads(body)
        elif body and kind.startswith("text/event-stream"):
            for event in body.decode().split("\n\n"):
                data = "".join(line[5:].lstrip() for line in event.splitlines()
                               if line.startswith("data:"))
                if data:
                    parsed = json.loads(data)
                    if parsed.get("id") == message.get("id"):
                        answer = parsed
        return response.status, response, answer

    def request(self, method, params):
        self.next_id += 1
        status, response, answer = self.post(
            {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        if status != 200 or answer is None:
            raise Failure(f"{method}: HTTP {status}, {answer}")
        if "error" in answer:
            raise Failure(f"{method}: protocol error {answer['error']}")
        return response, answer["result"]

    def open(self, client):
        response, result = self.request("initialize", {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": client, "version": "0"}})
        self.session = response.getheader("Mcp-Session-Id")
        if not self.session or result.get("protocolVersion") != PROTOCOL:
            raise Failure(f"initialize: session {self.session!r}, {result}")
        status, _, _ = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if status != 202:
            raise Failure(f"notifications/initialized: HTTP {status}, wanted 202")

    def delete(self):
        self.conn.request("DELETE", "/mcp", headers={"Mcp-Session-Id": self.session})
        response = self.conn.getresponse()
        response.read()
        if response.status != 204:
            raise Failure(f"DELETE: HTTP {response.status}, wanted 204")
        # The ended session is refused from now on.
        status, _, _ = self.post({"jsonrpc": "2.0", "id": 0, "method": "ping"})
        if status != 404:
            raise Failure(f"a request on a deleted session: HTTP {status}, wanted 404")

    def close(self):
        self.conn.close()


def http_churner(port, tally, stop, name, pace):
    """Session churn: open a session, a few calls, DELETE it, on a new connection each time."""
    work = Work(name, random.Random(name))
    cycle = 0
    while not stop.is_set():
        cycle += 1
        session = HttpSession(port)
        try:
            session.open(f"soak-{name}")
            tally.add("http", "session", "opened")
            if cycle % 5 == 1:
                _, listed = session.request("tools/list", {})
                names = {tool["name"] for tool in listed["tools"]}
                missing = (BUILTIN_TOOLS | PLUGIN_TOOLS) - names - {"divide"}
                if missing:
                    raise Failure(f"tools/list lacks {sorted(missing)}")
            for _ in range(5):
                if stop.is_set():
                    break
                tool, args, check = work.next_call()
                _, result = session.request("tools/call", {"name": tool, "arguments": args})
                run_check(tally, "http", tool, check, result)
                stop.wait(pace)
            session.delete()
            tally.add("http", "session", "deleted (then 404)")
        except Failure as err:
            tally.fail("http", "session", str(err))
        except (OSError, http.client.HTTPException, ValueError) as err:
            tally.fail("http", "session", f"{type(err).__name__}: {err}")
        finally:
            session.close()
        stop.wait(pace)


def http_canceller(port, tally, stop, pace):
    """A runaway call cancelled 300 ms after it was sent, from a second connection of the
    same session: the call's POST is answered 204 (no body), the cancel 202."""
    while not stop.is_set():
        session = HttpSession(port)
        other = http.client.HTTPConnection("127.0.0.1", port, timeout=CALL_TIMEOUT_S)
        try:
            session.open("soak-canceller")
            outcome = {}

            def call():
                try:
                    outcome["answer"] = session.post({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                                      "params": {"name": "hostile_loop", "arguments": {}}})
                    outcome["answered"] = time.monotonic()
                except (OSError, http.client.HTTPException, ValueError) as err:
                    outcome["error"] = err
            caller = threading.Thread(target=call, daemon=True)
            started = time.monotonic()
            caller.start()
            time.sleep(0.3)
            sent = time.monotonic()
            status, _, _ = session.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                         "params": {"requestId": 7, "reason": "soak"}}, conn=other)
            acknowledged = time.monotonic()
            tally.cancel_ack_seconds.append(acknowledged - sent)
            if status != 202:
                raise Failure(f"notifications/cancelled: HTTP {status}, wanted 202")
            caller.join(PLUGIN_TIMEOUT_S + CANCEL_WAIT_S + 5)
            took = time.monotonic() - started
            if caller.is_alive() or "error" in outcome:
                raise Failure(f"the cancelled call: {outcome.get('error', 'no answer')} after {took:.1f} s")
            status, _, answer = outcome["answer"]
            if status == 200 and answer and error_kind(text_of(answer.get("result", {}))) == "timed_out" \
                    and acknowledged >= outcome["answered"] - 0.5:
                # The host read the cancel only as the call ended (its 202 came back after,
                # or just before, the call's answer): a host too starved of CPU to read a
                # request for seconds, not a cancel it ignored. Counted, not a failure.
                tally.add("http", "cancel hostile_loop",
                          f"cancel read late ({acknowledged - sent:.1f} s): timed out")
                session.delete()
                continue
            if status != 204:
                raise Failure(f"the cancelled call: HTTP {status} {answer}, wanted 204 "
                              f"(cancel acknowledged {acknowledged - started:.1f} s after the call "
                              f"was sent, the call answered after {outcome['answered'] - started:.1f} s)")
            tally.add("http", "cancel hostile_loop", "204 (cancelled)")
            session.delete()
        except Failure as err:
            tally.fail("http", "cancel hostile_loop", str(err))
        except (OSError, http.client.HTTPException, ValueError) as err:
            tally.fail("http", "cancel hostile_loop", f"{type(err).__name__}: {err}")
        finally:
            session.close()
            other.close()
        stop.wait(pace)


# ----------------------------------------------------------------------------------------
# The runaway plugin, the reloads.


def runaway(stdio, port, tally, stop, period, offset):
    """Every period, a hostile_loop call nobody cancels, alternately over stdio and HTTP:
    it must end as timed out, within the plugin time limit plus scheduling."""
    n = 0
    if stop.wait(offset):
        return
    while True:
        n += 1
        transport = "stdio" if n % 2 else "http"
        started = time.monotonic()
        try:
            if transport == "stdio":
                result = stdio.request("tools/call", {"name": "hostile_loop", "arguments": {}},
                                       timeout=RUNAWAY_DEADLINE_S)
            else:
                session = HttpSession(port)
                try:
                    session.open("soak-runaway")
                    _, result = session.request("tools/call", {"name": "hostile_loop", "arguments": {}})
                    session.delete()
                finally:
                    session.close()
            took = time.monotonic() - started
            text = text_of(result)
            if not result.get("isError") or error_kind(text) != "timed_out":
                raise Failure(f"answered {text[:300]!r}")
            if not PLUGIN_TIMEOUT_S - 0.5 <= took <= RUNAWAY_DEADLINE_S:
                raise Failure(f"timed out after {took:.1f} s, not about {PLUGIN_TIMEOUT_S} s")
            tally.add(transport, "runaway hostile_loop", "timed_out")
            tally.runaway_seconds.append(round(took, 1))
        except Failure as err:
            tally.fail(transport, "runaway hostile_loop", str(err))
        except (OSError, http.client.HTTPException, ValueError) as err:
            tally.fail(transport, "runaway hostile_loop", f"{type(err).__name__}: {err}")
        if stop.wait(period):
            return


def reloader(plugins, spare, tally, stop, period):
    """Every period, one change in the watched directory, in turn: touch greet.wasm, rename
    a fresh copy of wordcount.wasm over it, copy greet.wasm over itself in place, remove
    divide.wasm, rewrite wordcount.toml (same text), put divide.wasm back."""
    steps = ["touch", "rename", "copy", "remove", "manifest", "re-add"]
    n = 0
    while not stop.wait(period):
        step = steps[n % len(steps)]
        n += 1
        try:
            if step == "touch":
                os.utime(os.path.join(plugins, "greet.wasm"))
            elif step == "rename":
                tmp = os.path.join(plugins, ".wordcount.wasm.new")
                shutil.copyfile(os.path.join(spare, "wordcount.wasm"), tmp)
                os.replace(tmp, os.path.join(plugins, "wordcount.wasm"))
            elif step == "copy":
                shutil.copyfile(os.path.join(spare, "greet.wasm"), os.path.join(plugins, "greet.wasm"))
            elif step == "remove":
                os.remove(os.path.join(plugins, "divide.wasm"))
            elif step == "manifest":
                shutil.copyfile(os.path.join(spare, "wordcount.toml"), os.path.join(plugins, "wordcount.toml"))
            else:
                shutil.copyfile(os.path.join(spare, "divide.wasm"), os.path.join(plugins, "divide.wasm"))
            tally.add("files", "reload", step)
        except OSError as err:
            tally.fail("files", "reload", f"{step}: {err}")


# ----------------------------------------------------------------------------------------
# Sampling and the verdict.


def sample(pid):
    """(VmRSS MiB, RssAnon MiB, open fds, threads) of a live process, from /proc."""
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "Threads"):
                fields[name] = int(value.split()[0])
    return (fields["VmRSS"] / 1024, fields["RssAnon"] / 1024,
            len(os.listdir(f"/proc/{pid}/fd")), fields["Threads"])


def verdict(samples, warmup):
    """(flat, base minute, lines): the last sample against the one at the warm-up minute."""
    lines, flat = [], True
    base_minute = warmup
    base = next(s for s in samples if s[0] == base_minute)
    last = samples[-1]
    for index, name in ((1, "stdio host"), (2, "http host")):
        (rss0, anon0, fds0, thr0), (rss1, anon1, fds1, thr1) = base[index], last[index]
        growth = anon1 - anon0
        allowed = max(ANON_GROWTH_MIB, ANON_GROWTH_FRACTION * anon0)
        checks = [
            ("anon RSS", growth < allowed,
             f"{anon0:.1f} -> {anon1:.1f} MiB ({growth:+.1f} MiB, {100 * growth / anon0:+.1f} %, "
             f"allowed < {allowed:.1f})"),
            ("fds", fds1 <= fds0 + FDS_SLACK, f"{fds0} -> {fds1}"),
            ("threads", thr1 <= thr0 + THREADS_SLACK, f"{thr0} -> {thr1}"),
        ]
        for what, ok, figures in checks:
            flat &= ok
            lines.append(f"  {name} {what}: {figures} {'ok' if ok else 'NOT FLAT'}")
        lines.append(f"  {name} VmRSS (not judged): {rss0:.1f} -> {rss1:.1f} MiB")
        after = [s[index] for s in samples if s[0] >= base_minute]
        lines.append(f"  {name} peak from minute {base_minute}: VmRSS {max(a[0] for a in after):.1f} MiB, "
                     f"anon {max(a[1] for a in after):.1f} MiB, fds {max(a[2] for a in after)}, "
                     f"threads {max(a[3] for a in after)}")
    return flat, base_minute, lines


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_http(port, proc, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Failure(f"the HTTP host exited with {proc.returncode} at start")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise Failure(f"the HTTP host did not listen on 127.0.0.1:{port} within {seconds} s")


def prepare_root(root):
    corpus = os.path.join(root, "corpus")
    os.makedirs(corpus, exist_ok=True)
    for i in range(200):
        with open(os.path.join(corpus, f"doc{i:03}.md"), "w") as out:
            for j in range(40):
                out.write(f"line {j} of doc {i}" + (f" needle {i * j}" if j % 7 == 0 else "") + "\n")
    with open(os.path.join(corpus, "count.md"), "w") as out:
        out.write("one two three\nfour five six\nseven eight nine\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", required=True, help="the host binary")
    parser.add_argument("--work", required=True, help="the directory scripts/soak prepared")
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=2, help="the minute the verdict compares against")
    parser.add_argument("--logs", default="target/soak", help="where the hosts' logs go")
    parser.add_argument("--workers", type=int, default=3, help="workers per transport")
    args = parser.parse_args()

    plugins = os.path.join(args.work, "plugins")
    spare = os.path.join(args.work, "spare")
    root = os.path.join(args.work, "root")
    cache = os.path.join(args.work, "cache")
    prepare_root(root)
    os.makedirs(args.logs, exist_ok=True)
    common = ["--plugins", plugins, "--plugin-files", "read", "--root", root, "--watch", "--plan",
              "--cache-dir", cache, "--plugin-timeout", f"{PLUGIN_TIMEOUT_S}s"]
    port = free_port()
    tally = Tally()
    tally.runaway_seconds = []
    tally.cancel_ack_seconds = []
    stop = threading.Event()
    procs = []

    def kill_hosts():
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def on_term(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)

    def watchdog():
        # The last resort of "bounded": whatever hangs, the hosts die and the run ends.
        time.sleep(60 * args.minutes + 240)
        log("watchdog: the run overran its time and grace; killing the hosts")
        kill_hosts()
        os._exit(1)
    threading.Thread(target=watchdog, daemon=True, name="watchdog").start()

    stdio_log = open(os.path.join(args.logs, "stdio-host.log"), "w")
    http_log = open(os.path.join(args.logs, "http-host.log"), "w")
    samples = []
    started_at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    try:
        # The HTTP host first: it compiles the plugins into the shared cache.
        http_proc = subprocess.Popen([args.host, "serve", "--http", f"127.0.0.1:{port}"] + common,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=http_log)
        procs.append(http_proc)
        wait_for_http(port, http_proc, 120)
        stdio = StdioHost([args.host, "run"] + common, stdio_log, tally)
        procs.append(stdio.proc)
        init = stdio.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                            "clientInfo": {"name": "soak", "version": "0"}}, timeout=120)
        if not init.get("capabilities", {}).get("tools", {}).get("listChanged"):
            raise Failure(f"initialize: no listChanged with --watch: {init}")
        stdio.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        names = {tool["name"] for tool in stdio.request("tools/list", {})["tools"]}
        if (BUILTIN_TOOLS | PLUGIN_TOOLS) - names:
            raise Failure(f"tools/list lacks {sorted((BUILTIN_TOOLS | PLUGIN_TOOLS) - names)}")
        log(f"hosts up: stdio pid {stdio.proc.pid}, http pid {http_proc.pid} on 127.0.0.1:{port}; "
            f"running {args.minutes:g} min, logs in {args.logs}/")

        threads = []
        for i in range(args.workers):
            threads.append(threading.Thread(target=stdio_worker, args=(stdio, tally, stop, f"s{i}", 0.05)))
            threads.append(threading.Thread(target=http_churner, args=(port, tally, stop, f"h{i}", 0.05)))
        threads.append(threading.Thread(target=stdio_canceller, args=(stdio, tally, stop, 1.5)))
        threads.append(threading.Thread(target=http_canceller, args=(port, tally, stop, 1.5)))
        threads.append(threading.Thread(target=runaway, args=(stdio, port, tally, stop, 60, 30)))
        threads.append(threading.Thread(target=reloader, args=(plugins, spare, tally, stop, 20)))
        for thread in threads:
            thread.daemon = True
            thread.start()

        header = (f"{'min':>4} | {'stdio RSS':>9} {'anon':>6} {'fds':>4} {'thr':>4} | "
                  f"{'http RSS':>9} {'anon':>6} {'fds':>4} {'thr':>4} | {'answers':>8} {'failures':>8}")
        print(header + "      (MiB; anon = RssAnon)", flush=True)
        start = time.monotonic()
        for minute in range(args.minutes + 1):
            while time.monotonic() < start + 60 * minute:
                time.sleep(min(1.0, start + 60 * minute - time.monotonic()))
            for proc, what in ((stdio.proc, "stdio"), (http_proc, "http")):
                if proc.poll() is not None:
                    raise Failure(f"the {what} host exited with {proc.returncode}")
            row = (minute, sample(stdio.proc.pid), sample(http_proc.pid))
            samples.append(row)
            cells = " | ".join(f"{r:>9.1f} {a:>6.1f} {f:>4} {t:>4}" for r, a, f, t in row[1:])
            print(f"{minute:>4} | {cells} | {tally.total():>8} {tally.total('FAILURE'):>8}", flush=True)

        stop.set()
        log("time is up: stopping the clients")
        grace_end = time.monotonic() + RUNAWAY_DEADLINE_S + 10
        for thread in threads:
            thread.join(max(0.0, grace_end - time.monotonic()))
            if thread.is_alive():
                tally.fail("soak", "shutdown", f"{thread.name} did not stop within its grace")
        # Both hosts still answer, then shut down cleanly: stdio at end of input, HTTP at SIGTERM.
        stdio.request("ping", {}, timeout=10)
        session = HttpSession(port)
        session.open("soak-final")
        session.delete()
        session.close()
        stdio.proc.stdin.close()
        http_proc.send_signal(signal.SIGTERM)
        for proc, what in ((stdio.proc, "stdio"), (http_proc, "http")):
            try:
                code = proc.wait(30)
            except subprocess.TimeoutExpired:
                code = "still running after 30 s"
            if code != 0:
                tally.fail(what, "exit", f"exit status {code}, wanted 0")
    except Failure as err:
        tally.fail("soak", "setup", str(err))
    except KeyboardInterrupt as err:
        log(f"interrupted ({err}): killing the hosts")
        kill_hosts()
        return 130
    finally:
        stop.set()
        kill_hosts()

    print()
    print(f"started {started_at}; {args.minutes:g} min; host {args.host}")
    print("answers (transport, call, outcome: count):")
    for (transport, what, outcome), n in sorted(tally.counts.items()):
        print(f"  {transport:<5} {what:<22} {outcome:<28} {n}")
    for (transport, method), n in sorted(tally.notifications.items()):
        print(f"  {transport:<5} notification {method}: {n}")
    if tally.cancel_ack_seconds:
        acks = sorted(tally.cancel_ack_seconds)
        print(f"HTTP cancels: 202 after {acks[len(acks) // 2]:.3f} s (median), "
              f"{acks[-1]:.3f} s (max) of {len(acks)}")
    if tally.runaway_seconds:
        print(f"runaway calls ended after (s): {tally.runaway_seconds}")
    reloads = sum(n for (t, _, _), n in tally.counts.items() if t == "files")
    if reloads and not tally.notifications[("stdio", "notifications/tools/list_changed")]:
        tally.fail("stdio", "hot reload", f"{reloads} change(s) in the plugins folder, "
                   "no notifications/tools/list_changed")
    ok = not tally.failures
    if samples and samples[-1][0] <= args.warmup:
        print(f"verdict: none (a run of {samples[-1][0]} min does not get past the "
              f"{args.warmup}-minute warm-up; give more minutes)")
    elif len(samples) >= 2:
        flat, base_minute, lines = verdict(samples, args.warmup)
        print(f"minute {samples[-1][0]} against minute {base_minute} (tolerance: anonymous RSS "
              f"growth < {ANON_GROWTH_MIB:g} MiB or {ANON_GROWTH_FRACTION:.0%}, whichever is larger; "
              f"fds +{FDS_SLACK}; threads +{THREADS_SLACK}):")
        print("\n".join(lines))
        print(f"verdict: {'flat' if flat else 'NOT FLAT'}")
        ok &= flat
    else:
        print("verdict: no figures (the run did not get past its start)")
        ok = False
    if tally.failures:
        print(f"{len(tally.failures)} failure(s):")
        for line in tally.failures:
            print(f"  {line}")
    print(f"soak: {'passed' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
