"""A Redfish BMC service for tests: sushy-tools' emulator (PyPI ``sushy-tools``, its fake systems driver) behind
the emulator kit's fault middleware.

Run as ``python -m metalfleet.testing.redfish --systems systems.json --state-dir DIR --auth-file htpasswd``
(tests use :class:`RedfishEmulator`). It serves ``/redfish/v1/Systems`` with one fake system per entry of
``systems.json`` (``[{"name": "gpu-03", "uuid": "..."}]``), checks HTTP basic authentication against the bcrypt
htpasswd file as a BMC checks its accounts (a wrong password answers 401), and takes the kit's faults
(``throttle`` answers 429, ``server_error`` 503, in Redfish's error format) and control endpoint.

Documented extensions, for tests only:

* ``--power-seconds``: a reset takes effect this long after the request (sushy-tools' fake driver waits a
  random 1-11 s, which would make every test wait for it);
* each system's power changes are appended to ``<state-dir>/<name>.log`` as ``set power 0|1`` lines (the format
  of the ``chassis_control`` log of the IPMI simulator), so :mod:`metalfleet.testing.bmc` switches the
  simulated GPU host behind the system off and on as the BMC says.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metalfleet.testing.kit import (
    EmulatorClient,
    ErrorBody,
    Fault,
    FaultCodes,
    FaultMiddleware,
    FaultSwitch,
    run_server,
    server_parser,
)

__all__ = ["CODES", "RedfishEmulator", "error_body", "main"]

CODES = FaultCodes(
    throttle=Fault("Base.1.8.ServiceTemporarilyUnavailable", 429, "The service is temporarily unavailable: "
                   "too many requests."),
    server_error=Fault("Base.1.8.InternalError", 503, "The request could not be completed: an internal error."),
    capacity=Fault("Base.1.8.ResourceExhaustion", 503, "The resources are exhausted."),
)


def error_body(code: str, message: str, status: int) -> ErrorBody:
    """Redfish's error reply (DSP0266 "Error responses")."""
    doc = {"error": {"code": code, "message": message, "@Message.ExtendedInfo": [
        {"MessageId": code, "Message": message, "Severity": "Critical"}]}}
    return ErrorBody("application/json", json.dumps(doc).encode())


_ID = re.compile(r"^/redfish/v1/Systems/[^/]+")


def identify(environ: dict[str, Any], body: bytes) -> tuple[str, dict[str, Any]] | None:
    """``GET /redfish/v1/Systems/{id}`` style action names; the service root and anything else are not counted."""
    path = environ.get("PATH_INFO", "")
    if not path.startswith("/redfish/v1/Systems"):
        return None
    params: dict[str, Any] = {}
    if body:
        try:
            params = json.loads(body)
        except ValueError:
            params = {"body": body.decode(errors="replace")}
    return f"{environ.get('REQUEST_METHOD', 'GET')} {_ID.sub('/redfish/v1/Systems/{id}', path)}", params


class RedfishEmulator(EmulatorClient):
    """The Redfish service of a simulated pool (see :func:`metalfleet.testing.bmc.start_bmc_pool`)."""

    module = "metalfleet.testing.redfish"
    title = "Redfish emulator (sushy-tools)"


def _build(args: argparse.Namespace, lock: threading.RLock) -> tuple[Any, Callable[..., None]]:
    from sushy_tools.emulator import main as sushy
    from sushy_tools.emulator.resources.systems import fakedriver

    systems = json.loads(Path(args.systems).read_text())
    state = Path(args.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    delay = float(args.power_seconds)
    original = fakedriver.FakeDriver.set_power_state

    def set_power_state(self: Any, identity: str, power: str) -> None:
        original(self, identity, power)
        system = self._get(identity)
        pending = system.get("pending_power")
        if pending:  # extension: the reset lands after --power-seconds, not a random 1-11 s
            self._update(system, pending_power={**pending, "apply_time": time.time() + delay})

    fakedriver.FakeDriver.set_power_state = set_power_state
    app = sushy.app
    app.configure(extra_config={
        "SUSHY_EMULATOR_FAKE_DRIVER": True,
        "SUSHY_EMULATOR_STATE_DIR": str(state / "sushy"),
        "SUSHY_EMULATOR_AUTH_FILE": args.auth_file,
        "SUSHY_EMULATOR_FAKE_SYSTEMS": [
            {"uuid": s["uuid"], "name": s["name"], "power_state": "Off", "external_notifier": False,
             "nics": [{"mac": f"00:5c:52:31:3a:{i:02x}", "ip": s.get("ip", "127.0.0.1")}]}
            for i, s in enumerate(systems)],
    })

    seen: dict[str, str] = {}

    def log_changes(*_call: object) -> None:  # extension: power changes -> <state>/<name>.log (IPMI's log format)
        with lock:
            for s in systems:
                try:
                    power = str(app.systems.get_power_state(s["uuid"]))
                except Exception:
                    continue
                if seen.get(s["uuid"], "Off") != power:
                    seen[s["uuid"]] = power
                    with open(state / f"{s['name']}.log", "a") as log:
                        log.write(f"{time.strftime('%T')} redfish set power {1 if power == 'On' else 0}\n")

    def watch() -> None:  # a reset lands by itself after --power-seconds: logged even when no client asks
        while True:
            log_changes()
            time.sleep(0.05)

    threading.Thread(target=watch, name="redfish-power-watch", daemon=True).start()
    return app, log_changes


def main(argv: list[str] | None = None) -> int:
    parser = server_parser("Redfish emulator (sushy-tools fake driver)", default_port=0)
    parser.add_argument("--systems", required=True, help="JSON file: [{name, uuid}] one fake system each")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--auth-file", required=True, help="htpasswd file (bcrypt), as sushy-tools reads it")
    parser.add_argument("--power-seconds", type=float, default=0.2)
    args = parser.parse_args(argv)
    lock = threading.RLock()
    switch = FaultSwitch(CODES)

    def build() -> FaultMiddleware:
        app, log_changes = _build(args, lock)
        # after every call too (the lock held): a power state a client was told is in the log before it hears it,
        # so what the pool reads as the BMC's power (BmcPool.power) never lags what the BMC answered
        return FaultMiddleware(app, switch=switch, error_body=error_body, identify=identify, lock=lock,
                               after_call=log_changes)

    return run_server(parser, args, build, title="Redfish emulator")


def new_system_uuid() -> str:
    return str(uuid.uuid4())


if __name__ == "__main__":
    sys.exit(main())
