"""Fault switch, test clock and the WSGI middleware that puts them, a request log and the control endpoint in
front of an emulator's own app. Provider-neutral: the provider says how a request names its action, which
error codes its faults answer and what its error body looks like.

The switch is shared by the middleware (throttle, 5xx, scripted errors, latency, lost responses) and the
provider's app, which asks :meth:`FaultSwitch.take_capacity` before it buys anything: only the app knows the
zone and type a capacity error has to name.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metalfleet.testing.kit.simhosts import SimHosts

__all__ = ["CONTROL_PREFIX", "FAULT_KEYS", "Clock", "ErrorBody", "Fault", "FaultCodes", "FaultMiddleware",
           "FaultSwitch", "Faults", "ScriptedFault", "StartResponse", "WsgiApp", "query_action"]

#: Where the control endpoint lives on every emulator (never counted, never faulted).
CONTROL_PREFIX = "/_metalfleet/"
#: The settings POST /_metalfleet/faults takes (a provider may add its own: ``FaultSwitch(extra_keys=...)``).
FAULT_KEYS = frozenset({"throttle", "capacity", "server_error", "lost_response", "latency_ms", "seed", "actions",
                        "capacity_remaining", "script"})

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


@dataclass(frozen=True)
class Fault:
    """An error a fault answers with: the provider's own code, the HTTP status and the message."""

    code: str
    status: int
    message: str


@dataclass(frozen=True)
class FaultCodes:
    """The provider's errors for each kind of fault.

    ``capacity`` is what :meth:`FaultSwitch.take_capacity` counts a refusal under; the app answers it itself
    (its message names the zone and type, which only the app knows). ``lost_response``: what replaces an
    answer lost on the way back (default: ``server_error``).
    """

    throttle: Fault
    server_error: Fault
    capacity: Fault
    lost_response: Fault | None = None


@dataclass(frozen=True)
class ErrorBody:
    """An error reply as the provider sends it: content type, body, any extra headers (e.g. a request id)."""

    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


@dataclass
class ScriptedFault:
    """Fail chosen calls deterministically: skip ``after`` matching calls, then fail ``times`` (-1: for ever)."""

    action: str | None
    code: str
    status: int = 400
    message: str | None = None
    after: int = 0
    times: int = 1
    seen: int = 0


@dataclass
class Faults:
    throttle: float = 0.0
    capacity: float = 0.0
    server_error: float = 0.0
    lost_response: float = 0.0
    latency_ms: float = 0.0
    seed: int | None = None
    actions: set[str] | None = None
    capacity_remaining: int | None = None
    script: list[ScriptedFault] = field(default_factory=list)
    #: the provider's own settings (``FaultSwitch(extra_keys=...)``), as posted
    extra: dict[str, Any] = field(default_factory=dict)


