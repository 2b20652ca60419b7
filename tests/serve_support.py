"""A real ``streameval serve`` subprocess for the service tests: started on a free port
of the loopback interface (the port read from its first line), stopped by SIGTERM."""

import os
import selectors
import signal
import subprocess
import sys


def launch(cmd, env=None, expect_start=True):
    """Run ``cmd`` (a server command with ``--port 0``): ``(process, port)`` once it says
    where it listens, or for a refused start (``expect_start=False``) ``(process,
    None)`` once it has exited. A server that does not start within 60 s fails the test
    with its output."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    if not expect_start:
        proc.wait(60)
        return proc, None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    ready = sel.select(timeout=60)
    sel.close()
    line = proc.stdout.readline().decode() if ready else ""
    if "listening on http://" not in line:
        proc.kill()
        raise AssertionError(f"the server did not start: {line!r} "
                             f"{proc.stderr.read().decode()}")
    return proc, int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])


def start_cli(*args, env=None, expect_start=True):
    """``python -m streameval serve --port 0 ARGS``: see :func:`launch`."""
    cmd = [sys.executable, "-m", "streameval", "serve", "--port", "0", *map(str, args)]
    return launch(cmd, env, expect_start)


def stop_cli(proc):
    """SIGTERM, then the exit status (killed if it has not exited within 20 s)."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(20)
    finally:
        if proc.poll() is None:  # pragma: no cover - reported by the caller's assertion
            proc.kill()
