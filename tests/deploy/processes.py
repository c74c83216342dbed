"""What the deploy checks share: a free loopback port, and stopping the processes they
started (SIGTERM to all, then up to 15 s each to exit, then SIGKILL), so no host outlives
its check."""

import socket
import subprocess


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
