"""BMC access: power status, on, off, cycle, reset and the boot device, over IPMI or Redfish.

* IPMI-over-LAN (IPMI 2.0 ``lanplus``) through pyghmi. pyghmi offers RMCP+ cipher suite 17 (SHA-256) and
  falls back to 3 (SHA-1); an inventory that asks for 17 refuses a BMC that only agreed to 3. pyghmi keeps
  process-wide session state, so calls are serialised per process.
* Redfish over HTTP(S) with requests: ``ComputerSystem.Reset`` and ``Boot.BootSourceOverride*``, TLS verified
  unless the host's ``verify_tls`` is false (a policy finding), with its ``ca_bundle`` when given.

Every call goes through :func:`~metalfleet.providers.ipmi.errors.boundary`. Each operation acts, then (with
``wait``) polls until the BMC reports the state, raising OperationTimeout past ``timeout``. The password comes
from the host's credentials reference at call time (:func:`password_for`) and is never stored on an object
that is pickled, logged or put in state.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from ..contract import PowerState
from ..errors import AuthError, InvalidSpecError, OperationTimeout, ProviderError
from ..retry import RetryPolicy
from .errors import PROVIDER, boundary
from .health import critical_event
from .model import Host

__all__ = ["BOOT_DEVICES", "Bmc", "IpmiBmc", "RedfishBmc", "bmc_for", "password_for"]

#: metalfleet boot devices -> (pyghmi set_bootdev name, Redfish BootSourceOverrideTarget)
BOOT_DEVICES: Mapping[str, tuple[str, str]] = {
    "pxe": ("network", "Pxe"), "network": ("network", "Pxe"), "disk": ("hd", "Hdd"), "hd": ("hd", "Hdd"),
    "cdrom": ("optical", "Cd"), "bios": ("setup", "BiosSetup"), "default": ("default", "None"),
}

_IPMI_LOCK = threading.RLock()
#: Redfish reads a BMC throttled or dropped are read again: a few quick tries (a read changes nothing).
READ_POLICY = RetryPolicy(attempts=6, max_delay=20.0, base=0.05, cap=1.0)
#: The most SEL records read per host (a full SEL of a real BMC holds a few thousand).
_SEL_MAX = 4096
#: (address, port, user, password) -> the pyghmi Command in use (in memory only; see IpmiBmc._command)
_COMMANDS: dict[tuple[str, int, str, str], Any] = {}
#: The same key -> the BMC's refusal: a password a BMC refused is not tried again by this process (BMCs lock an
#: account after a few failed logins; a fixed password is a new key).
_REFUSED: dict[tuple[str, int, str, str], str] = {}


def password_for(host: Host, secrets: Mapping[str, str] | None = None) -> str:
    """The BMC password the host's credentials refer to; InvalidSpecError naming the reference (never the
    value) when it cannot be read."""
    cred = host.spec.bmc.credentials
    where = f"{host.where}.bmc.credentials"
    if cred.env:
        value = os.environ.get(cred.env)
        if not value:
            raise InvalidSpecError(f"the BMC password of {host.name} is read from the environment variable {cred.env}, "
                                   "which is not set", field=f"{where}.env", value=cred.env, provider=PROVIDER)
        return value
    if cred.file:
        path = Path(os.path.expanduser(cred.file))
        try:
            return path.read_text().strip()
        except OSError as exc:
            raise InvalidSpecError(f"the BMC password file of {host.name} ({cred.file}) cannot be read: "
                                   f"{exc.strerror}", field=f"{where}.file", value=cred.file,
                                   provider=PROVIDER) from None
    key = str(cred.config)
    value = (secrets or {}).get(key)
    if not value:
        raise InvalidSpecError(f"the BMC password of {host.name} is the driver secret {key!r}, which is not set "
                               "(pulumi config set --secret --path 'metalfleet:driverConfig.secrets."
                               f"{key}' ...)", field=f"{where}.config", value=key, provider=PROVIDER)
    return value


class Bmc(Protocol):
    host: Host

    def power_state(self) -> PowerState: ...

    def set_power(self, state: PowerState, *, wait: bool = True, timeout: float = 300.0) -> None: ...

    def cycle(self, *, wait: bool = True, timeout: float = 300.0) -> None: ...

    def reset(self) -> None: ...

    def set_boot_device(self, device: str, *, persistent: bool = False) -> None: ...

    def critical_events(self) -> list[str]: ...


def _boot(device: str, host: Host) -> tuple[str, str]:
    try:
        return BOOT_DEVICES[device.lower()]
    except KeyError:
        raise InvalidSpecError(f"unknown boot device {device!r} for {host.name} (known: {', '.join(BOOT_DEVICES)})",
                               field="boot_device", value=device, provider=PROVIDER) from None


class _Waiting:
    host: Host

    def power_state(self) -> PowerState:
        raise NotImplementedError

    def _wait_for(self, state: PowerState, timeout: float, poll: float = 0.1) -> None:
        deadline = time.monotonic() + timeout
        while True:
            now = self.power_state()
            if now == state:
                return
            if time.monotonic() > deadline:
                raise OperationTimeout(f"BMC of {self.host.name} still reports power {now.value}, not {state.value}, "
                                       f"after {timeout:.0f}s", provider=PROVIDER, code="PowerTimeout")
            time.sleep(poll)


class IpmiBmc(_Waiting):
    """One host's BMC over IPMI 2.0 (pyghmi)."""

    def __init__(self, host: Host, password: str) -> None:
        self.host = host
        bmc = host.spec.bmc
        self._endpoint = f"ipmi {bmc.host}:{bmc.effective_port}"
        self._password = password

    def __repr__(self) -> str:
        return f"IpmiBmc({self.host.name}, {self._endpoint})"

    def _command(self) -> Any:
        """The process's pyghmi Command for this BMC and login. pyghmi shares one session per BMC and login, and
        a second Command made while that session lives can block for ever, so one is kept and reused, and only
        dropped once pyghmi marks its session broken."""
        from pyghmi.ipmi import command

        bmc = self.host.spec.bmc
        key = (bmc.host, bmc.effective_port, bmc.credentials.user, self._password)
        cmd = _COMMANDS.get(key)
        if cmd is None:
            cmd = command.Command(bmc=bmc.host, port=bmc.effective_port, userid=bmc.credentials.user,
                                  password=self._password)
            _COMMANDS[key] = cmd
        if bmc.cipher_suite == 17 and getattr(cmd.ipmi_session, "currhashlen", 16) != 16:
            raise ProviderError(f"BMC of {self.host.name} ({self._endpoint}) agreed only to cipher suite 3, and the "
                                "inventory asks for 17 (bmc.cipher_suite)", provider=PROVIDER, code="CipherSuite")
        return cmd

    def _call(self, action: str, fn: Any) -> Any:
        bmc = self.host.spec.bmc
        key = (bmc.host, bmc.effective_port, bmc.credentials.user, self._password)
        with _IPMI_LOCK:
            refused = _REFUSED.get(key)
            if refused is not None:  # never log in again with a password the BMC refused (lockout)
                raise AuthError(refused, provider=PROVIDER, code="AuthFailed")
            try:
                with boundary(action, host=self.host.name, endpoint=self._endpoint, secrets=[self._password]):
                    reused = key in _COMMANDS
                    try:
                        return fn(self._command())
                    except ProviderError:
                        raise
                    except Exception:
                        if not self._drop_if_broken(key) or not reused:
                            raise
                    # a kept session the BMC has since dropped (idle timeout, BMC reset): log in once more
                    try:
                        return fn(self._command())
                    except Exception:
                        self._drop_if_broken(key)
                        raise
            except AuthError as exc:
                _REFUSED[key] = exc.message
                raise

    @staticmethod
    def _drop_if_broken(key: tuple[str, int, str, str]) -> bool:
        cmd = _COMMANDS.get(key)
        if cmd is None:
            return True
        if getattr(cmd.ipmi_session, "broken", False):
            del _COMMANDS[key]
            return True
        return False

    def power_state(self) -> PowerState:
        raw = self._call("get power", lambda c: c.get_power())
        return {"on": PowerState.ON, "off": PowerState.OFF}.get(str(raw.get("powerstate")), PowerState.UNKNOWN)

    def set_power(self, state: PowerState, *, wait: bool = True, timeout: float = 300.0) -> None:
        if state not in (PowerState.ON, PowerState.OFF):
            raise InvalidSpecError(f"cannot set power {state.value}", field="power", value=state.value)
        self._call(f"power {state.value}", lambda c: c.set_power(state.value, wait=False))
        if wait:
            self._wait_for(state, timeout)

    def cycle(self, *, wait: bool = True, timeout: float = 300.0) -> None:
        """Off, then on (IPMI chassis power cycle); a host that is off is just powered on."""
        if self.power_state() == PowerState.OFF:
            self.set_power(PowerState.ON, wait=wait, timeout=timeout)
            return
        self._call("power off", lambda c: c.set_power("off", wait=False))
        self._wait_for(PowerState.OFF, timeout)
        self.set_power(PowerState.ON, wait=wait, timeout=timeout)

    def reset(self) -> None:
        self._call("power reset", lambda c: c.set_power("reset", wait=False))

    def set_boot_device(self, device: str, *, persistent: bool = False) -> None:
        name, _ = _boot(device, self.host)
        self._call(f"set boot device {name}", lambda c: c.set_bootdev(name, persist=persistent))

    def critical_events(self) -> list[str]:
        """The critical faults the System Event Log holds (:mod:`.health`), read record by record with raw Get
        SEL Entry commands (pyghmi's own SEL reader needs an SDR repository, which not every BMC fills)."""

        def read(cmd: Any) -> list[bytes]:
            records: list[bytes] = []
            record_id = 0
            for _ in range(_SEL_MAX):
                answer = cmd.raw_command(netfn=0x0A, command=0x43, data=[0, 0, record_id & 0xFF, record_id >> 8,
                                                                         0, 0xFF])
                if answer.get("error") or answer.get("code"):
                    break  # an empty SEL answers "not present" (0xCB)
                data = bytes(answer["data"])
                records.append(data[2:18])
                record_id = data[0] | data[1] << 8
                if record_id == 0xFFFF:
                    break
            return records

        return [e for e in (critical_event(r) for r in self._call("read the SEL", read)) if e]


