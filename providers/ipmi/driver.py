"""The pool driver: ordering claims free hosts of a pool inventory and powers them on through their BMCs.

The contract's methods are a few lines each over :mod:`.model` (the inventory), :mod:`.pool` (the claim
store) and :mod:`.bmc` (power and boot over IPMI or Redfish). A node is one claim of one host: its state is
what the host's BMC and SSH port say now (power on and SSH answering: RUNNING; on, SSH not yet: PENDING; off:
STOPPED), and a released claim is TERMINATED for good (the host itself goes back to the pool).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from ..base import PlainConfig, PolledWait, wait_for_state
from ..catalog import load_catalog
from ..contract import OrderProgress, PowerState
from ..errors import (
    CapacityError,
    InvalidSpecError,
    MetalfleetError,
    NotFoundError,
    ProviderError,
    TransientError,
)
from ..models import BillingModel, Node, NodeSpec, NodeState, Offering
from ..tags import TAG_CLUSTER
from .bmc import BOOT_DEVICES, Bmc, bmc_for
from .errors import PROVIDER
from .model import Host, PoolInventory, host_facts, load_pool
from .pool import (
    CLAIMED,
    RELEASED,
    ClaimStore,
    FileClaimStore,
    claim_host,
    drop_claim,
    live_nodes,
    release_claim,
)

__all__ = ["IpmiDriver"]


def _released(nodes: Sequence[Node]) -> None:
    """Waiting for RUNNING fails at once when a node was released: its host is the pool's again."""
    gone = [n.id for n in nodes if n.state.is_gone]
    if gone:
        raise ProviderError(f"waiting for running: node(s) {gone} were released (their hosts are the pool's again)",
                            provider=PROVIDER, code="Released")


def _default_claims(inventory: Path) -> Path:
    return inventory.with_name(inventory.stem + ".claims.json")