class FaultSwitch:
    """The fault settings, the request counters and the request log of one emulator process; one lock guards them.

    ``capacity_actions``: the actions a random ``capacity`` fault applies to (the ones that buy instances);
    the app calls :meth:`take_capacity` for them.
    """

    def __init__(self, codes: FaultCodes, *, capacity_actions: Iterable[str] = (),
                 extra_keys: Iterable[str] = ()) -> None:
        self.codes = codes
        self.capacity_actions = frozenset(capacity_actions)
        self.keys = FAULT_KEYS | frozenset(extra_keys)
        self.lock = threading.Lock()
        self.faults = Faults()
        self.rng = random.Random()
        self.local = threading.local()
        self.clear_log()

    def clear_log(self) -> None:
        self.requests = 0
        self.by_action: dict[str, int] = {}
        self.injected: dict[str, int] = {}
        self.log: list[dict[str, Any]] = []

    def configure(self, raw: Mapping[str, Any]) -> None:
        """Replace the settings (anything not given is off); ValueError names an unknown or bad setting."""
        unknown = set(raw) - self.keys
        if unknown:
            raise ValueError(f"unknown fault setting(s): {sorted(unknown)}; known: {sorted(self.keys)}")
        for key in ("throttle", "capacity", "server_error", "lost_response"):
            if not 0.0 <= float(raw.get(key, 0.0)) <= 1.0:
                raise ValueError(f"{key} must be a fraction between 0 and 1")
        script = [ScriptedFault(action=s.get("action"), code=s["code"], status=int(s.get("status", 400)),
                                message=s.get("message"), after=int(s.get("after", 0)),
                                times=int(s.get("times", 1)))
                  for s in raw.get("script", [])]
        with self.lock:
            self.faults = Faults(
                throttle=float(raw.get("throttle", 0.0)), capacity=float(raw.get("capacity", 0.0)),
                server_error=float(raw.get("server_error", 0.0)),
                lost_response=float(raw.get("lost_response", 0.0)), latency_ms=float(raw.get("latency_ms", 0.0)),
                seed=raw.get("seed"), actions=set(raw["actions"]) if raw.get("actions") else None,
                capacity_remaining=raw.get("capacity_remaining"), script=script,
                extra={k: v for k, v in raw.items() if k not in FAULT_KEYS})
            self.rng = random.Random(raw.get("seed"))

    def count(self, what: str) -> None:
        """Count an injected fault (call with the lock held)."""
        self.injected[what] = self.injected.get(what, 0) + 1

    def applies(self, action: str) -> bool:
        """Whether the random faults and the latency apply to ``action`` (the ``actions`` setting)."""
        return self.faults.actions is None or action in self.faults.actions

    def record(self, action: str, params: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """Count a call and log it; returns its log entry (the caller fills in ``status``) and the latency (s)."""
        entry: dict[str, Any] = {"action": action, "params": params, "status": None}
        self.local.entry = entry
        with self.lock:
            self.requests += 1
            self.by_action[action] = self.by_action.get(action, 0) + 1
            self.log.append(entry)
            latency = self.faults.latency_ms if self.applies(action) else 0.0
        return entry, latency / 1000.0

    def note_rule(self, rule_id: str) -> None:
        """Record on this thread's current call that the app applied reference rule ``rule_id`` (an entry of
        :mod:`metalfleet.testing.reference`): the log says which rule answered, so a test can tell a rule it
        probes from another that happens to answer the same code."""
        entry = getattr(self.local, "entry", None)
        if entry is not None:
            with self.lock:
                entry.setdefault("rules", []).append(rule_id)

    def decide(self, action: str) -> Fault | None:
        """An error to answer instead of calling the app, or None. Capacity is left to the app."""
        with self.lock:
            f = self.faults
            self.local.capacity = False
            for s in f.script:
                if s.action not in (None, action) or s.times == 0:
                    continue
                s.seen += 1
                if s.seen <= s.after:
                    continue
                s.times -= 1 if s.times > 0 else 0
                self.count(s.code)
                return Fault(s.code, s.status, s.message or f"Injected {s.code} for {action}.")
            if not self.applies(action):
                return None
            if f.throttle and self.rng.random() < f.throttle:
                self.count(self.codes.throttle.code)
                return self.codes.throttle
            if f.server_error and self.rng.random() < f.server_error:
                self.count(self.codes.server_error.code)
                return self.codes.server_error
            if action in self.capacity_actions and f.capacity and self.rng.random() < f.capacity:
                self.local.capacity = True
            return None

    def lose_response(self, action: str) -> Fault | None:
        """After the app has done the work: the error that replaces its answer (the client cannot tell), or None."""
        with self.lock:
            f = self.faults
            if not f.lost_response or not self.applies(action):
                return None
            if self.rng.random() < f.lost_response:
                self.count("LostResponse")
                return self.codes.lost_response or self.codes.server_error
            return None

    def take_capacity(self, count: int) -> bool:
        """Called by the app before it buys ``count`` instances: False means answer the capacity error."""
        with self.lock:
            forced = bool(getattr(self.local, "capacity", False))
            self.local.capacity = False
            remaining = self.faults.capacity_remaining
            if forced or (remaining is not None and remaining < count):
                self.count(self.codes.capacity.code)
                return False
            if remaining is not None:
                self.faults.capacity_remaining = remaining - count
            return True

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {"requests": self.requests, "by_action": dict(self.by_action), "faults": dict(self.injected)}

    def entries(self, action: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(e) for e in self.log if not action or e["action"] == action]


class Clock:
    """The emulator's time: real time plus what a test moved it forward by (control endpoint ``clock``).

    Whatever the provider's service does "over time" (a job finishing, a reservation starting) reads this,
    so a test can let an hour pass without waiting it.
    """

    def __init__(self) -> None:
        self.offset = timedelta()

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def time(self) -> float:
        """Seconds since the epoch, as :func:`time.time`."""
        return time.time() + self.offset.total_seconds()

    def advance(self, seconds: float) -> datetime:
        self.offset += timedelta(seconds=seconds)
        return self.now()

    def reset(self) -> None:
        self.offset = timedelta()


def query_action(environ: dict[str, Any], body: bytes) -> tuple[str, dict[str, Any]] | None:
    """The action and flat parameters of a query-protocol call (``Action=...`` in the form body or the query
    string, as EC2 and RPC-style APIs send it); None for anything else."""
    params = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    params.update(urllib.parse.parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
    action = params.get("Action")
    return (action, params) if action else None


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


class FaultMiddleware:
    """WSGI middleware: the control endpoint, then for each API call its log entry, latency, faults and lost
    responses, around ``app`` (the provider's emulator).

    ``identify(environ, body)``: the call's action name and the parameters to log, or None for a request that
    is not an API call (passed to ``app`` uncounted, e.g. a health check). ``error_body(code, message, status)``:
    the provider's error reply. ``lock``: held around every call into ``app`` (default: one lock, so the app
    needs no thread safety of its own; latency is waited outside it). ``after_call(action, status)``: called with
    the lock still held after ``app`` answered (e.g. to re-apply security-group rules to simulated hosts).
    ``reset_state()``: what POST /_metalfleet/reset ``{"state": true}`` does besides stopping the simulated
    hosts (empty the app's tables). ``controls``: the provider's own control endpoints, ``{(method, name):
    handler(json_body, query)}``, answering JSON.
    """

    def __init__(self, app: WsgiApp, *, switch: FaultSwitch,
                 error_body: Callable[[str, str, int], ErrorBody],
                 identify: Callable[[dict[str, Any], bytes], tuple[str, dict[str, Any]] | None] = query_action,
                 clock: Clock | None = None, sim_hosts: SimHosts | None = None,
                 lock: contextlib.AbstractContextManager[Any] | None = None,
                 after_call: Callable[[str, int], None] | None = None,
                 reset_state: Callable[[], None] | None = None,
                 controls: Mapping[tuple[str, str], Callable[[dict[str, Any], dict[str, str]], Any]] | None = None,
                 ) -> None:
        self.app = app
        self.switch = switch
        self.error_body = error_body
        self.identify = identify
        self.clock = clock or Clock()
        self.sim_hosts = sim_hosts
        self.lock: contextlib.AbstractContextManager[Any] = lock if lock is not None else threading.RLock()
        self.after_call = after_call
        self.reset_state = reset_state
        self.controls = dict(controls or {})

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith(CONTROL_PREFIX):
            return self._control(path[len(CONTROL_PREFIX):], environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        self.switch.local.entry = None
        call = self.identify(environ, body)
        if call is None:
            with self.lock:
                return list(self.app(environ, start_response))
        action, params = call
        entry, latency = self.switch.record(action, params)
        if latency:
            time.sleep(latency)
        fault = self.switch.decide(action)
        if fault:
            return self.error(entry, fault, start_response)

        captured: list[Any] = []

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            captured[:] = [status, headers, exc_info]
            return lambda _data: None

        with self.lock:
            started = time.perf_counter()
            body_out = list(self.app(environ, capture))
            entry["server_ms"] = round((time.perf_counter() - started) * 1000.0, 2)
            status = int(captured[0].split()[0]) if captured else 500
            if self.after_call is not None:
                self.after_call(action, status)
        lost = self.switch.lose_response(action)
        if lost:
            return self.error(entry, lost, start_response)
        entry["status"] = status
        start_response(*captured)
        return body_out

    def error(self, entry: dict[str, Any] | None, fault: Fault, start_response: StartResponse) -> Iterable[bytes]:
        """Answer ``fault`` in the provider's error format (and log its status on ``entry``)."""
        if entry is not None:
            entry["status"] = fault.status
        reply = self.error_body(fault.code, fault.message, fault.status)
        start_response(f"{fault.status} {_reason(fault.status)}",
                       [("Content-Type", reply.content_type), ("Content-Length", str(len(reply.body))),
                        *reply.headers])
        return [reply.body]

    def _control(self, what: str, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            raw = json.loads(environ["wsgi.input"].read(length) or b"{}") if method == "POST" else {}
            query = dict(urllib.parse.parse_qsl(environ.get("QUERY_STRING", "")))
            result = self.control(method, what, raw, query)
            status, payload = "200 OK", json.dumps(result).encode()
        except (ValueError, KeyError, TypeError) as exc:
            status, payload = "400 Bad Request", json.dumps({"error": str(exc)}).encode()
        except LookupError as exc:
            status, payload = "404 Not Found", json.dumps({"error": str(exc)}).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
        return [payload]

    def control(self, method: str, what: str, raw: dict[str, Any], query: dict[str, str]) -> Any:
        """One control call: its JSON answer. ValueError/KeyError/TypeError answer 400, LookupError 404."""
        sims = self.sim_hosts
        handler = self.controls.get((method, what))
        if handler is not None:
            return handler(raw, query)
        if what == "faults" and method == "POST":
            self.switch.configure(raw)
            return {"ok": True}
        if what == "reset" and method == "POST":
            self.switch.configure({})
            with self.switch.lock:
                self.switch.clear_log()
            self.clock.reset()
            if sims is not None:
                sims.configure([])
            if raw.get("state"):
                with self.lock:
                    if self.reset_state is not None:
                        self.reset_state()
                    if sims is not None:
                        sims.stop_all()
            return {"ok": True}
        if what == "clock" and method == "POST":
            return {"now": self.clock.advance(float(raw.get("advance_seconds", 0))).isoformat()}
        if what == "sim-hosts" and sims is not None and method == "GET":
            return sims.listing()
        if what == "sim-hosts" and sims is not None and method == "POST":
            sims.configure(raw.get("rules", []))
            return {"ok": True}
        if what == "stats" and method == "GET":
            return self.switch.stats()
        if what == "requests" and method == "GET":
            return self.switch.entries(query.get("action"))
        raise LookupError(f"no control endpoint {method} {CONTROL_PREFIX}{what}")