class RedfishBmc(_Waiting):
    """One host's BMC over Redfish (HTTP(S), basic authentication per request)."""

    def __init__(self, host: Host, password: str) -> None:
        import requests

        self.host = host
        bmc = host.spec.bmc
        self._base = bmc.url
        self._session = requests.Session()
        self._session.auth = (bmc.credentials.user, password)
        self._session.verify = (bmc.ca_bundle or True) if bmc.verify_tls else False
        self._session.headers["Accept"] = "application/json"
        self._password = password
        self._timeout = bmc.timeout
        self._system: str | None = bmc.system

    def __repr__(self) -> str:
        return f"RedfishBmc({self.host.name}, {self._base})"

    def _request(self, method: str, path: str, action: str, body: dict[str, Any] | None = None) -> Any:
        """One Redfish call. A read the BMC throttles (HTTP 429) is read again here, under :data:`READ_POLICY`:
        one busy answer among the many reads of an order (power polls, health) must not undo the whole order."""
        if method == "GET":
            return READ_POLICY.call(self._send, method, path, action, body)
        return self._send(method, path, action, body)

    def _send(self, method: str, path: str, action: str, body: dict[str, Any] | None) -> Any:
        with boundary(action, host=self.host.name, endpoint=self._base + path, secrets=[self._password]):
            resp = self._session.request(method, self._base + path, json=body, timeout=self._timeout)
            resp.raise_for_status()
            return resp.json() if resp.content and "json" in resp.headers.get("Content-Type", "") else {}

    def system(self) -> str:
        """The system's path: the inventory's ``bmc.system``, else the service's only system."""
        if self._system is None:
            members = self._request("GET", "/redfish/v1/Systems", "list systems").get("Members") or []
            if len(members) != 1:
                raise InvalidSpecError(f"the Redfish service of {self.host.name} ({self._base}) has {len(members)} "
                                       "systems: name one with bmc.system", field=f"{self.host.where}.bmc.system",
                                       value=None, provider=PROVIDER)
            self._system = str(members[0]["@odata.id"])
        return self._system

    def power_state(self) -> PowerState:
        raw = str(self._request("GET", self.system(), "get power").get("PowerState") or "")
        return {"On": PowerState.ON, "Off": PowerState.OFF}.get(raw, PowerState.UNKNOWN)

    def _reset(self, kind: str) -> None:
        doc = self._request("GET", self.system(), "get system")
        target = (((doc.get("Actions") or {}).get("#ComputerSystem.Reset") or {}).get("target")
                  or f"{self.system()}/Actions/ComputerSystem.Reset")
        self._request("POST", target, f"reset {kind}", {"ResetType": kind})

    def set_power(self, state: PowerState, *, wait: bool = True, timeout: float = 300.0) -> None:
        if state not in (PowerState.ON, PowerState.OFF):
            raise InvalidSpecError(f"cannot set power {state.value}", field="power", value=state.value)
        if self.power_state() != state:
            self._reset("On" if state == PowerState.ON else "ForceOff")
        if wait:
            self._wait_for(state, timeout)

    def cycle(self, *, wait: bool = True, timeout: float = 300.0) -> None:
        if self.power_state() == PowerState.OFF:
            self.set_power(PowerState.ON, wait=wait, timeout=timeout)
            return
        self.set_power(PowerState.OFF, wait=True, timeout=timeout)
        self.set_power(PowerState.ON, wait=wait, timeout=timeout)

    def reset(self) -> None:
        self._reset("ForceRestart")

    def critical_events(self) -> list[str]:
        """The system's own verdict: ``Status.Health`` Critical (Redfish rolls the hardware's faults up into it)."""
        status = self._request("GET", self.system(), "get system health").get("Status") or {}
        return [f"Redfish system health {status.get('Health')}"] if status.get("Health") == "Critical" else []

    def set_boot_device(self, device: str, *, persistent: bool = False) -> None:
        _, target = _boot(device, self.host)
        self._request("PATCH", self.system(), f"set boot device {target}", {"Boot": {
            "BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Continuous" if persistent else "Once"}})


def bmc_for(host: Host, secrets: Mapping[str, str] | None = None) -> Bmc:
    """The BMC client for ``host`` (its SDK loads now: pyghmi for ipmi, requests for redfish)."""
    password = password_for(host, secrets)
    if host.spec.bmc.protocol == "ipmi":
        return IpmiBmc(host, password)
    return RedfishBmc(host, password)