class IpmiDriver(PlainConfig, PolledWait):
    """Order nodes from a pool of your own GPU servers behind IPMI or Redfish BMCs.

    ``inventory``: the pool inventory file (see :mod:`.inventory`). ``claims``: the claim store's file
    (default: ``<inventory stem>.claims.json`` beside it); ``store`` replaces it with another
    :class:`~.pool.ClaimStore`. ``region``: when given, must be the pool's name. ``secrets``: BMC passwords for
    credentials of the form ``{config: <key>}`` (from a Pulumi secret config; never pickled). ``release_power``:
    ``off`` (default) powers a released host off, ``on`` leaves it running. ``provision``: a re-imaging hook run
    once per claim, ``{"boot_device": "pxe"}`` sets a one-time boot device and power-cycles the host.

    Beyond the contract: :class:`~metalfleet.providers.contract.PowerDriver` (``power_state``, ``set_power``,
    ``set_boot_device``), ``set_tags`` and ``host_keys`` (the inventory's ``ssh.host_keys``).
    """

    name = PROVIDER

    def __init__(
        self,
        inventory: str | os.PathLike[str],
        claims: str | os.PathLike[str] | None = None,
        *,
        region: str | None = None,
        secrets: Mapping[str, str] | None = None,
        release_power: Literal["off", "on"] = "off",
        provision: Mapping[str, Any] | None = None,
        poll: float = 0.5,
        power_timeout: float = 300.0,
        ssh_timeout: float = 1.0,
        store: ClaimStore | None = None,
    ) -> None:
        self.inventory_path = Path(inventory)
        self.claims_path = Path(claims) if claims else _default_claims(self.inventory_path)
        self.region = region
        self.release_power = release_power
        self.provision = dict(provision or {})
        self.poll = float(poll)
        self.power_timeout = float(power_timeout)
        self.ssh_timeout = float(ssh_timeout)
        if release_power not in ("off", "on"):
            raise InvalidSpecError(f"release_power must be off or on, got {release_power!r}", field="release_power",
                                   value=release_power, provider=PROVIDER)
        device = self.provision.get("boot_device")
        if set(self.provision) - {"boot_device"} or (device is not None and str(device) not in BOOT_DEVICES):
            raise InvalidSpecError(f"provision takes {{boot_device: one of {', '.join(BOOT_DEVICES)}}}, got "
                                   f"{self.provision}", field="provision", value=self.provision, provider=PROVIDER)
        self._secrets = dict(secrets or {})
        self._store_override = store
        self._init_runtime()

    def _init_runtime(self) -> None:
        self.pool: PoolInventory = load_pool(self.inventory_path)
        if self.region is not None and self.region != self.pool.name:
            raise InvalidSpecError(f"region {self.region!r} is not the pool {self.pool.name!r} of "
                                   f"{self.inventory_path}: a pool cluster's region names its pool",
                                   field="region", value=self.region, provider=PROVIDER)
        self.store: ClaimStore = getattr(self, "_store_override", None) or FileClaimStore(self.claims_path)
        self._bmcs: dict[str, Bmc] = {}
        self._lock = threading.Lock()

    #: Plain configuration only: no BMC client, no password, no driver secret.
    CONFIG = ("inventory_path", "claims_path", "region", "release_power", "provision", "poll", "power_timeout",
              "ssh_timeout")

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._secrets = {}
        self._store_override = None
        super().__setstate__(state)

    def __repr__(self) -> str:
        return f"IpmiDriver(pool={self.pool.name!r}, inventory={str(self.inventory_path)!r})"

    # -- plumbing --------------------------------------------------------------------------
    def bmc(self, host: Host) -> Bmc:
        with self._lock:
            if host.name not in self._bmcs:
                self._bmcs[host.name] = bmc_for(host, self._secrets)
            return self._bmcs[host.name]

    def _host(self, name: str) -> Host:
        host = self.pool.host(name)
        if host is None:
            raise NotFoundError(f"host {name} is in the claim store {self.claims_path} but no longer in the pool "
                                f"inventory {self.inventory_path}", provider=PROVIDER, code="HostNotInPool")
        return host

    def _record(self, node_id: str) -> dict[str, Any]:
        with self.store.transaction() as st:
            raw = st["nodes"].get(node_id)
        if raw is None:
            raise NotFoundError(f"node {node_id} was never claimed from pool {self.pool.name}", provider=PROVIDER,
                                code="NotFound")
        return dict(raw)

    def _ssh_answers(self, host: Host) -> bool:
        try:
            with socket.create_connection((host.spec.ssh.address, host.spec.ssh.port), timeout=self.ssh_timeout):
                return True
        except OSError:
            return False

    def _node(self, raw: Mapping[str, Any], power: PowerState | None = None) -> Node:
        host = self.pool.host(raw["host"])
        if raw["state"] == RELEASED:
            state = NodeState.TERMINATED
        elif host is None:
            state = NodeState.UNKNOWN
        else:
            power = power or self.bmc(host).power_state()
            if power == PowerState.ON:
                state = NodeState.RUNNING if self._ssh_answers(host) else NodeState.PENDING
            else:
                state = NodeState.STOPPED if power == PowerState.OFF else NodeState.UNKNOWN
        facts: dict[str, Any] = dict(host_facts(host)) if host else {"host": raw["host"]}
        facts["idempotency_key"] = raw["key"]
        return Node(id=raw["id"], provider=PROVIDER, region=self.pool.name, state=state, offering=raw["offering"],
                    zone=raw.get("zone"), private_ip=host.spec.ssh.address if host else None, name=raw.get("name"),
                    tags=raw.get("tags") or {}, extra=facts)

    # -- offerings and offline validation ----------------------------------------------------
    def offerings(self) -> list[Offering]:
        """The catalogue's ipmi offerings the pool has hosts of (``extra``: the pool and its host count)."""
        catalog = load_catalog()
        out = []
        for name in self.pool.offerings():
            entry = catalog.require(PROVIDER, name)
            base = entry.offering(catalog.prices(PROVIDER, self.pool.name, name))
            count = sum(1 for h in self.pool.hosts if h.offering == name)
            out.append(Offering(**{**{f: getattr(base, f) for f in base.__dataclass_fields__},
                                   "extra": {"pool": self.pool.name, "hosts": count}}))
        return out

    def validate(self, spec: NodeSpec) -> None:
        """What the pool cannot do, refused before any BMC call, naming the cluster-spec field."""
        def bad(field: str, value: object, why: str) -> InvalidSpecError:
            return InvalidSpecError(why, field=field, value=value, provider=PROVIDER)

        if not spec.image:
            raise bad("image", spec.image, "image is required: the OS the pool's hosts run (or that the provisioning "
                      "hook installs)")
        if spec.offering not in self.pool.offerings():
            raise bad("offering", spec.offering, f"pool {self.pool.name} has no host of offering {spec.offering!r} "
                      f"(it has: {', '.join(self.pool.offerings())})")
        if spec.region != self.pool.name:
            raise bad("region", spec.region, f"region {spec.region!r} is not the pool {self.pool.name!r} "
                      f"({self.inventory_path}): a pool cluster's region names its pool")
        zones = sorted({h.zone for h in self.pool.hosts})
        if spec.zone and spec.zone not in zones:
            raise bad("zone", spec.zone, f"pool {self.pool.name} has no zone {spec.zone!r} (labels.zone of its hosts: "
                      f"{', '.join(zones)})")
        if spec.public_ip:
            raise bad("network.public_ip", True, "pool hosts have the addresses the inventory gives them: "
                      "network.public_ip does not apply")
        if spec.data_volumes:
            raise bad("storage.data", len(spec.data_volumes), "pool hosts have their own disks: storage.data "
                      "(network volumes) does not apply; use storage.hot for local NVMe")
        if spec.capacity_reservation_id:
            raise bad("capacity.reservation_id", spec.capacity_reservation_id, "a pool has no capacity reservations")
        if spec.billing != BillingModel.ON_DEMAND:
            raise bad("capacity.billing", spec.billing.value, f"a pool's hosts are yours, not bought per node: "
                      f"capacity.billing {spec.billing.value} does not apply (leave it out: on_demand)")

    # -- order -----------------------------------------------------------------------------
    def _candidates(self, spec: NodeSpec) -> list[Host]:
        return [h for h in self.pool.hosts if h.offering == spec.offering and (not spec.zone or h.zone == spec.zone)]

    def order(self, spec: NodeSpec) -> Node:
        """Claim a free matching host for the node's idempotency key (a repeat finds the same claim), run the
        provisioning hook once, and power the host on (waiting until its BMC reports on)."""
        self.validate(spec)
        hosts = self._candidates(spec)
        record = {"cluster": spec.cluster, "index": spec.index, "name": spec.name, "offering": spec.offering,
                  "zone": spec.zone or (hosts[0].zone if hosts else self.pool.name), "tags": dict(spec.tags),
                  "generation": spec.generation}
        while True:
            with self.store.transaction() as st:
                raw = claim_host(st, key=spec.idempotency_key, candidates=[h.name for h in hosts], record=record)
                if raw is None:
                    taken = sum(1 for h in hosts if h.name in st["hosts"])
                    held = sum(1 for h in hosts if h.name in st["quarantine"])
            if raw is None or raw.get("checked") or raw["state"] != CLAIMED:
                break
            if self._healthy(raw):
                break
        if raw is None:
            zone = spec.zone or self.pool.name
            entry = load_catalog().get(PROVIDER, spec.offering)
            traits = f"{entry.gpu_count}x {entry.gpu_model}, {entry.fabric.value}" if entry else spec.offering
            raise CapacityError(f"no free host in pool {self.pool.name} (zone {zone}) for offering {spec.offering} "
                                f"({traits}): {len(hosts)} host(s) of it, {taken} claimed, {held} quarantined",
                                zone=zone, provider=PROVIDER, code="NoFreeHost")
        if raw["state"] == RELEASED:
            return self._node(raw)  # this key's node was released: gone (the caller steps a generation)
        host = self._host(raw["host"])
        bmc = self.bmc(host)
        device = self.provision.get("boot_device")
        provision = bool(device) and not raw.get("provisioned")
        try:
            if provision:
                bmc.set_boot_device(str(device))
                bmc.cycle(wait=True, timeout=self.power_timeout)
            else:
                bmc.set_power(PowerState.ON, wait=True, timeout=self.power_timeout)
        except MetalfleetError:
            if not raw.get("powered"):  # nothing happened on the host: the claim goes, nothing is orphaned
                with self.store.transaction() as st:
                    drop_claim(st, raw["id"])
            raise
        if provision or not raw.get("powered"):
            with self.store.transaction() as st:
                if raw["id"] in st["nodes"]:
                    st["nodes"][raw["id"]].update(powered=True, provisioned=bool(raw.get("provisioned") or provision))
        return self._node(raw, PowerState.ON)

    def _healthy(self, raw: Mapping[str, Any]) -> bool:
        """Check a fresh claim's host on its BMC: a critical fault quarantines the host and drops the claim
        (False: claim another); a healthy host's claim is marked checked."""
        host = self._host(raw["host"])
        try:
            faults = self.bmc(host).critical_events()
        except MetalfleetError:
            with self.store.transaction() as st:
                drop_claim(st, raw["id"])
            raise
        with self.store.transaction() as st:
            if faults:
                drop_claim(st, raw["id"])
                st["quarantine"][host.name] = f"BMC reports: {'; '.join(faults)}"
                return False
            if raw["id"] in st["nodes"]:
                st["nodes"][raw["id"]]["checked"] = True
        return True

    def critical_events(self, node_id: str) -> list[str]:
        """The critical faults the node's BMC reports now (:class:`~metalfleet.providers.contract.HealthDriver`):
        the acceptance gate fails a node that has any."""
        return self.bmc(self._claimed_host(node_id)).critical_events()

    def quarantined(self) -> dict[str, str]:
        """Hosts kept out of every order (host -> why), until :meth:`clear_quarantine`."""
        with self.store.transaction() as st:
            return dict(st["quarantine"])

    def clear_quarantine(self, host: str) -> None:
        """Return a repaired host to the pool (its SEL entries should be cleared first, or the next order that
        meets it quarantines it again)."""
        with self.store.transaction() as st:
            st["quarantine"].pop(host, None)

    # -- observe ---------------------------------------------------------------------------
    def get(self, node_id: str) -> Node:
        return self._node(self._record(node_id))

    def host_keys(self, node_id: str) -> tuple[str, ...]:
        """The node's SSH host keys as the inventory lists them (``ssh.host_keys``); () when it lists none."""
        host = self.pool.host(self._record(node_id)["host"])
        return tuple(host.spec.ssh.host_keys) if host else ()

    def list_nodes(self, cluster: str) -> list[Node]:
        with self.store.transaction() as st:
            raws = live_nodes(st, cluster, TAG_CLUSTER)
        return [self._node(r) for r in raws]

    def _wait(self, node_ids: Sequence[str], state: NodeState, *, timeout: float, poll: float,
              progress: OrderProgress | None = None) -> list[Node]:
        """Poll until every node is in ``state``. A BMC that does not answer one poll is asked again next poll
        (until ``timeout``); waiting for RUNNING fails at once when a node was released."""
        last: dict[str, Node] = {}
        problem: list[TransientError] = []

        def read() -> list[Node]:
            for node_id in node_ids:
                try:
                    last[node_id] = self.get(node_id)
                except TransientError as exc:
                    problem[:] = [exc]
            return [last[i] for i in node_ids if i in last]

        def timed_out(nodes: Sequence[Node]) -> str:
            waiting = [f"{i} ({last[i].state.value if i in last else 'no answer'})" for i in node_ids
                       if i not in last or last[i].state != state]
            why = f"; last BMC fault: {problem[0]}" if problem else ""
            return f"node(s) {', '.join(waiting)} not {state.value} after {timeout:.0f}s{why}"

        return wait_for_state(node_ids, read, state, timeout=timeout, poll=poll, provider=PROVIDER,
                              what=f"whether nodes {list(node_ids)} are {state.value}", progress=progress,
                              failed=_released, timed_out=timed_out)

    # -- tags ------------------------------------------------------------------------------
    def set_tags(self, node_id: str, tags: Mapping[str, str]) -> None:
        """Add or overwrite tags on the node's claim (kept in the claim store); NotFoundError if unknown."""
        with self.store.transaction() as st:
            raw = st["nodes"].get(node_id)
            if raw is None:
                raise NotFoundError(f"node {node_id} was never claimed from pool {self.pool.name}",
                                    provider=PROVIDER, code="NotFound")
            raw["tags"] = {**(raw.get("tags") or {}), **{str(k): str(v) for k, v in tags.items()}}

    # -- release ---------------------------------------------------------------------------
    def release(self, node_id: str, *, wait: bool = True, timeout: float = 1800.0, unsubscribe: bool = False) -> None:
        """Power the host off (unless ``release_power`` is on) and return it to the pool. The host is freed
        only once its BMC has acted, so no other order gets a host still shutting down. Releasing a released
        node is a no-op."""
        raw = self._record(node_id)
        if raw["state"] != CLAIMED:
            return
        host = self.pool.host(raw["host"])
        # a claim whose host was never powered on (its BMC refused or did not answer) is just returned
        if host is not None and self.release_power == "off" and raw.get("powered"):
            self.bmc(host).set_power(PowerState.OFF, wait=True, timeout=min(timeout, self.power_timeout))
        with self.store.transaction() as st:
            release_claim(st, node_id)

    # -- power (PowerDriver) ---------------------------------------------------------------
    def _claimed_host(self, node_id: str) -> Host:
        raw = self._record(node_id)
        if raw["state"] != CLAIMED:
            raise NotFoundError(f"node {node_id} was released: its host {raw['host']} is the pool's again",
                                provider=PROVIDER, code="Released")
        return self._host(raw["host"])

    def power_state(self, node_id: str) -> PowerState:
        return self.bmc(self._claimed_host(node_id)).power_state()

    def set_power(self, node_id: str, state: PowerState, *, wait: bool = True, timeout: float = 300.0) -> None:
        self.bmc(self._claimed_host(node_id)).set_power(state, wait=wait, timeout=timeout)

    def set_boot_device(self, node_id: str, device: str) -> None:
        self.bmc(self._claimed_host(node_id)).set_boot_device(device)
