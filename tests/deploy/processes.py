"""What the deploy checks share: a free loopback port, waiting for a process to listen,
HAProxy in front of the hosts, and stopping the processes they started (SIGTERM to all,
then up to 15 s each to exit, then SIGKILL), so no host outlives its check."""

import os
import socket
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_all(processes, grace=15):
    running = [process for process in processes if process.poll() is None]
    for process in running:
        process.terminate()
    for process in running:
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()


def wait_port(port, process, within=60):
    """Whether `process` listens on loopback `port` within `within` s (False: it exited,
    or the time ran out)."""
    deadline = time.monotonic() + within
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.1)


def start_haproxy(haproxy, work, stem, ports, maxconn=None):
    """HAProxy (round robin, no stickiness) in front of the hosts on `ports`, its config
    and log `work/<stem>.cfg|.log`: its port, its process and its log's path (not yet
    waited for). `maxconn`: its global connection limit, when given."""
    front = free_port()
    config = os.path.join(work, f"{stem}.cfg")
    with open(config, "w") as cfg:
        if maxconn is not None:
            cfg.write(f"global\n    maxconn {maxconn}\n")
        cfg.write("defaults\n    mode http\n    timeout connect 5s\n"
                  "    timeout client 1m\n    timeout server 1m\n"
                  f"frontend mcp\n    bind 127.0.0.1:{front}\n    default_backend hosts\n"
                  "backend hosts\n    balance roundrobin\n")
        for n, port in enumerate(ports):
            cfg.write(f"    server h{n} 127.0.0.1:{port}\n")
    log = os.path.join(work, f"{stem}.log")
    proxy = subprocess.Popen([haproxy, "-db", "-f", config],
                             stdout=open(log, "w"), stderr=subprocess.STDOUT)
    return front, proxy, log
