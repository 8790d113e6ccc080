"""An emulator as a process: the server's main loop (127.0.0.1, ``LISTENING <port>``, parent-pid watchdog,
SIGTERM) and the client object a test holds (start, stop, control calls)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, Self

from metalfleet.testing.kit.faults import CONTROL_PREFIX, WsgiApp

if TYPE_CHECKING:
    from metalfleet.testing.kit.simhosts import SimHosts

__all__ = ["EmulatorClient", "dies_with_parent", "run_server", "server_parser", "watch_parent"]


def dies_with_parent(argv: list[str], sig: str = "TERM") -> list[str]:
    """``argv`` run through util-linux's ``setpriv --pdeathsig``: the daemon gets ``sig`` when the process that
    started it ends (a killed test run leaves no daemon behind). Not a ``preexec_fn``: that makes subprocess fork
    instead of vfork, and a fork of a test worker where gRPC runs (the Pulumi engine tests' language host) aborts
    in gRPC's fork handler before the exec ("epoll_wait error: Bad file descriptor", exit -6)."""
    import shutil

    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    return [setpriv, f"--pdeathsig={sig}", "--", *argv]


# ---------------------------------------------------------------------------------------------
# Client side.
# ---------------------------------------------------------------------------------------------
class EmulatorClient:
    """A running emulator subprocess and its control endpoint. Stop it with :meth:`stop` or use it as a
    context manager.

    A provider's client subclasses this and sets ``module`` (run as ``python -m <module>``, whose main is
    :func:`run_server`) and ``title`` (for error messages); :meth:`start` starts one. Any subclass counts as an
    "emulator" part in the test suite's per-area counts (tests/conftest.py).
    """

    module: ClassVar[str] = ""
    title: ClassVar[str] = "emulator"

    def __init__(self, process: subprocess.Popen[bytes], host: str, port: int) -> None:
        self.process = process
        self.host = host
        self.port = port
        self.url = f"http://{host}:{port}"

    @classmethod
    def start(cls, host: str = "127.0.0.1", port: int = 0, *, timeout: float = 60.0,
              log_path: str | os.PathLike[str] | None = None, sim_hosts: bool = False,
              args: tuple[str, ...] = ()) -> Self:
        """Start ``python -m <module>`` as a subprocess and wait until it answers its control endpoint.

        ``port=0`` lets the server pick a free port and report it; ``log_path`` receives its stderr (request
        log). ``sim_hosts``: boot a simulated GPU host per instance (needs root). ``args``: more server arguments.
        The server exits by itself when this process does.
        """
        from metalfleet.testing import usage as areas

        if not cls.module:
            raise TypeError(f"{cls.__name__}.module is not set (the emulator's python -m module)")
        areas.note("sim host" if sim_hosts else "emulator")
        cmd = [sys.executable, "-m", cls.module, "--host", host, "--port", str(port), "--quiet",
               "--parent-pid", str(os.getpid()), *args]
        if sim_hosts:
            cmd.append("--sim-hosts")
        if log_path:
            with open(log_path, "ab") as log:
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
        else:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    stdin=subprocess.DEVNULL)
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline() if proc.stdout else b""),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        if not line or not line[0].startswith(b"LISTENING "):
            proc.kill()
            proc.wait()
            raise RuntimeError(f"{cls.title} did not start within {timeout:.0f}s (exit code {proc.returncode})")
        client = cls(proc, host, int(line[0].split()[1]))
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.stats()
                return client
            except (OSError, RuntimeError):
                if time.monotonic() > deadline or proc.poll() is not None:
                    client.stop()
                    raise
                time.sleep(0.05)

    # -- control -----------------------------------------------------------------------------
    def control(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Call the control endpoint ``/_metalfleet/<path>``; its JSON answer (RuntimeError on an error)."""
        data = json.dumps(body or {}).encode() if method == "POST" else None
        req = urllib.request.Request(self.url + CONTROL_PREFIX + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"emulator control {path}: {exc.code} {exc.read().decode(errors='replace')}") from exc

    def set_faults(self, **faults: Any) -> None:
        """Replace the fault settings (anything not given is off)."""
        self.control("POST", "faults", faults)

    def reset_faults(self) -> None:
        """Faults off, counters and request log cleared, clock back to real time; the emulated state kept."""
        self.control("POST", "reset", {})

    def reset_state(self) -> None:
        """Faults off, counters cleared and every resource gone (simulated hosts stopped)."""
        self.control("POST", "reset", {"state": True})

    def stats(self) -> dict[str, Any]:
        """``{"requests": n, "by_action": {...}, "faults": {...}}`` (faults: injected, by code)."""
        result: dict[str, Any] = self.control("GET", "stats")
        return result

    def requests(self, action: str | None = None) -> list[dict[str, Any]]:
        """Requests as the server received them: ``{"action", "params", "status"}``, oldest first."""
        query = f"?action={urllib.parse.quote(action)}" if action else ""
        result: list[dict[str, Any]] = self.control("GET", "requests" + query)
        return result

    def calls(self, action: str | None = None) -> int:
        st = self.stats()
        return int(st["by_action"].get(action, 0)) if action else int(st["requests"])

    def advance_clock(self, seconds: float) -> str:
        """Move the emulator's clock forward by ``seconds``; returns the new time (ISO)."""
        result: dict[str, Any] = self.control("POST", "clock", {"advance_seconds": seconds})
        return str(result["now"])

    def sim_hosts(self) -> list[dict[str, Any]]:
        """The simulated hosts running now, one per live instance (empty without ``sim_hosts``)."""
        result: list[dict[str, Any]] = self.control("GET", "sim-hosts")
        return result

    def set_sim_host_rules(self, rules: list[dict[str, Any]]) -> None:
        """config.json values for hosts booted from now on: ``[{"tags": {...}, "config": {...}}]``."""
        self.control("POST", "sim-hosts", {"rules": rules})

    # -- lifecycle ---------------------------------------------------------------------------
    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (the server stops its simulated hosts, then exits), SIGKILL after ``timeout``."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        if self.process.stdout:
            self.process.stdout.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------------
# Server side.
# ---------------------------------------------------------------------------------------------
_SIM: list[SimHosts] = []  # the registry the exit path stops (set by run_server)


def _exit() -> NoReturn:
    for sims in _SIM:
        sims.stop_all()
    sys.stderr.flush()
    os._exit(0)


def watch_parent(pid: int, interval: float = 1.0) -> None:
    """Exit when the process that started us is gone, so a killed test run leaves no server behind."""
    while True:
        time.sleep(interval)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            _exit()
        except PermissionError:
            pass


def server_parser(description: str | None, *, default_port: int,
                  sim_hosts_help: str | None = None) -> argparse.ArgumentParser:
    """The arguments every emulator takes (``EmulatorClient.start`` passes them); add the provider's own.

    ``sim_hosts_help``: offer ``--sim-hosts`` (with this help) when the emulator can boot simulated hosts.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=default_port)
    parser.add_argument("--quiet", action="store_true", help="no request log")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this process exits")
    if sim_hosts_help:
        parser.add_argument("--sim-hosts", action="store_true", help=sim_hosts_help)
    return parser


def run_server(parser: argparse.ArgumentParser, args: argparse.Namespace, build_app: Callable[[], WsgiApp], *,
               title: str, sim_hosts: SimHosts | None = None, request_handler: type[Any] | None = None) -> int:
    """Serve ``build_app()`` on ``args.host``:``args.port`` until SIGTERM, Ctrl-C or the parent's exit.

    Prints ``LISTENING <port>`` on stdout once the socket is bound (port 0: the one picked), which
    :meth:`EmulatorClient.start` waits for. ``--sim-hosts`` enables ``sim_hosts`` (root only, checked now, not
    at the first launch); the hosts are stopped on every way out. The process ends with ``os._exit``: nothing
    in it outlives it, and tearing an emulator's tables down can take seconds.
    """
    from werkzeug.serving import make_server

    if sim_hosts is not None:
        _SIM.append(sim_hosts)
        if getattr(args, "sim_hosts", False):
            if os.geteuid() != 0:
                parser.error("--sim-hosts needs root (the simulated hosts' namespaces and mounts)")
            import metalfleet.testing.hosts.vm  # noqa: F401  (fail now, not at the first launch)

            sim_hosts.enabled = True
    signal.signal(signal.SIGTERM, lambda *_: _exit())
    if args.parent_pid:
        threading.Thread(target=watch_parent, args=(args.parent_pid,), daemon=True).start()
    if args.quiet:
        import logging

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
    handler: dict[str, Any] = {"request_handler": request_handler} if request_handler is not None else {}
    server = make_server(args.host, args.port, build_app(), threaded=True, **handler)
    try:
        port = server.server_port
        print(f"LISTENING {port}", flush=True)
        if not args.quiet:
            print(f"{title} on http://{args.host}:{port} (control: {CONTROL_PREFIX}faults, reset, stats, "
                  "requests); Ctrl-C stops it", file=sys.stderr, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
    finally:
        server.server_close()
    _exit()
