"""A simulated pool of GPU servers with real BMCs: each host is a VM-mode simulated GPU host (SSH on its own
127.x address) behind its own BMC, which switches it off and on.

* IPMI: one OpenIPMI ``ipmi_sim`` (Debian package ``openipmi``) per host on its own 127.0.0.1 UDP port, set up
  from the verified recipe in ``fixtures/ipmi_sim`` (LAN config, emulator file, the ``chassis_control`` script
  that keeps power and boot state in files and logs every request);
* Redfish: one sushy-tools emulator (:mod:`metalfleet.testing.redfish`) with a fake system per host.

A watcher thread reads each BMC's power log (``set power 0|1``, ``set reset 1``) and powers the host's machine
off and on accordingly: after power-on its sshd answers, after power-off nothing does. So a test sees a pool
node come up only because the driver really told its BMC to power it on. Hosts start powered off, as the BMCs
report. Needs root (VM-mode hosts) and ``ipmi_sim``/``ipmitool`` for IPMI hosts::

    from metalfleet.testing.bmc import start_bmc_pool

    with start_bmc_pool(["ipmi", "redfish"], authorized_keys=[pub]) as pool:
        inventory = pool.write_inventory(tmp / "pool.yaml")   # pool inventory, credentials as a file reference
        pool.power("host0")                                    # "on" / "off" as the simulator holds it
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metalfleet.testing import usage as areas
from metalfleet.testing.kit.process import dies_with_parent

__all__ = ["IPMI_SIM_DIR", "PSU_FAILURE_SEL", "BmcHost", "BmcPool", "start_bmc_pool"]

IPMI_SIM_DIR = Path(__file__).resolve().parent / "fixtures" / "ipmi_sim"
USER = "admin"


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class BmcHost:
    """One pool host: its simulated machine, its BMC and the BMC's power log."""

    name: str
    protocol: str
    vm: Any  # metalfleet.testing.hosts.vm.VmHost
    port: int
    log: Path
    state_dir: Path
    system: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    offset: int = 0
    on: bool = False

    @property
    def address(self) -> str:
        return str(self.vm.address)


