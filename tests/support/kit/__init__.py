"""The parts every metalfleet emulator shares, whatever cloud or BMC it stands in for.

* :mod:`.faults`: :class:`FaultSwitch` (throttle, capacity, 5xx, lost response, latency, scripted errors,
  request counters and log), :class:`Clock` (a test can move it forward) and :class:`FaultMiddleware`, the WSGI
  layer that puts them and the control endpoint (``/_metalfleet/faults|reset|clock|stats|requests|sim-hosts``)
  in front of the provider's app, answering faults in the provider's error format.
* :mod:`.simhosts`: :class:`SimHosts`, a VM-mode simulated GPU host per instance (profile from the offering),
  with its host key in a cloud-init console (:func:`console_text`) and SSH limited to what the instance's
  security groups allow (:meth:`SimHosts.apply_ssh_rules`).
* :mod:`.process`: :class:`EmulatorClient`, the object a test holds (start as ``python -m <module>``, stop, control
  calls), and :func:`run_server`, the server's main loop (``LISTENING <port>``, parent-pid watchdog, SIGTERM).

A new emulator (``tests/support/acme.py``, run as ``python -m metalfleet.testing.acme``)::

    SWITCH = FaultSwitch(FaultCodes(throttle=Fault("Throttling", 400, "Request was denied due to throttling."),
                                    server_error=Fault("ServiceUnavailable", 503, "Service unavailable."),
                                    capacity=Fault("OperationDenied.NoStock", 403, "No stock.")),
                         capacity_actions={"RunInstances"})
    CLOCK, SIM = Clock(), SimHosts(provider="acme")

    def error_body(code: str, message: str, status: int) -> ErrorBody:  # the provider's own error body
        doc = {"Code": code, "Message": message, "RequestId": str(uuid.uuid4())}
        return ErrorBody("application/json", json.dumps(doc).encode())

    def api(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        ...  # the service: RunInstances asks SWITCH.take_capacity(n) (False: answer no-stock naming the zone),
             # boots SIM.boot(id, offering, keys, tags) when SIM.enabled, and reads CLOCK.now() for anything timed

    class AcmeEmulator(EmulatorClient):  # tests: with AcmeEmulator.start(sim_hosts=True) as acme: ...
        module, title = "metalfleet.testing.acme", "ACME emulator"

    def main(argv: list[str] | None = None) -> int:
        parser = server_parser("ACME emulator", default_port=5070, sim_hosts_help="a simulated host per instance")
        return run_server(parser, parser.parse_args(argv), lambda: FaultMiddleware(
            api, switch=SWITCH, error_body=error_body, clock=CLOCK, sim_hosts=SIM), title="ACME emulator",
            sim_hosts=SIM)

    if __name__ == "__main__":
        sys.exit(main())

``FaultMiddleware(identify=...)`` reads the action and the parameters to log from the request (default: a
query-protocol ``Action`` parameter; an ACS3 call names it in its ``x-acs-action`` header, a REST API by method
and path), ``controls=`` adds the provider's own control endpoints, ``reset_state=`` empties its tables on
POST /_metalfleet/reset ``{"state": true}``, ``after_call=`` runs after each call (e.g.
``SIM.apply_ssh_rules(...)`` when security groups changed) and ``FaultSwitch(extra_keys=...)`` takes the
provider's own fault settings (``SWITCH.faults.extra``). The server needs werkzeug (extra ``testing``). The EC2
emulator (:mod:`metalfleet.testing.ec2`) is the full example; tests/emulators/kit_fake.py the smallest.
"""

from __future__ import annotations

from metalfleet.testing.kit.faults import (
    CONTROL_PREFIX,
    FAULT_KEYS,
    Clock,
    ErrorBody,
    Fault,
    FaultCodes,
    FaultMiddleware,
    Faults,
    FaultSwitch,
    ScriptedFault,
    StartResponse,
    WsgiApp,
    query_action,
)
from metalfleet.testing.kit.process import EmulatorClient, run_server, server_parser, watch_parent
from metalfleet.testing.kit.simhosts import HOST_KEYS_BEGIN, HOST_KEYS_END, SimHosts, console_text, merged

__all__ = ["CONTROL_PREFIX", "FAULT_KEYS", "HOST_KEYS_BEGIN", "HOST_KEYS_END", "Clock", "EmulatorClient",
           "ErrorBody", "Fault", "FaultCodes", "FaultMiddleware", "FaultSwitch", "Faults", "ScriptedFault",
           "SimHosts", "StartResponse", "WsgiApp", "console_text", "merged", "query_action", "run_server",
           "server_parser", "watch_parent"]
