"""A signed-in user's request latency, idle and under a flood of wrong-password sign-ins, with the
password check on the server's event loop (as before) and off it, PASSWORD_CHECKS_AT_ONCE at a time.

Usage: .venv/bin/python benchmarks/login_flood_bench.py [--flooders 6] [--attempts 30] [--requests 200]
Each mode serves a small Gradio app behind the app's sign-in (app.login_guard, real scrypt) on
127.0.0.1 in a child process. The flood's throttles never lock (the worst case: guesses from more
addresses than the lock catches), so every attempt costs a scrypt check. Flooders make a bounded
number of attempts each; the signed-in user measures GET /config until the flood ends. Prints one
table; run it on an otherwise idle machine (the load is printed with it).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

import httpx  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODES = {"on the event loop (before)": "on-loop", "off the loop, queued (now)": "off-loop"}
USER, PASSWORD = "alice", "alice-pass"


def serve(mode: str, port: int) -> None:
    """The child process: one small app behind the sign-in, until it is killed."""
    import gradio as gr
    from starlette.middleware import Middleware

    from app.auth import User, UserDirectory, hash_password
    from app.login_guard import CLIENT_ADDRESS, ClientAddress, LoginGuard, LoginThrottle

    users = UserDirectory({USER: User(USER, hash_password(PASSWORD))})
    never_locks = dict(free_failures=10**9)
    guard = LoginGuard(users, per_user=LoginThrottle(**never_locks), per_address=LoginThrottle(**never_locks))
    auth = guard.authenticate if mode == "off-loop" else (lambda u, p: guard.check(u, p, CLIENT_ADDRESS.get()))
    with gr.Blocks() as demo:
        gr.Markdown("A signed-in page.")
    demo.launch(server_name="127.0.0.1", server_port=port, auth=auth, quiet=True, ssr_mode=False,
                app_kwargs={"middleware": [Middleware(ClientAddress)]})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_up(url: str, server: subprocess.Popen, deadline_s: float = 120.0) -> None:
    """Until the app `server` runs answers at `url`; a server that exits first ends the benchmark."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the benchmark's server exited with code {server.returncode} before serving")
        try:
            httpx.get(f"{url}/config", timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise SystemExit(f"the benchmark's server at {url} did not start within {deadline_s:.0f} s")


def latencies(client: httpx.Client, keep_going, limit: int) -> list[float]:
    times = []
    while len(times) < limit and keep_going():
        started = time.perf_counter()
        client.get("/config").raise_for_status()
        times.append((time.perf_counter() - started) * 1000)
    return times


def measure(mode: str, flooders: int, attempts: int, requests: int) -> list[list]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "GRADIO_TEMP_DIR": tempfile.mkdtemp(prefix="mia-flood-")}
    server = subprocess.Popen([sys.executable, __file__, "--serve", mode, str(port)], cwd=REPO, env=env)
    try:
        wait_until_up(url, server)
        with httpx.Client(base_url=url, timeout=120) as user:
            assert user.post("/login", data={"username": USER, "password": PASSWORD}).status_code == 200
            latencies(user, lambda: True, 20)  # warm-up
            idle = latencies(user, lambda: True, requests)
            done = threading.Event()
            finished = []

            def flood(worker: int) -> None:
                with httpx.Client(base_url=url, timeout=300) as attacker:
                    for attempt in range(attempts):
                        attacker.post("/login", data={"username": f"guess{worker}", "password": f"no-{attempt}"})
                finished.append(worker)
                if len(finished) == flooders:
                    done.set()

            threads = [threading.Thread(target=flood, args=(w,), daemon=True) for w in range(flooders)]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            flooded = latencies(user, lambda: not done.is_set(), 10 * requests)
            for thread in threads:
                thread.join(timeout=600)
            flood_s = time.perf_counter() - started
    finally:
        server.kill()
        server.wait(timeout=30)
    rate = flooders * attempts / flood_s
    return [["idle", len(idle), *percentiles(idle), "-"],
            [f"{flooders} flooders", len(flooded), *percentiles(flooded), f"{rate:.1f}"]]


def percentiles(times: list[float]) -> list[str]:
    if len(times) < 2:
        return ["-", "-"]
    cuts = statistics.quantiles(times, n=20)
    return [f"{statistics.median(times):.1f}", f"{cuts[18]:.1f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flooders", type=int, default=6, help="sign-in loops at once")
    parser.add_argument("--attempts", type=int, default=30, help="wrong passwords each flooder tries")
    parser.add_argument("--requests", type=int, default=200, help="the signed-in user's requests when idle")
    parser.add_argument("--serve", nargs=2, metavar=("MODE", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return
    load_before = os.getloadavg()[0]
    rows = []
    for label, mode in MODES.items():
        rows += [[label, *row] for row in measure(mode, args.flooders, args.attempts, args.requests)]
    header = ["password check", "phase", "N", "p50 ms", "p95 ms", "logins/s"]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"load average (1 min): {load_before:.2f} before, {os.getloadavg()[0]:.2f} after ({os.cpu_count()} cores)")
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)))


if __name__ == "__main__":
    main()
