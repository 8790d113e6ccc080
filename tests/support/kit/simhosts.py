"""Simulated GPU hosts behind an emulator's instances: one VM-mode host (metalfleet.testing.hosts.vm) per
instance, its host key printed in a cloud-init-style console, SSH limited to what the instance's security
groups allow. Provider-neutral: the provider says which instances to boot and when, and what its groups allow.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metalfleet.testing.hosts.vm import VmHost

__all__ = ["HOST_KEYS_BEGIN", "HOST_KEYS_END", "SimHosts", "console_text", "merged"]

#: The markers cloud-init prints the host keys between (providers/console.py reads them).
HOST_KEYS_BEGIN = "-----BEGIN SSH HOST KEY KEYS-----"
HOST_KEYS_END = "-----END SSH HOST KEY KEYS-----"


def merged(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``, dicts merged recursively."""
    out = dict(base)
    for k, v in top.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def console_text(address: str, host_key: str, booted: datetime, *, kernel: str = "5.15.0-1051-aws",
                 datasource: str = "DataSourceEc2Local", interface: str = "ens5",
                 hostname: str | None = None) -> str:
    """What an Ubuntu cloud image prints to the serial console at first boot (the parts that matter): kernel
    line, cloud-init's network table and its host keys between :data:`HOST_KEYS_BEGIN` and :data:`HOST_KEYS_END`.

    The defaults are EC2's; another cloud passes its own kernel flavour, cloud-init datasource, NIC name and
    host name (default: EC2's ``ip-a-b-c-d``)."""
    kind, blob = host_key.split()[:2]
    digest = base64.b64encode(hashlib.sha256(base64.b64decode(blob)).digest()).decode().rstrip("=")
    name = hostname or "ip-" + address.replace(".", "-")
    stamp = booted.strftime("%a, %d %b %Y %H:%M:%S +0000")
    return "\n".join([
        f"[    0.000000] Linux version {kernel} (buildd@lcy02-amd64-020) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) "
        "11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #56~22.04.1-Ubuntu SMP",
        f"[    0.000000] Command line: BOOT_IMAGE=/boot/vmlinuz-{kernel} root=PARTUUID={uuid.uuid4()} ro "
        "console=tty1 console=ttyS0 nvme_core.io_timeout=4294967295 panic=-1",
        f"[    5.114410] cloud-init[512]: Cloud-init v. 23.4.4-0ubuntu0~22.04.1 running 'init' at {stamp}. "
        "Up 5.08 seconds.",
        f"[    5.190000] cloud-init[512]: ci-info: |  {interface}  | True | {address} | 255.255.255.0 | global | . |",
        "[    6.020000] cloud-init[512]: Generating public/private ed25519 key pair.",
        f"[    6.030000] cloud-init[512]: The key fingerprint is: SHA256:{digest} root@{name}",
        "<14>Dec  1 00:00:06 cloud-init: #############################################################",
        "<14>Dec  1 00:00:06 cloud-init: -----BEGIN SSH HOST KEY FINGERPRINTS-----",
        f"<14>Dec  1 00:00:06 cloud-init: 256 SHA256:{digest} root@{name} ({kind.removeprefix('ssh-').upper()})",
        "<14>Dec  1 00:00:06 cloud-init: -----END SSH HOST KEY FINGERPRINTS-----",
        "<14>Dec  1 00:00:06 cloud-init: #############################################################",
        HOST_KEYS_BEGIN,
        f"{kind} {blob} root@{name}",
        HOST_KEYS_END,
        f"[    7.480000] cloud-init[801]: Cloud-init v. 23.4.4-0ubuntu0~22.04.1 finished at {stamp}. "
        f"Datasource {datasource}.  Up 7.47 seconds",
        "",
        f"Ubuntu 22.04.4 LTS {name} ttyS0",
        "",
        f"{name} login: ",
    ]).replace("\n", "\r\n")


#: (address, host key, boot time) -> the console text of a new host.
ConsoleFormat = Callable[[str, str, datetime], str]


