"""A tiny emulator built on the emulator kit, for the kit's own tests (tests/emulators/test_kit.py).

Its "service" speaks the query protocol (``Action=...``) and answers JSON: ``Echo`` returns its parameters,
``Buy`` buys ``Count`` instances (asking the fault switch for capacity first, as a real emulator's launch does),
``Now`` answers the emulator's clock, ``Calls`` how many calls reached the service. Errors use an
Alibaba-like body ``{"Code", "Message", "RequestId"}``. Run as ``python -m tests.emulators.kit_fake``.
"""

from __future__ import annotations

import json
import sys
import urllib.parse
import uuid
from collections.abc import Iterable
from typing import Any

from metalfleet.testing.kit import (
    Clock,
    EmulatorClient,
    ErrorBody,
    Fault,
    FaultCodes,
    FaultMiddleware,
    FaultSwitch,
    StartResponse,
    run_server,
    server_parser,
)

CODES = FaultCodes(throttle=Fault("Throttling.User", 400, "Request was denied due to user flow control."),
                   server_error=Fault("ServiceUnavailable", 503, "The request has failed due to a temporary "
                                      "failure of the server."),
                   capacity=Fault("OperationDenied.NoStock", 403, "The resource is out of stock."))


class FakeService:
    """The provider's app behind the middleware: plain WSGI, state in memory."""

    def __init__(self, switch: FaultSwitch, clock: Clock) -> None:
        self.switch = switch
        self.clock = clock
        self.calls = 0
        self.bought: list[str] = []

    def reset(self) -> None:
        self.calls = 0
        self.bought = []

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        params = dict(urllib.parse.parse_qsl(body.decode()))
        params.update(urllib.parse.parse_qsl(environ.get("QUERY_STRING", "")))
        action = params.get("Action")
        if action is None:  # not an API call: the middleware passes it through uncounted
            return self._reply(start_response, 200, {"health": "ok"})
        self.calls += 1
        if action == "Echo":
            return self._reply(start_response, 200, {"Params": params})
        if action == "Buy":
            count = int(params.get("Count", 1))
            if not self.switch.take_capacity(count):
                fault = CODES.capacity
                return self._reply(start_response, fault.status, _error_doc(
                    fault.code, f"{fault.message} (zone {params.get('Zone', 'zone-a')})"))
            ids = [f"i-{uuid.uuid4().hex[:12]}" for _ in range(count)]
            self.bought += ids
            return self._reply(start_response, 200, {"InstanceIds": ids})
        if action == "Now":
            return self._reply(start_response, 200, {"Now": self.clock.now().isoformat()})
        if action == "Calls":
            return self._reply(start_response, 200, {"Calls": self.calls, "Bought": len(self.bought)})
        return self._reply(start_response, 400, _error_doc("InvalidAction.NotFound", f"no action {action}"))

    @staticmethod
    def _reply(start_response: StartResponse, status: int, doc: dict[str, Any]) -> list[bytes]:
        payload = json.dumps(doc).encode()
        start_response(f"{status} X", [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
        return [payload]


def _error_doc(code: str, message: str) -> dict[str, Any]:
    return {"Code": code, "Message": message, "RequestId": str(uuid.uuid4())}


def error_body(code: str, message: str, status: int) -> ErrorBody:
    doc = _error_doc(code, message)
    return ErrorBody("application/json", json.dumps(doc).encode(), (("x-acs-request-id", doc["RequestId"]),))


def build(switch: FaultSwitch | None = None, clock: Clock | None = None) -> tuple[FaultMiddleware, FakeService]:
    """The fake service behind the kit's middleware (fresh switch and clock unless given)."""
    switch = switch or FaultSwitch(CODES, capacity_actions={"Buy"})
    clock = clock or Clock()
    service = FakeService(switch, clock)
    app = FaultMiddleware(service, switch=switch, error_body=error_body, clock=clock, reset_state=service.reset,
                          controls={("GET", "bought"): lambda raw, query: list(service.bought)})
    return app, service


class FakeEmulator(EmulatorClient):
    module = "tests.emulators.kit_fake"
    title = "kit test emulator"


def main(argv: list[str] | None = None) -> int:
    parser = server_parser("kit test emulator", default_port=0)
    return run_server(parser, parser.parse_args(argv), lambda: build()[0], title="kit test emulator")


if __name__ == "__main__":
    sys.exit(main())