@dataclass
class BmcPool:
    base: Path
    password: str
    hosts: list[BmcHost] = field(default_factory=list)
    redfish: Any = None  # RedfishEmulator
    fleet: Any = None  # HostFleet of the VM hosts
    _stop: threading.Event = field(default_factory=threading.Event)
    _watcher: threading.Thread | None = None

    def __getitem__(self, name: str) -> BmcHost:
        return next(h for h in self.hosts if h.name == name)

    @property
    def password_file(self) -> Path:
        return self.base / "bmc-password"

    # -- what the simulators hold ---------------------------------------------------------------
    def power(self, name: str) -> str:
        """The host's power as its BMC simulator holds it (not as any client reports it)."""
        h = self[name]
        if h.protocol == "ipmi":
            raw = (h.state_dir / "power").read_text().strip() if (h.state_dir / "power").exists() else "0"
            return "on" if raw == "1" else "off"
        lines = h.log.read_text().splitlines() if h.log.exists() else []
        return "on" if lines and lines[-1].endswith("power 1") else "off"

    def boot_device(self, name: str) -> str | None:
        """IPMI: the boot device the chassis_control script was last told (``pxe``, ``default``...)."""
        f = self[name].state_dir / "boot"
        return f.read_text().strip() if f.exists() else None

    def bmc_log(self, name: str) -> list[str]:
        h = self[name]
        return h.log.read_text().splitlines() if h.log.exists() else []

    def requests(self) -> int:
        """BMC requests so far: chassis_control calls (IPMI) plus Redfish API calls."""
        n = sum(len([ln for ln in self.bmc_log(h.name) if " get " in ln or " set " in ln])
                for h in self.hosts if h.protocol == "ipmi")
        return n + (self.redfish.calls() if self.redfish is not None else 0)

    # -- the inventory ----------------------------------------------------------------------
    def inventory(self, pool: str = "pool-a", hosts: Sequence[str] | None = None,
                  host_fields: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
        """A pool inventory for these hosts: the BMC password as a file reference, host keys pinned."""
        out = []
        for h in self.hosts:
            if hosts is not None and h.name not in hosts:
                continue
            bmc: dict[str, Any] = {"protocol": h.protocol, "port": h.port,
                                   "credentials": {"user": USER, "file": str(self.password_file)}}
            if h.protocol == "ipmi":
                bmc["address"] = "127.0.0.1"
            else:
                bmc.update(address="http://127.0.0.1", system=h.system)
            entry: dict[str, Any] = {"name": h.name, "bmc": bmc,
                     "ssh": {"address": h.address, "port": 22, "host_keys": [h.vm.host_key]},
                     "hardware": {"gpu_model": "H100", "gpu_count": 8, "fabric": "infiniband"},
                     "labels": {"rack": "r1"}}
            for k, v in (host_fields or {}).get(h.name, {}).items():
                entry[k] = {**entry.get(k, {}), **v} if isinstance(v, Mapping) else v
            out.append(entry)
        return {"pool": pool, "management_cidrs": ["127.0.0.0/8"], "hosts": out}

    def write_inventory(self, path: str | os.PathLike[str], **kw: Any) -> Path:
        import yaml

        p = Path(path)
        p.write_text(yaml.safe_dump(self.inventory(**kw), sort_keys=False))
        return p

    # -- power follows the BMC ----------------------------------------------------------------
    def _apply(self, h: BmcHost, line: str) -> None:
        words = line.split()
        if "set" not in words:
            return
        op = words[words.index("set") + 1:]
        if op[:2] == ["power", "1"] and not h.on:
            h.vm.power_on(boot=True)
            h.on = True
        elif op[:2] == ["power", "0"] and h.on:
            h.vm.power_off()
            h.on = False
        elif op[:2] == ["reset", "1"] and h.on:
            h.vm.power_off()
            h.vm.power_on(boot=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            for h in self.hosts:
                try:
                    with open(h.log, "rb") as fh:
                        fh.seek(h.offset)
                        chunk = fh.read()
                except FileNotFoundError:
                    continue
                if b"\n" not in chunk:
                    continue
                complete = chunk[:chunk.rindex(b"\n") + 1]
                h.offset += len(complete)
                for line in complete.decode(errors="replace").splitlines():
                    with contextlib.suppress(Exception):  # a host that fails to switch shows as not answering
                        self._apply(h, line)
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(5)
        for h in self.hosts:
            if h.proc is not None and h.proc.poll() is None:
                h.proc.terminate()
                try:
                    h.proc.wait(5)
                except subprocess.TimeoutExpired:
                    h.proc.kill()
                    h.proc.wait(5)
        if self.redfish is not None:
            self.redfish.stop()
        if self.fleet is not None:
            self.fleet.stop()
        if not os.environ.get("MF_KEEP_HOSTS"):
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> BmcPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: An emulator command adding a "Power Supply #1: failure detected, asserted" system event to a BMC's SEL
#: (``sel_add``, ipmi_sim_cmd(5)): record type 0x02, timestamp 0, generator 0x20, EvM rev 4, sensor type 0x08
#: (power supply), sensor 1, event type 0x6f (sensor-specific), data 1 offset 0x01 (failure detected).
PSU_FAILURE_SEL = "sel_add 0x20 0x02 0x00 0x00 0x00 0x00 0x20 0x00 0x04 0x08 0x01 0x6f 0x01 0xff 0xff"


def _start_ipmi_sim(h: BmcHost, password: str, ipmitool: str, emu_extra: Sequence[str] = ()) -> None:
    d = h.state_dir
    d.mkdir(parents=True, exist_ok=True)
    script = d / "chassis.sh"
    shutil.copy(IPMI_SIM_DIR / "chassis.sh", script)
    script.chmod(0o755)
    lan = (IPMI_SIM_DIR / "lan.conf").read_text()
    lan = lan.replace("addr 127.0.0.1 9623", f"addr 127.0.0.1 {h.port}")
    lan = lan.replace("/path/to/chassis.sh", str(script))
    lan = lan.replace('"admin" "pass"', f'"{USER}" "{password}"')
    (d / "lan.conf").write_text(lan)
    emu = (IPMI_SIM_DIR / "gpusim.emu").read_text()
    (d / "gpusim.emu").write_text(emu + "".join(f"{line}\n" for line in emu_extra))
    (d / "sim").mkdir(exist_ok=True)
    env = {**os.environ, "CHASSIS_STATE_DIR": str(d)}
    with open(d / "ipmi_sim.log", "ab") as out:
        h.proc = subprocess.Popen(dies_with_parent(["ipmi_sim", "-c", str(d / "lan.conf"), "-f",
                                                    str(d / "gpusim.emu"), "-s", str(d / "sim"), "-n"]),
                                  stdout=out, stderr=out, stdin=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 15
    while True:  # answers a real IPMI 2.0 session (ipmitool, cipher suite 3) once it is up
        res = subprocess.run([ipmitool, "-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", str(h.port),
                              "-U", USER, "-E", "chassis", "power", "status"], capture_output=True, text=True,
                             env={**os.environ, "IPMI_PASSWORD": password}, timeout=20, check=False)
        if res.returncode == 0:
            return
        if h.proc.poll() is not None or time.monotonic() > deadline:
            log = (d / "ipmi_sim.log").read_text(errors="replace")[-1500:]
            raise RuntimeError(f"ipmi_sim for {h.name} on UDP {h.port} did not answer: {res.stderr.strip()}\n{log}")
        time.sleep(0.2)


def _htpasswd(path: Path, user: str, password: str) -> None:
    import bcrypt

    digest = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    path.write_text(f"{user}:{digest}\n")


def start_bmc_pool(protocols: Sequence[str], *, profile: str = "h100-ib", authorized_keys: Sequence[str] = (),
                   password: str | None = None, base_dir: str | os.PathLike[str] | None = None,
                   power_seconds: float = 0.2, name_prefix: str = "host",
                   emu_extra: Mapping[str, Sequence[str]] | None = None) -> BmcPool:
    """One simulated host per entry of ``protocols`` (``ipmi`` or ``redfish``), named ``<prefix><i>``, each
    powered off behind its BMC. ``password``: the BMCs' admin password (default: a random one), also written to
    :attr:`BmcPool.password_file`. ``emu_extra``: more ipmi_sim emulator commands per IPMI host name (e.g.
    :data:`PSU_FAILURE_SEL`, a failed power supply in its SEL)."""
    from metalfleet.testing.hosts.vm import start_vm_hosts

    bad = sorted(set(protocols) - {"ipmi", "redfish"})
    if bad:
        raise ValueError(f"unknown BMC protocol(s) {bad}")
    ipmitool = ""
    if "ipmi" in protocols:
        for tool in ("ipmi_sim", "ipmitool"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"missing prerequisite: {tool} is not on PATH (Debian: apt-get install openipmi "
                                   "ipmitool; `make bmc-tools` does it)")
        ipmitool = str(shutil.which("ipmitool"))
    areas.note("sim host")
    base = Path(tempfile.mkdtemp(prefix="mf-bmc-", dir=base_dir))
    pool = BmcPool(base=base, password=password or f"bmc-{uuid.uuid4().hex[:12]}")
    pool.password_file.write_text(pool.password + "\n")
    pool.password_file.chmod(0o600)
    try:
        pool.fleet = start_vm_hosts(len(protocols), profile, name_prefix=name_prefix, authorized_keys=authorized_keys)
        for i, (vm, protocol) in enumerate(zip(pool.fleet.hosts, protocols, strict=True)):
            vm.power_off()
            name = f"{name_prefix}{i}"
            state = base / name
            state.mkdir()
            log = state / "chassis.log" if protocol == "ipmi" else base / "redfish" / f"{name}.log"
            pool.hosts.append(BmcHost(name=name, protocol=protocol, vm=vm, port=0, log=log, state_dir=state))
        for h in pool.hosts:
            if h.protocol == "ipmi":
                h.port = _free_udp_port()
                _start_ipmi_sim(h, pool.password, ipmitool, (emu_extra or {}).get(h.name, ()))
                h.offset = h.log.stat().st_size if h.log.exists() else 0
        redfish = [h for h in pool.hosts if h.protocol == "redfish"]
        if redfish:
            from metalfleet.testing.redfish import RedfishEmulator

            (base / "redfish").mkdir()
            systems = [{"name": h.name, "uuid": str(uuid.uuid4()), "ip": h.address} for h in redfish]
            (base / "redfish" / "systems.json").write_text(json.dumps(systems))
            _htpasswd(base / "redfish" / "htpasswd", USER, pool.password)
            pool.redfish = RedfishEmulator.start(log_path=base / "redfish" / "server.log", args=(
                "--systems", str(base / "redfish" / "systems.json"), "--state-dir", str(base / "redfish"),
                "--auth-file", str(base / "redfish" / "htpasswd"), "--power-seconds", str(power_seconds)))
            for h, s in zip(redfish, systems, strict=True):
                h.port = pool.redfish.port
                h.system = f"/redfish/v1/Systems/{s['uuid']}"
        pool._watcher = threading.Thread(target=pool._watch, name="mf-bmc-power", daemon=True)
        pool._watcher.start()
        return pool
    except BaseException:
        pool.stop()
        raise


@contextlib.contextmanager
def bmc_pool(protocols: Sequence[str], **kw: Any) -> Iterator[BmcPool]:
    pool = start_bmc_pool(protocols, **kw)
    try:
        yield pool
    finally:
        pool.stop()
