"""Two `host serve --http --stateless --state rediss://... --state-ca-file ca.pem`
processes sharing an MCP task through a Redis that speaks TLS only; run by
scripts/state-check, which starts that Redis (or a TLS proxy in front of a plain one) with
a certificate of tests/deploy/make_certs.py and gives its port. A task is created through
one process and got, completed, through the other. Standard library only; loopback only;
every wait is bounded."""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from processes import free_port, stop_all, wait_port  # noqa: E402
from state_check import ALICE, BOB, fail, get, start_task, wait_status  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--tls-port", type=int, required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    work = args.work
    tokens = os.path.join(work, "tls-tokens")
    with open(tokens, "w") as out:
        out.write(f"{ALICE} alice\n{BOB} bob\n")
    os.chmod(tokens, 0o600)
    hosts, ports = [], []
    try:
        for n in range(2):
            port = free_port()
            log = open(os.path.join(work, f"tls-host{n}.log"), "w")
            hosts.append(subprocess.Popen(
                [args.host, "serve", "--http", f"127.0.0.1:{port}", "--stateless",
                 "--root", os.path.join(work, "root"), "--plugins", os.path.join(work, "plugins"),
                 "--cache-dir", os.path.join(work, "cache"), "--plugin-ask",
                 "--auth-token-file", tokens,
                 "--state", f"rediss://localhost:{args.tls_port}/1",
                 "--state-ca-file", os.path.join(work, "tls", "ca.pem"),
                 "--state-password-file", os.path.join(work, "redis.pass")],
                stdout=log, stderr=subprocess.STDOUT))
            ports.append(port)
            if not wait_port(port, hosts[-1]):
                fail(f"rediss:// host {n} did not start: " + open(log.name).read())
        task = start_task(ports[0], "test_simple_text", {})
        done = wait_status(ports[1], task, "completed", 10)
        text = done["result"]["content"][0]["text"]
        if text != "This is a simple text response for testing.":
            fail(f"rediss:// task through the other process: {done}")
        foreign = get(ports[1], task, token=BOB)
        if foreign.get("error", {}).get("code") != -32602:
            fail(f"rediss://: bob got alice's task {task}: {foreign}")
        print(f"state-check: rediss:// with --state-ca-file: task {task} created through "
              f":{ports[0]}, completed through :{ports[1]}", file=sys.stderr)
    finally:
        stop_all(hosts)


if __name__ == "__main__":
    main()