class SimHosts:
    """Instance id -> its VM-mode simulated host, for one emulator process (``enabled`` by ``--sim-hosts``).

    ``provider``: passed to :func:`metalfleet.testing.hosts.vm.profile_for_offering` with the instance's
    offering to pick the host's hardware profile. ``index_tag``: the instance tag holding the node's index
    (the host's ``index``). ``console``: the console text of a new host (default: :func:`console_text`).
    Rules (POST /_metalfleet/sim-hosts) add config.json values to hosts booted later, by the instance's tags.
    A host's console is kept after it stops, as a cloud keeps an instance's console output.
    """

    def __init__(self, provider: str, *, index_tag: str = "metalfleet:index",
                 console: ConsoleFormat = console_text) -> None:
        self.provider = provider
        self.index_tag = index_tag
        self.console_format = console
        self.enabled = False
        self.lock = threading.Lock()
        self.hosts: dict[str, VmHost] = {}
        self.consoles: dict[str, str] = {}
        self.rules: list[dict[str, Any]] = []
        self.ssh_applied: dict[str, tuple[str, ...]] = {}

    def configure(self, rules: Sequence[Any]) -> None:
        """Replace the rules: ``[{"tags": {...}, "config": {...}}]`` (ValueError on a malformed one)."""
        for rule in rules:
            if not isinstance(rule, dict) or set(rule) - {"tags", "config"} or not isinstance(rule.get("config"),
                                                                                              dict):
                raise ValueError(f"a sim-host rule is {{'tags': {{...}}, 'config': {{...}}}}, got {rule!r}")
        with self.lock:
            self.rules = [{"tags": dict(r.get("tags") or {}), "config": dict(r["config"])} for r in rules]

    def config_for(self, tags: Mapping[str, str]) -> dict[str, Any]:
        """The config.json values the rules give an instance with ``tags`` (every matching rule, in order)."""
        config: dict[str, Any] = {}
        with self.lock:
            for rule in self.rules:
                if all(tags.get(k) == v for k, v in rule["tags"].items()):
                    config = merged(config, rule["config"])
        return config

    def boot(self, instance_id: str, offering: str, public_keys: Sequence[str], tags: Mapping[str, str], *,
             fabric: dict[str, Any] | None = None) -> VmHost:
        """Boot the host of a new instance (running, sshd listening) and write its console.

        ``public_keys``: the instance's key pair (its ``ubuntu`` login accepts them). ``fabric``: the fabric
        the instance really has (config.json ``fabric``, what its fi_info/ibv_devinfo/NCCL answer from), unless
        a rule sets one; None keeps the profile's.
        """
        from metalfleet.testing.hosts.vm import boot_vm_host

        config = self.config_for(tags)
        index = tags.get(self.index_tag, "0")
        host = boot_vm_host(instance_id, authorized_keys=list(public_keys), offering=offering,
                            provider=self.provider, config=config or None,
                            index=int(index) if index.isdigit() else 0)
        if fabric is not None and "fabric" not in config:
            host.update_config(fabric=fabric)
        with self.lock:
            self.hosts[instance_id] = host
            self.consoles[instance_id] = self.console_format(host.address, host.host_key, datetime.now(UTC))
        return host

    def get(self, instance_id: str) -> VmHost | None:
        with self.lock:
            return self.hosts.get(instance_id)

    def console(self, instance_id: str) -> str | None:
        """The console text of an instance that had a host (also after it stopped), else None."""
        with self.lock:
            return self.consoles.get(instance_id)

    def snapshot(self) -> dict[str, VmHost]:
        with self.lock:
            return dict(self.hosts)

    # -- power, as the instance's state changes -------------------------------------------------
    def power_off(self, instance_id: str) -> None:
        """The instance stopped: its host's processes end, its disk stays."""
        host = self.get(instance_id)
        if host is not None:
            host.power_off()

    def power_on(self, instance_id: str) -> None:
        """The instance started again: boot its host (if it is off) and wait for sshd."""
        host = self.get(instance_id)
        if host is not None and not host.reaper:
            host.power_on(boot=True)
            host.wait_listening()

    def reboot(self, instance_id: str) -> None:
        """The instance rebooted: its host goes down and comes back, in the background (the API answers first)."""
        host = self.get(instance_id)
        if host is not None and host.reaper and not host.rebooting:
            host.rebooting = True
            threading.Thread(target=host.reboot_now, daemon=True).start()

    def stop(self, instance_id: str) -> None:
        """The instance is gone: stop its host for good (its console stays)."""
        with self.lock:
            host = self.hosts.pop(instance_id, None)
            self.ssh_applied.pop(instance_id, None)
        if host is not None:
            host.stop()

    def stop_all(self) -> None:
        with self.lock:
            hosts, self.hosts = list(self.hosts.values()), {}
            self.ssh_applied.clear()
        threads = [threading.Thread(target=h.stop, daemon=True) for h in hosts]
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)

    # -- security groups ------------------------------------------------------------------------
    def apply_ssh_rules(self, sources_for: Callable[[str, VmHost], Iterable[str] | None]) -> None:
        """Give every host the SSH sources its instance's security groups allow now, where they changed.

        ``sources_for(instance_id, host)``: the CIDRs allowed to reach the host's SSH port (``host.port``), or
        None to leave the host as it is (e.g. its instance is going away). See ``VmHost.set_ssh_allow``.
        """
        for instance_id, host in self.snapshot().items():
            found = sources_for(instance_id, host)
            if found is None:
                continue
            sources = tuple(found)
            with self.lock:
                if self.ssh_applied.get(instance_id) == sources:
                    continue
            host.set_ssh_allow(list(sources))
            with self.lock:
                self.ssh_applied[instance_id] = sources

    def listing(self) -> list[dict[str, Any]]:
        """GET /_metalfleet/sim-hosts: the hosts of live instances (``running`` false while one is stopped)."""
        return [{"instance_id": i, "address": h.address, "port": h.port, "host_key": h.host_key,
                 "offering": h.offering, "profile": h.fleet.profile, "sandbox": str(h.root),
                 "running": bool(h.running and h.reaper)}
                for i, h in sorted(self.snapshot().items())]
