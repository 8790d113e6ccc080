"""A local EC2 API for tests: moto in server mode over HTTP, plus the few behaviours the AWS driver needs.

The driver reaches this server exactly as production reaches AWS: boto3 with ``endpoint_url`` (or
``AWS_ENDPOINT_URL``), SigV4, the EC2 query protocol, XML answers. Nothing in-process is patched on
the client side.

Run it in the foreground (for a demo)::

    python -m metalfleet.testing.ec2 --port 5055

or from Python, as a subprocess the caller owns::

    with start_ec2_emulator() as ec2:
        boto3.client("ec2", endpoint_url=ec2.url, ...)
        ec2.set_faults(throttle=0.3, seed=1)

Extensions over moto 5.2.5 (each one small, each one a thing moto gets wrong or lacks; checked
against that version: the first two answer an HTML 500 ``NotImplementedError`` there). Every rule they enforce
is an entry of the reference table ``tests/support/reference/ec2.yaml`` (rendered as ``ec2.md``), with the
sentence of the EC2 API Reference, user guide or botocore model it rests on; the code applies it by its id
(``refuse("id")`` answers the table's code and message, ``RULES.applies("id")`` marks a behaviour) and the
request log names the rules that decided each call. tests/aws/test_reference.py probes every one.

(a) Placement groups: CreatePlacementGroup / DescribePlacementGroups / DeletePlacementGroup
    (moto: NotImplementedError, HTML 500). Names are unique and up to 255 ASCII characters; a group needs no
    name (it goes by its id); strategies cluster, spread, partition, precision-time. Unknown names answer
    InvalidPlacementGroup.Unknown; RunInstances checks ``Placement.GroupName`` exists and DescribeInstances
    returns it (moto drops it).
(b) RunInstances ClientToken idempotency (moto stores the token but launches again): a repeated token
    with the same arguments answers the original reservation and buys nothing; different arguments
    answer IdempotentParameterMismatch (whose message, unlike AWS's, names the differing parameters); a token
    whose instance is terminated answers IdempotentInstanceTerminated; one over 64 ASCII characters
    InvalidClientToken. Zonal as on EC2: a request naming its zone (Placement or a subnet) holds its token in
    that zone only, one naming none in the Region; held for the server's life.
(c) EFA network cards: each ``NetworkInterfaces`` entry keeps its ``InterfaceType`` (efa) and
    ``NetworkCardIndex`` and is returned by DescribeInstances (moto keys NICs by DeviceIndex alone, so
    31 interfaces at DeviceIndex 1 collapse into one, all typed "interface" on card 0). Like AWS, a launch
    with more than one interface gets no auto-assigned public IPv4, and AssociatePublicIpAddress=true
    with several interfaces is refused (InvalidParameterCombination).
(d) Capacity reservations: CreateCapacityReservation / DescribeCapacityReservations /
    CancelCapacityReservation, and Capacity Blocks via DescribeCapacityBlockOfferings /
    PurchaseCapacityBlock (moto: NotImplementedError), with the parameters the model requires.
    RunInstances honours ``CapacityReservationSpecification.CapacityReservationTarget``: the reservation must
    be well formed and exist (InvalidCapacityReservationId.Malformed / .NotFound), match type and zone, have
    room (ReservationCapacityExceeded), and ``InstanceMarketOptions.MarketType=capacity-block`` goes with a
    Capacity Block reservation; instances report CapacityReservationId/Specification and lifecycle
    "capacity-block" (moto marks any market option "spot"); terminating gives the slot back. A Capacity
    Block cannot be cancelled.
(e) DescribeInstanceTypes: no change. moto 5.2.5's data was checked and is right for p5.48xlarge
    (8x H100 80 GiB, 32 network cards, 32 EFA), p5en.48xlarge (8x H200 141 GiB, 16 cards, 16 EFA),
    p4de.24xlarge (8x A100 80 GiB, 4 cards) and p4d.24xlarge (8x A100 40 GiB, 4 cards);
    tests/aws asserts it so a moto upgrade that breaks it is caught.
(f) TerminateInstances on an already-terminated instance is a no-op, as on AWS (moto tries to delete
    its network interfaces again and answers InvalidNetworkInterfaceID.NotFound).
(g) The default VPC's subnets get stable ids, ``default_subnet_id(zone)`` (moto draws random ones at
    each start), so an example cluster.yaml can name one and run unchanged here. (A test affordance, not a
    claim about EC2: not in the reference table.)
(h) Simulated GPU hosts (``--sim-hosts`` / ``start_ec2_emulator(sim_hosts=True)``; off by default, needs
    root): each instance a RunInstances call launches (not an idempotent replay) gets a VM-mode simulated
    host (tests/support/hosts/vm.py, ``boot_vm_host``) for its offering, booted before the answer is sent, whose
    ``ubuntu`` login accepts the public key of the instance's ``KeyName`` (ImportKeyPair/CreateKeyPair;
    an unknown name answers InvalidKeyPair.NotFound, as on AWS, where moto launches anyway). The
    instance's private IPv4 (DescribeInstances, its primary network interface) is the host's
    ``127.x.y.z`` address, so SSH to the node's private IP reaches it. GetConsoleOutput answers
    cloud-init style output (base64, as EC2 does) that prints the host's key between
    ``-----BEGIN SSH HOST KEY KEYS-----`` and ``-----END SSH HOST KEY KEYS-----``. The host's EFA
    devices come from the emulator's own records, not from the request: one per EFA interface it
    attached to the instance, on a network card that the type's data (DescribeInstanceTypes:
    NetworkCards, MaximumEfaInterfaces) says takes EFA, at that card's bandwidth (``efa_fabric``; the
    host's config ``fabric``). Its ``fi_info -p efa`` lists those devices and its nccl-tests use
    them, so a p5 with 32 EFA interfaces shows 32 at 100 Gb/s, one with fewer fails acceptance, and
    one without EFA answers ``fi_getinfo: -61``. StopInstances powers the host off (its disk stays),
    StartInstances boots it again, RebootInstances reboots it; TerminateInstances, a state reset and
    the server's exit stop it (processes, mounts, folder).
    Nothing in the product knows: it sees EC2 instances with private IPs, key pairs and console output.
(i) CreateTags naming an instance id that does not exist answers InvalidInstanceID.NotFound, a malformed
    one InvalidID, as on AWS (moto tags the unknown id and answers success).
(j) RunInstances refuses what AWS refuses about interfaces, from the instance type's own data (moto's
    DescribeInstanceTypes data, as (e)): an InterfaceType other than interface/efa/efa-only, no primary
    interface at card 0 device 0 or an EFA-only one there, a subnet or security groups beside
    NetworkInterfaces (InvalidParameterCombination), a ``NetworkCardIndex`` past the type's network cards
    (InvalidParameterValue), two interfaces at the same NetworkCardIndex/DeviceIndex (InvalidParameterValue),
    more interfaces on a card than it takes (AttachmentLimitExceeded), more EFA interfaces than
    ``EfaInfo.MaximumEfaInterfaces`` (AttachmentLimitExceeded; EFA on a type without EFA: 0 allowed). A
    ``KeyName`` that is no key pair answers InvalidKeyPair.NotFound for every launch (moto launches anyway).
(k) Placement strategies, as EC2 keeps them: a cluster group holding instances in one Availability Zone
    refuses a launch in another (InvalidPlacementGroup.InUse, "in use in another availability zone", AWS's
    words); a spread group runs at most 7 instances per zone (pending or running; InvalidParameterValue: AWS
    documents the limit, not the code); a partition group has 1-7 partitions (CreatePlacementGroup answers
    InvalidParameterValue otherwise) and a ``Placement.PartitionNumber`` past them is refused.
(l) Capacity Block states: a purchased block is ``scheduled`` until its StartDate (the offering's start:
    the first 11:30 UTC at least 30 minutes away; it lasts the hours asked, so it ends at 11:30 UTC),
    ``active`` until its EndDate, then ``expired``. A block shows AvailableInstanceCount 0 unless active; a
    launch into a scheduled block answers InvalidCapacityReservationState.PendingActivation ("Your Capacity
    Block is not active yet"), into an expired or cancelled one InvalidCapacityReservationId.NotFound ("not
    active"). From 30 minutes before its end, its instances are terminated (before the next call is
    answered). The clock these states read can be moved forward (control endpoint ``clock``), so a test can
    let a block start or end without waiting; nothing else reads it.
(m) KMS keys of encrypted volumes (``BlockDeviceMapping.N.Ebs.KmsKeyId``: key id, key ARN, alias or alias
    ARN) are looked up in the same server's KMS (moto's KMS backend, same account and region; create keys
    with a boto3 ``kms`` client on this endpoint). As on AWS, the launch is accepted and answered, and an
    instance whose key does not exist or is not enabled is terminated at once with state reason
    ``Client.InvalidKMSKey.InvalidState`` ("The KMS key provided is in an incorrect state"); it boots no
    simulated host. (moto does not look at the key.)
(n) Security groups decide who reaches a simulated host's SSH port (with ``--sim-hosts``): the host of an
    instance accepts connections on port 22 only from the sources its primary interface's groups allow,
    ingress rules whose protocol is -1 or tcp with a port range holding 22: ``IpRanges`` CIDRs, and each
    referenced group's members (the private IPs of the live instances with an interface in it). A packet
    from anywhere else is dropped, so the client's connect times out, as on EC2 (tests/support/hosts/vm.py:
    ``VmHost.set_ssh_allow``, a BPF filter on the host's listening socket; the host's own address always
    gets in). The rules are applied when the host boots, before RunInstances answers, and again after
    every call that changes rules or members (Authorize/RevokeSecurityGroupIngress, RunInstances,
    TerminateInstances, DeleteSecurityGroup, ModifyNetworkInterfaceAttribute, ModifyInstanceAttribute).
    Tests and the demo connect from 127.0.0.1, so a cluster spec lets them in with
    ``network.ssh_ingress_cidrs: [127.0.0.1/32]``, exactly as a real one lets in the operator's network.
(o) DeleteSecurityGroup refuses a group still in use, as AWS does (moto deletes it): DependencyViolation while a
    network interface is in it or another group's rule references it, CannotDelete for a VPC's default group.

Control endpoints (not EC2; never counted or faulted). They, the fault switch, the clock, the simulated-host
registry, the client object and the server loop come from the shared emulator kit (:mod:`metalfleet.testing.kit`);
this module adds EC2's error codes and body and the moto extensions above:

    POST /_metalfleet/faults   {"throttle": 0.3, "capacity": 0.0, "server_error": 0.0, "lost_response": 0.0,
                                "latency_ms": 100,
                                "seed": 1, "actions": ["RunInstances"], "capacity_remaining": 2,
                                "script": [{"action": "RunInstances", "code": "VcpuLimitExceeded",
                                            "status": 400, "after": 0, "times": 1}]}
    POST /_metalfleet/reset    faults off, counters and the request log cleared, the clock back to real time
                               ({"state": true} also empties every moto backend)
    POST /_metalfleet/clock    {"advance_seconds": 3600}: (l) move the emulator's clock forward; answers
                               {"now": "<ISO time>"}
    GET  /_metalfleet/stats    {"requests": n, "by_action": {...}, "faults": {...}}
    GET  /_metalfleet/requests?action=RunInstances   the recorded requests (flat query parameters)
    GET  /_metalfleet/sim-hosts  (h) the hosts of live instances: [{"instance_id", "address", "port",
                               "host_key", "offering", "profile", "sandbox", "running"}] ("running": false
                               while its instance is stopped); ``sandbox`` holds the host's config.json
                               (what its shims report: edit it to break a host) and state.json
    POST /_metalfleet/sim-hosts  {"rules": [{"tags": {"metalfleet:index": "1"}, "config": {"gpu": {"count": 7}}}]}
                               config.json values for hosts booted from now on, by the instance's tags
                               (every rule whose tags all match is merged in); replaces the rules, and a
                               reset clears them

Faults answer real EC2-shaped XML errors: RequestLimitExceeded (503), InternalError (500),
InsufficientInstanceCapacity (500, RunInstances only, naming the zone). ``lost_response`` lets moto do
the work and then answers InternalError anyway (the reply lost on the way back: what a ClientToken is
for). ``latency_ms`` delays every EC2 call. ``actions`` limits the random faults and the latency to
those actions. ``capacity_remaining`` lets that many more instances launch, then answers
InsufficientInstanceCapacity. ``script`` fails chosen calls deterministically: it skips ``after``
matching calls, then fails ``times`` of them (-1: for ever).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from xml.sax.saxutils import escape

from metalfleet.testing.kit import (
    Clock,
    EmulatorClient,
    ErrorBody,
    Fault,
    FaultCodes,
    FaultMiddleware,
    FaultSwitch,
    SimHosts,
    run_server,
    server_parser,
)
from metalfleet.testing.reference import Enforcer

__all__ = ["Ec2Emulator", "default_subnet_id", "start_ec2_emulator"]


# ---------------------------------------------------------------------------------------------
# Client side: the launcher the tests, the demo and the benchmark use (metalfleet.testing.kit).
# ---------------------------------------------------------------------------------------------
class Ec2Emulator(EmulatorClient):
    """A running EC2 emulator subprocess. Stop it with :meth:`stop` or use it as a context manager.

    ``advance_clock`` moves the clock Capacity Block states read (l); ``sim_hosts`` and
    ``set_sim_host_rules`` are (h)."""

    module = "metalfleet.testing.ec2"
    title = "EC2 emulator"


def start_ec2_emulator(host: str = "127.0.0.1", port: int = 0, *, timeout: float = 60.0,
                       log_path: str | os.PathLike[str] | None = None, sim_hosts: bool = False) -> Ec2Emulator:
    """Start ``python -m metalfleet.testing.ec2`` as a subprocess and wait until it answers.

    ``port=0`` lets the server pick a free port and report it; ``log_path`` receives its request log.
    ``sim_hosts``: boot a simulated GPU host per instance (extension h; needs root).
    """
    return Ec2Emulator.start(host, port, timeout=timeout, log_path=log_path, sim_hosts=sim_hosts)


# ---------------------------------------------------------------------------------------------
# Server side: EC2's errors for the kit's fault switch and middleware (around moto).
# ---------------------------------------------------------------------------------------------
def ec2_error_body(code: str, message: str, request_id: str) -> bytes:
    """The XML body EC2 answers an error with."""
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{escape(code)}</Code>'
            f"<Message>{escape(message)}</Message></Error></Errors><RequestID>{request_id}</RequestID>"
            "</Response>").encode()


def _error_reply(code: str, message: str, status: int) -> ErrorBody:
    return ErrorBody("text/xml", ec2_error_body(code, message, str(uuid.uuid4())))


#: What the faults answer: RequestLimitExceeded (503), InternalError (500; also a lost response), and
#: InsufficientInstanceCapacity (RunInstances answers it itself, naming the zone).
EC2_FAULTS = FaultCodes(throttle=Fault("RequestLimitExceeded", 503, "Request limit exceeded."),
                        server_error=Fault("InternalError", 500, "An internal error has occurred."),
                        capacity=Fault("InsufficientInstanceCapacity", 500, "Insufficient capacity."))
SWITCH = FaultSwitch(EC2_FAULTS, capacity_actions={"RunInstances"})
#: Every rule the extensions apply, by its id in tests/support/reference/ec2.yaml (its citation, code and message
#: live there): ``refuse("id", ...)`` for a refusal, ``RULES.applies("id")`` for a behaviour. The request log entry
#: of the call names each rule that decided it.
RULES = Enforcer("ec2", SWITCH.note_rule)
#: (l) The time Capacity Block states are read at: real time, plus what a test advanced it by.
CLOCK = Clock()
#: (h) instance id -> its VM-mode simulated host. Enabled by --sim-hosts.
SIM = SimHosts(provider="aws")
#: (n) Actions after which the simulated hosts' SSH source rules are computed again.
SSH_RULE_ACTIONS = frozenset({"AuthorizeSecurityGroupIngress", "RevokeSecurityGroupIngress", "RunInstances",
                              "TerminateInstances", "DeleteSecurityGroup", "ModifyNetworkInterfaceAttribute",
                              "ModifyInstanceAttribute", "StartInstances"})
#: moto is not written for concurrent requests; calls into it are serialised (latency is not).
MOTO_LOCK = threading.RLock()
#: (a) CreatePlacementGroup's strategies (the botocore model's PlacementStrategy enum).
PLACEMENT_STRATEGIES = ("cluster", "spread", "partition", "precision-time")
#: (j) RunInstances' NetworkInterface.N.InterfaceType values ("Valid values: interface | efa | efa-only").
INTERFACE_TYPES = ("interface", "efa", "efa-only")
#: The forms of the ids the reference names (an id of another form is malformed).
CR_ID = re.compile(r"^cr-[0-9a-f]{17}$")
PG_ID = re.compile(r"^pg-[0-9a-f]{17}$")
INSTANCE_ID = re.compile(r"^i-([0-9a-f]{8}|[0-9a-f]{17})$")


def efa_fabric(offering: str, interfaces: Iterable[tuple[str | None, int]]) -> dict[str, Any] | None:
    """(h) The EFA devices an instance really has: one per EFA interface attached on a network card that
    the type's data (moto's DescribeInstanceTypes records) says takes EFA, at most its MaximumEfaInterfaces,
    at that card's baseline bandwidth. None for a type without EFA (its profile's fabric stands).

    ``interfaces``: (InterfaceType, NetworkCardIndex) of each network interface the emulator attached.
    """
    from moto.ec2.models.instance_types import INSTANCE_TYPES

    info = (INSTANCE_TYPES.get(offering) or {}).get("NetworkInfo") or {}
    limit = int((info.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0)
    if not limit:
        return None
    cards = {int(c["NetworkCardIndex"]): c for c in info.get("NetworkCards") or []}
    efa_cards = sorted({card for kind, card in interfaces if kind in ("efa", "efa-only") and card in cards
                        and "efa" in (cards[card].get("InterfaceTypes") or [])})[:limit]
    gbps = float(cards[efa_cards[0]].get("BaselineBandwidthInGbps") or 0) if efa_cards else 0.0
    return {"kind": "efa", "nics": len(efa_cards), "nic_gbps": gbps}


# ---------------------------------------------------------------------------------------------
# Server side: the moto extensions (a)-(o). Imported only in the server process.
# ---------------------------------------------------------------------------------------------
@dataclass
class _Ext:
    """Extension state for one moto EC2 backend (one account/region); reset with the backend."""

    #: (b) (ClientToken, Availability Zone or None) -> (reservation id, arguments hash): RunInstances idempotency is
    #: zonal when the request names a zone (Placement or a subnet), regional otherwise
    tokens: dict[tuple[str, str | None], tuple[str, str]] = field(default_factory=dict)
    token_args: dict[tuple[str, str | None], dict[str, Any]] = field(default_factory=dict)
    placement_groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    reservations: dict[str, dict[str, Any]] = field(default_factory=dict)
    reservation_used: dict[str, int] = field(default_factory=dict)  # capacity reservation -> instances in it
    block_offerings: dict[str, dict[str, Any]] = field(default_factory=dict)


#: The backends that have extension state (what the Capacity Block sweep looks at); emptied by a state reset.
EXT_BACKENDS: dict[int, Any] = {}


def _ext(backend: Any) -> _Ext:
    ext = backend.__dict__.get("_metalfleet_ext")
    if ext is None:
        ext = backend.__dict__["_metalfleet_ext"] = _Ext()
        EXT_BACKENDS[id(backend)] = backend
    return ext  # type: ignore[no-any-return]


def default_subnet_id(zone: str, account: str = "123456789012") -> str:
    """The id this emulator gives the default subnet of ``zone`` (extension g)."""
    return "subnet-" + hashlib.sha256(f"metalfleet-emulator:{account}:{zone}".encode()).hexdigest()[:17]


def _hex_id(prefix: str, n: int = 17) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:n]}"


def _tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def _matches(item: dict[str, Any], filters: dict[str, list[str]], fields: dict[str, str]) -> bool:
    tags = {t["Key"]: t["Value"] for t in item.get("Tags", [])}
    for name, values in filters.items():
        if name.startswith("tag:"):
            if tags.get(name[4:]) not in values:
                return False
        elif name in fields and str(item.get(fields[name])) not in values:
            return False
    return True


#: (l) Instances in a Capacity Block are terminated from this long before its end.
BLOCK_WIND_DOWN = timedelta(minutes=30)


def next_block_start(now: datetime) -> datetime:
    """(l) The start of a Capacity Block offered now: the first 11:30 UTC at least 30 minutes away (blocks that
    start in the future begin at 11:30 UTC, and offerings can start in as soon as 30 minutes)."""
    start = now.astimezone(UTC).replace(hour=11, minute=30, second=0, microsecond=0)
    while start < now + timedelta(minutes=30):
        start += timedelta(days=1)
    return start


def _refresh_reservation(ext: _Ext, cr: dict[str, Any]) -> dict[str, Any]:
    """(d)/(l) A reservation's state and available count, now (by CLOCK): a Capacity Block is scheduled until
    its start, active until its end, then expired; only an active reservation has capacity to offer."""
    if cr["State"] != "cancelled" and cr["ReservationType"] == "capacity-block":
        RULES.applies("cb-states")
        now = CLOCK.now()
        end = cr.get("EndDate")
        cr["State"] = "scheduled" if now < cr["StartDate"] else ("expired" if end and now >= end else "active")
    used = ext.reservation_used.get(cr["CapacityReservationId"], 0)
    cr["AvailableInstanceCount"] = max(0, cr["TotalInstanceCount"] - used) if cr["State"] == "active" else 0
    return cr


def sweep_capacity_blocks() -> None:
    """(l) Before each call: the instances of a Capacity Block with 30 minutes or less left are terminated, as EC2
    begins terminating them then (called with the moto lock held)."""
    now = CLOCK.now()
    for backend in list(EXT_BACKENDS.values()):
        ext = _ext(backend)
        ending = {cr_id for cr_id, cr in ext.reservations.items()
                  if cr["ReservationType"] == "capacity-block" and cr["State"] != "cancelled" and cr.get("EndDate")
                  and now >= cr["EndDate"] - BLOCK_WIND_DOWN and ext.reservation_used.get(cr_id)}
        if not ending:
            continue
        for inst in list(backend.all_instances()):
            if getattr(inst, "capacity_reservation_id", None) in ending and _live(inst):
                RULES.applies("cb-terminates-before-end")
                inst.terminate()


#: (n) instance id -> the moto EC2 backend holding it (for its simulated host's SSH rules).
SSH_BACKENDS: dict[str, Any] = {}


def _live(instance: Any) -> bool:
    return instance is not None and instance._state.name not in ("terminated", "shutting-down")


def ssh_sources(backend: Any, instance: Any, port: int = 22) -> list[str]:
    """(n) The IPv4 sources the groups of ``instance``'s primary interface let reach ``port`` (tcp)."""
    nic = (getattr(instance, "nics", None) or {}).get(0)
    if nic is None:
        return []
    sources: set[str] = set()
    for group in list(nic.group_set):
        for rule in list(group.ingress_rules):
            proto = str(rule.ip_protocol)
            if proto != "-1" and not (proto in ("tcp", "6") and rule.from_port is not None
                                      and int(rule.from_port) <= port <= int(rule.to_port)):
                continue
            if (rule.ip_range or {}).get("CidrIp"):
                sources.add(str(rule.ip_range["CidrIp"]))
            ref = (rule.source_group or {}).get("GroupId")
            if ref:
                for eni in list(backend.enis.values()):
                    owner = getattr(eni, "instance", None)
                    if _live(owner) and eni.private_ip_address and any(g.id == ref for g in eni.group_set):
                        sources.add(f"{eni.private_ip_address}/32")
    return sorted(sources)


def sim_ssh_rules() -> None:
    """(n) Apply to every simulated host the SSH sources its instance's groups allow now (if they changed)."""
    def sources_for(instance_id: str, host: Any) -> list[str] | None:
        backend = SSH_BACKENDS.get(instance_id)
        instance = backend.get_instance_by_id(instance_id) if backend is not None else None
        return ssh_sources(backend, instance, int(host.port)) if _live(instance) else None

    if SSH_BACKENDS:
        RULES.applies("ssh-by-security-group")
    SIM.apply_ssh_rules(sources_for)

def install_extensions() -> None:
    from moto.core.responses import ActionResult
    from moto.core.types import Base64EncodedString
    from moto.core.utils import utcnow
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.models.elastic_network_interfaces import Attachment
    from moto.ec2.models.instance_types import INSTANCE_TYPES
    from moto.ec2.models.instances import Instance, StateReason
    from moto.ec2.responses import EC2Response
    from moto.ec2.utils import random_eni_attach_id

    def refuse(rule_id: str, **fmt: Any) -> EC2ClientError:
        """The error refusal ``rule_id`` of the reference table answers (its code, message and status)."""
        code, _status, message = RULES.refusal(rule_id, **fmt)
        return EC2ClientError(code, message)  # moto answers it with 400, the status of every refusal in the table

    def error_500(code: str, message: str) -> tuple[bytes, dict[str, Any]]:
        return ec2_error_body(code, message, str(uuid.uuid4())), {"status": 500}

    def query_keys(self: Any, prefix: str) -> list[str]:
        return [k for k in self.querystring if k == prefix or k.startswith(prefix + ".")]

    # -- (a) placement groups ------------------------------------------------------------------
    def create_placement_group(self: Any) -> ActionResult:
        name = self._get_param("GroupName")
        strategy = self._get_param("Strategy", "cluster")
        if strategy not in PLACEMENT_STRATEGIES:
            raise refuse("pg-strategy-values", strategy=strategy)
        if name is not None and not (0 < len(name) <= 255 and name.isascii()):
            raise refuse("pg-name-length", name=name)
        self.error_on_dryrun()
        ext = _ext(self.ec2_backend)
        if name in ext.placement_groups:
            raise refuse("pg-name-unique", name=name)
        group_id = _hex_id("pg")
        if name is None:  # GroupName is optional: the group goes by its id
            RULES.applies("pg-name-optional")
            name = group_id
        tags = self._parse_tag_specification().get("placement-group", {})
        pg = {"GroupName": name, "GroupId": group_id, "Strategy": strategy, "State": "available",
              "GroupArn": f"arn:aws:ec2:{self.region}:{self.current_account}:placement-group/{name}",
              "Tags": _tag_list(tags)}
        if strategy == "partition":
            pg["PartitionCount"] = int(self._get_param("PartitionCount", 2))
            if not 1 <= pg["PartitionCount"] <= 7:
                raise refuse("pg-partition-count", count=pg["PartitionCount"])
        ext.placement_groups[name] = pg
        return ActionResult({"PlacementGroup": pg})

    def describe_placement_groups(self: Any) -> ActionResult:
        ext = _ext(self.ec2_backend)
        names = self._get_param("GroupNames", [])
        ids = self._get_param("GroupIds", [])
        for n in names:
            if n not in ext.placement_groups:
                raise refuse("describe-pg-unknown-name", name=n)
        for gid in ids:
            if not PG_ID.match(str(gid)):
                raise refuse("describe-pg-malformed-id", group_id=gid)
            if gid not in {g["GroupId"] for g in ext.placement_groups.values()}:
                raise refuse("describe-pg-unknown-id", group_id=gid)
        groups = [g for g in ext.placement_groups.values()
                  if (not names or g["GroupName"] in names) and (not ids or g["GroupId"] in ids)]
        fields = {"group-name": "GroupName", "group-id": "GroupId", "strategy": "Strategy", "state": "State"}
        filters = self._filters_from_querystring()
        return ActionResult({"PlacementGroups": [g for g in groups if _matches(g, filters, fields)]})

    def delete_placement_group(self: Any) -> ActionResult:
        name = self._get_param("GroupName")
        ext = _ext(self.ec2_backend)
        if name not in ext.placement_groups:
            raise refuse("delete-pg-unknown", name=name)
        for inst in self.ec2_backend.all_instances():
            if inst.placement.group_name == name and inst.state != "terminated":
                raise refuse("delete-pg-in-use", name=name)
        del ext.placement_groups[name]
        return ActionResult({})

    # -- (d) capacity reservations and Capacity Blocks ----------------------------------------
    def _new_reservation(self: Any, instance_type: str, zone: str, count: int, platform: str,
                         kind: str, tags: dict[str, str], match: str = "open",
                         end: datetime | None = None, start: datetime | None = None) -> dict[str, Any]:
        cr_id = _hex_id("cr")
        now = CLOCK.now()
        arn = f"arn:aws:ec2:{self.region}:{self.current_account}:capacity-reservation/{cr_id}"
        cr = {"CapacityReservationId": cr_id, "OwnerId": self.current_account, "CapacityReservationArn": arn,
              "InstanceType": instance_type, "InstancePlatform": platform, "AvailabilityZone": zone,
              "Tenancy": "default", "TotalInstanceCount": count, "AvailableInstanceCount": count,
              "EbsOptimized": True, "EphemeralStorage": False, "State": "active", "StartDate": start or now,
              "EndDateType": "limited" if end else "unlimited", "InstanceMatchCriteria": match,
              "CreateDate": now, "ReservationType": kind, "Tags": _tag_list(tags)}
        if end:
            cr["EndDate"] = end
        ext = _ext(self.ec2_backend)
        ext.reservations[cr_id] = cr
        return _refresh_reservation(ext, cr)

    def zones(self: Any) -> set[str]:
        return {str(z.name) for z in self.ec2_backend.describe_availability_zones()}

    def create_capacity_reservation(self: Any) -> ActionResult:
        missing = [p for p in ("InstanceType", "InstancePlatform", "InstanceCount") if self._get_param(p) in (None, "")]
        if missing:
            raise refuse("create-cr-required", parameter=missing[0])
        zone = self._get_param("AvailabilityZone")
        if not zone and not self._get_param("AvailabilityZoneId"):
            raise refuse("create-cr-zone-required")
        count = int(self._get_param("InstanceCount"))
        if not 1 <= count <= 1000:
            raise refuse("create-cr-count-range", count=count)
        if zone and zone not in zones(self):
            raise refuse("create-cr-zone", zone=zone)
        self.error_on_dryrun()
        cr = _new_reservation(self, self._get_param("InstanceType"), zone or f"{self.region}a", count,
                              self._get_param("InstancePlatform"), "default",
                              self._parse_tag_specification().get("capacity-reservation", {}),
                              self._get_param("InstanceMatchCriteria", "open"))
        return ActionResult({"CapacityReservation": cr})

    def check_cr_id(cr_id: str) -> None:
        if not CR_ID.match(str(cr_id)):
            raise refuse("cr-id-malformed", reservation=cr_id)

    def describe_capacity_reservations(self: Any) -> ActionResult:
        ext = _ext(self.ec2_backend)
        ids = self._get_param("CapacityReservationIds", [])
        for cr_id in ids:
            check_cr_id(cr_id)
            if cr_id not in ext.reservations:
                raise refuse("describe-cr-unknown", reservation=cr_id)
        fields = {"instance-type": "InstanceType", "availability-zone": "AvailabilityZone", "state": "State",
                  "reservation-type": "ReservationType", "instance-platform": "InstancePlatform"}
        filters = self._filters_from_querystring()
        found = [cr for cr in (_refresh_reservation(ext, c) for c in ext.reservations.values())
                 if (not ids or cr["CapacityReservationId"] in ids) and _matches(cr, filters, fields)]
        return ActionResult({"CapacityReservations": found})

    def cancel_capacity_reservation(self: Any) -> ActionResult:
        cr_id = self._get_param("CapacityReservationId")
        check_cr_id(cr_id)
        ext = _ext(self.ec2_backend)
        cr = ext.reservations.get(cr_id)
        if cr is None:
            raise refuse("cancel-cr-unknown", reservation=cr_id)
        if cr["ReservationType"] == "capacity-block":
            raise refuse("cancel-cr-block", reservation=cr_id)
        if _refresh_reservation(ext, cr)["State"] != "active":
            raise refuse("cancel-cr-state", reservation=cr_id, state=cr["State"])
        self.error_on_dryrun()
        RULES.applies("cancel-cr-releases")
        cr["State"] = "cancelled"
        _refresh_reservation(ext, cr)
        return ActionResult({"Return": True})

    def describe_capacity_block_offerings(self: Any) -> ActionResult:
        preferences = [p.get("InstanceType") for p in self._get_param("InstanceTypePreferences", []) or []]
        instance_type = self._get_param("InstanceType") or next((t for t in preferences if t), None)
        hours_raw = self._get_param("CapacityDurationHours")
        if hours_raw is None or not instance_type:
            raise refuse("cb-offerings-required",
                         parameter="CapacityDurationHours" if hours_raw is None else "InstanceType")
        hours = int(hours_raw)
        if not (hours > 0 and hours % 24 == 0 and (hours <= 14 * 24 or (hours % 168 == 0 and hours <= 182 * 24))):
            raise refuse("cb-offerings-duration", hours=hours)
        count = int(self._get_param("InstanceCount", 1))
        if not 1 <= count <= 64:
            raise refuse("cb-offerings-count", count=count)
        start = next_block_start(CLOCK.now())
        zone = f"{self.region}a"
        from metalfleet.providers.catalog import load_catalog
        from metalfleet.providers.models import BillingModel

        rate = next((p.hourly for p in load_catalog().prices("aws", self.region, instance_type)
                     if p.billing == BillingModel.CAPACITY_BLOCK), None)
        if rate is None:  # AWS sells blocks of a few types only: an empty answer, as for any unoffered type
            return ActionResult({"CapacityBlockOfferings": []})
        digest = hashlib.sha256(f"{instance_type}|{count}|{hours}|{zone}|{start}".encode()).hexdigest()[:17]
        offering = {"CapacityBlockOfferingId": f"cb-{digest}", "InstanceType": instance_type,
                    "AvailabilityZone": zone, "InstanceCount": count, "StartDate": start,
                    "EndDate": start + timedelta(hours=hours), "CapacityBlockDurationHours": hours,
                    "UpfrontFee": f"{rate * count * hours:.2f}",  # the catalogue's rate per instance-hour
                    "CurrencyCode": "USD", "Tenancy": "default"}
        _ext(self.ec2_backend).block_offerings[offering["CapacityBlockOfferingId"]] = offering
        return ActionResult({"CapacityBlockOfferings": [offering]})

    def purchase_capacity_block(self: Any) -> ActionResult:
        offering_id = self._get_param("CapacityBlockOfferingId")
        platform = self._get_param("InstancePlatform")
        if not offering_id or not platform:
            raise refuse("cb-purchase-required",
                         parameter="CapacityBlockOfferingId" if not offering_id else "InstancePlatform")
        offering = _ext(self.ec2_backend).block_offerings.get(offering_id)
        if offering is None:
            raise refuse("cb-purchase-offering", offering=offering_id)
        self.error_on_dryrun()
        cr = _new_reservation(self, offering["InstanceType"], offering["AvailabilityZone"],
                              offering["InstanceCount"], platform, "capacity-block",
                              self._parse_tag_specification().get("capacity-reservation", {}),
                              "targeted", offering["EndDate"], offering["StartDate"])
        return ActionResult({"CapacityReservation": cr})

    # -- (b)+(a)+(c)+(d) RunInstances ---------------------------------------------------------
    original_run = EC2Response.run_instances

    def named_zone(self: Any) -> str | None:
        """The Availability Zone the request names, explicitly (Placement) or by a subnet; None when it names none."""
        zone = self._get_param("Placement.AvailabilityZone")
        if zone:
            return str(zone)
        subnets = [self._get_param("SubnetId")] + [n.get("SubnetId") for n in self._get_param("NetworkInterfaces", [])]
        for subnet_id in filter(None, subnets):
            with contextlib.suppress(Exception):
                return str(self.ec2_backend.get_subnet(subnet_id).availability_zone)
        return None

    def check_token(self: Any, ext: _Ext, token: str, zone: str | None, digest: str,
                    args: list[tuple[str, Any]]) -> Any:
        """(b) The original answer of a repeated ClientToken, or None for a new one; refusals as EC2 refuses."""
        if len(token) > 64 or not token.isascii():
            raise refuse("run-token-length", length=len(token))
        key = (token, zone)
        if key not in ext.tokens:
            if any(t == token for t, _ in ext.tokens):
                RULES.applies("run-token-zonal")  # zonal idempotency: a new launch in this zone
            return None
        reservation_id, seen = ext.tokens[key]
        reservation = self.ec2_backend.reservations[reservation_id]
        if any(i._state.name == "terminated" for i in reservation.instances):
            raise refuse("run-token-terminated")
        if seen != digest:
            first = ext.token_args.get(key, {})
            now = dict(args)
            differ = sorted(k for k in set(first) | set(now) if first.get(k) != now.get(k))
            raise refuse("run-token-mismatch", differ=", ".join(differ[:8]))
        RULES.applies("run-token-replay")
        return ActionResult(reservation)

    def check_reservation(self: Any, ext: _Ext, instance_type: str, zone: str, count: int,
                          market: str | None) -> dict[str, Any] | None:
        """(d)/(l) The targeted Capacity Reservation, checked as EC2 checks a launch into it."""
        target = (self._get_param("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
        cr_id = target.get("CapacityReservationId")
        if not cr_id:
            if market == "capacity-block":
                raise refuse("run-cr-block-market-type")
            return None
        check_cr_id(cr_id)
        cr = ext.reservations.get(cr_id)
        if cr is None:
            raise refuse("run-cr-exists", reservation=cr_id)
        state = _refresh_reservation(ext, cr)["State"]
        if state == "scheduled":
            raise refuse("run-cr-block-pending", reservation=cr_id, start=cr["StartDate"].isoformat())
        if state != "active":
            raise refuse("run-cr-not-active", reservation=cr_id, state=state)
        if cr["InstanceType"] != instance_type or cr["AvailabilityZone"] != zone:
            raise refuse("run-cr-attributes-match", reservation=cr_id, cr_type=cr["InstanceType"],
                         cr_zone=cr["AvailabilityZone"], instance_type=instance_type, zone=zone)
        if (market == "capacity-block") != (cr["ReservationType"] == "capacity-block"):
            raise refuse("run-cr-block-market-type")
        if cr["AvailableInstanceCount"] < count:
            raise refuse("run-cr-capacity", reservation=cr_id)
        return cr

    def run_instances(self: Any) -> Any:
        ext = _ext(self.ec2_backend)
        token = self._get_param("ClientToken")
        zone_named = named_zone(self)
        args = sorted((k, v) for k, v in self.querystring.items() if k not in ("ClientToken", "DryRun"))
        digest = hashlib.sha256(repr(args).encode()).hexdigest()
        if token is not None:
            replay = check_token(self, ext, str(token), zone_named, digest, args)
            if replay is not None:
                return replay

        instance_type = self._get_param("InstanceType", "m1.small")
        count = int(self._get_param("MinCount", 1))
        zone = zone_named or f"{self.region}a"
        key_name = self._get_param("KeyName")  # (j) every launch, as on AWS
        if key_name and key_name not in self.ec2_backend.key_pairs:
            raise refuse("run-key-pair-exists", key_name=key_name)
        group = self._get_param("Placement.GroupName")
        if group and group not in ext.placement_groups:
            raise refuse("run-placement-group-exists", name=group)
        if group:
            check_placement(self, ext.placement_groups[group], zone, count)
        nics = self._get_param("NetworkInterfaces", [])
        if nics:
            if self._get_param("SubnetId"):
                raise refuse("run-nic-subnet-top-level")
            if query_keys(self, "SecurityGroupId") or query_keys(self, "SecurityGroup"):
                raise refuse("run-nic-groups-top-level")
        check_interfaces(instance_type, nics)
        if len(nics) > 1 and any(str(n.get("AssociatePublicIpAddress")).lower() == "true" for n in nics):
            raise refuse("run-nic-public-ip-multi")
        market = self._get_param("InstanceMarketOptions.MarketType")
        cr = check_reservation(self, ext, instance_type, zone, count, market)
        public_keys = sim_public_keys(self)
        bad_keys = sorted({str(k) for m in self._get_param("BlockDeviceMappings", [])
                           for k in [((m.get("Ebs") or {}).get("KmsKeyId"))] if k and not kms_usable(self, str(k))})
        if not SWITCH.take_capacity(count):
            return error_500("InsufficientInstanceCapacity",
                             f"We currently do not have sufficient {instance_type} capacity in the Availability "
                             f"Zone you requested ({zone}). Our system will be working on provisioning additional "
                             "capacity. You can currently get capacity by not specifying an Availability Zone in "
                             "your request or choosing a different Availability Zone.")
        result = original_run(self)
        reservation: Any = result.result
        if group:
            RULES.applies("run-placement-group-recorded")
        if len(nics) > 1:
            RULES.applies("run-nic-no-auto-public-ip")
        if cr is not None:
            RULES.applies("run-cr-consumes")
        else:
            RULES.applies("run-cr-default-open")
        for inst in reservation.instances:
            if group:
                inst.placement.group_name = group
            if len(nics) > 1:
                for nic in inst.network_interfaces:
                    nic.public_ip_auto_assign = False
                    nic.public_ip = None
            if cr is not None:
                cr_id = cr["CapacityReservationId"]
                ext.reservation_used[cr_id] = ext.reservation_used.get(cr_id, 0) + 1
                _refresh_reservation(ext, cr)
                inst.capacity_reservation_id = cr_id
                inst.capacity_reservation_specification = {"CapacityReservationTarget": {
                    "CapacityReservationId": cr_id}}
            else:
                inst.capacity_reservation_specification = {"CapacityReservationPreference": "open"}
            if market == "capacity-block":
                RULES.applies("run-cr-block-lifecycle")
                inst.lifecycle = "capacity-block"
        if bad_keys:  # (m) accepted, then terminated at once, as EC2 does with an unusable KMS key
            RULES.applies("run-kms-key-unusable")
            for inst in reservation.instances:
                inst.terminate()
                why = "The KMS key provided is in an incorrect state"
                inst.state_reason = StateReason(f"Client.InvalidKMSKey.InvalidState: {why}",
                                                "Client.InvalidKMSKey.InvalidState")
                inst._reason = f"Client.InvalidKMSKey.InvalidState: {why}"
        elif SIM.enabled:
            failed = sim_boot(self, reservation.instances, instance_type, public_keys)
            if failed:
                return error_500("InternalError", f"An internal error has occurred. (emulator: {failed})")
        if token is not None:
            ext.tokens[(str(token), zone_named)] = (reservation.id, digest)
            ext.token_args[(str(token), zone_named)] = dict(args)
        return result

    # -- (i) CreateTags checks instance ids ------------------------------------------------------
    original_create_tags = EC2Response.create_tags

    def create_tags(self: Any) -> Any:
        for resource_id in self._get_param("Resources", []):
            if not str(resource_id).startswith("i-"):
                continue
            if not INSTANCE_ID.match(str(resource_id)):
                raise refuse("create-tags-malformed-id", resource=resource_id)
            if self.ec2_backend.get_instance_by_id(resource_id) is None:
                raise refuse("create-tags-unknown-instance", instance=resource_id)
        return original_create_tags(self)

    # -- (h) simulated hosts: key pair, boot, private IP, console ---------------------------------
    def sim_public_keys(self: Any) -> list[str]:
        """The public key of the launch's KeyName (sim hosts only; AWS refuses an unknown name)."""
        import base64

        key_name = self._get_param("KeyName")
        if not SIM.enabled or not key_name:
            return []
        pair = self.ec2_backend.key_pairs.get(key_name)
        if pair is None:
            raise refuse("run-key-pair-exists", key_name=key_name)
        material = pair.material_public
        text = material.decode() if isinstance(material, bytes) else str(material)
        if not text.lstrip().startswith(("ssh-", "ecdsa-", "sk-")):  # ImportKeyPair keeps the blob as sent
            with contextlib.suppress(ValueError):
                text = base64.b64decode(text).decode()
        return [text.strip()]

    def sim_boot(self: Any, instances: list[Any], instance_type: str, public_keys: list[str]) -> str | None:
        """Boot a host per instance and give the instance its address; the error, if a boot failed."""
        for inst in instances:
            try:
                attached = [(getattr(n, "interface_type", None), int(getattr(n, "network_card_index", 0) or 0))
                            for n in inst.network_interfaces]
                host = SIM.boot(inst.id, instance_type, public_keys, dict(self.ec2_backend.tags.get(inst.id, {})),
                                fabric=efa_fabric(instance_type, attached))
            except Exception as exc:  # the launch fails as a whole, as a failed launch does on AWS
                for other in instances:
                    other.terminate()
                return f"simulated host for {inst.id} did not boot: {type(exc).__name__}: {exc}"
            nic = inst.nics[0]
            nic.private_ip_address = host.address
            nic.private_ip_addresses = [{"Primary": True, "PrivateIpAddress": host.address}]
            SSH_BACKENDS[inst.id] = self.ec2_backend
        sim_ssh_rules()  # (n) before RunInstances answers: nobody could have connected yet
        return None

    # -- (j) interfaces against the instance type; (k) placement strategies; (m) KMS keys ----------
    def check_interfaces(instance_type: str, nics: list[dict[str, Any]]) -> None:
        if not nics:
            return
        for n in nics:
            kind = n.get("InterfaceType")
            if kind is not None and kind not in INTERFACE_TYPES:
                raise refuse("run-nic-interface-type-values", interface_type=kind)
        def card_of(n: dict[str, Any]) -> int:
            return int(n.get("NetworkCardIndex") or 0)

        primary = [n for n in nics if card_of(n) == 0 and int(n.get("DeviceIndex") or 0) == 0]
        if not primary:
            raise refuse("run-nic-primary-on-card-0")
        if primary[0].get("InterfaceType") == "efa-only":
            raise refuse("run-nic-efa-only-not-primary")
        info = INSTANCE_TYPES.get(instance_type)
        if not info:
            return
        net = info.get("NetworkInfo") or {}
        cards = int(net.get("MaximumNetworkCards") or 1)
        per_card = {int(c["NetworkCardIndex"]): int(c.get("MaximumNetworkInterfaces") or 0)
                    for c in net.get("NetworkCards") or []}
        efa_max = int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0) if net.get("EfaSupported") else 0
        seen: set[tuple[int, int]] = set()
        on_card: dict[int, int] = {}
        for n in nics:
            card, device = card_of(n), int(n.get("DeviceIndex") or 0)
            if not 0 <= card < cards:
                raise refuse("run-nic-card-index-range", card=card, instance_type=instance_type, cards=cards,
                             last=cards - 1)
            if (card, device) in seen:
                raise refuse("run-nic-unique-device-index", card=card, device=device)
            seen.add((card, device))
            on_card[card] = on_card.get(card, 0) + 1
        for card, used in sorted(on_card.items()):
            if per_card.get(card) and used > per_card[card]:
                raise refuse("run-nic-card-limit", used=used, instance_type=instance_type, card=card,
                             limit=per_card[card])
        efa = sum(1 for n in nics if n.get("InterfaceType") in ("efa", "efa-only"))
        if efa > efa_max:
            raise refuse("run-nic-efa-limit", efa=efa, instance_type=instance_type, limit=efa_max)

    def check_placement(self: Any, pg: dict[str, Any], zone: str, count: int) -> None:
        name = pg["GroupName"]
        members = [i for i in self.ec2_backend.all_instances()
                   if i.placement.group_name == name and _live(i)]
        if pg["Strategy"] == "cluster":
            zones_used = sorted({str(i.placement.zone) for i in members} - {zone})
            if zones_used:
                raise refuse("run-placement-cluster-one-zone", name=name, zone=zones_used[0])
        elif pg["Strategy"] == "spread":
            running = [i for i in members if i.placement.zone == zone and i._state.name in ("pending", "running")]
            if len(running) + count > 7:
                raise refuse("run-placement-spread-seven", name=name, zone=zone, running=len(running), count=count)
        elif pg["Strategy"] == "partition":
            number = self._get_param("Placement.PartitionNumber")
            if number is not None and not 1 <= int(number) <= int(pg["PartitionCount"]):
                raise refuse("run-placement-partition-number", number=number, name=name,
                             partitions=pg["PartitionCount"])

    def kms_usable(self: Any, key_id: str) -> bool:
        """(m) ``key_id`` (id, ARN, alias or alias ARN) names an enabled key in this account and region."""
        from moto.kms.models import kms_backends

        try:
            key = kms_backends[self.current_account][self.region].describe_key(key_id)
        except Exception:  # unknown id or alias (moto raises KeyError/NotFoundException/TypeError)
            return False
        return str(getattr(key, "key_state", "Enabled")) == "Enabled"

    # -- (o) DeleteSecurityGroup refuses a group in use ------------------------------------------
    original_delete_sg = EC2Response.delete_security_group

    def delete_security_group(self: Any) -> Any:
        backend = self.ec2_backend
        gid, name = self._get_param("GroupId"), self._get_param("GroupName")
        group = backend.get_security_group_from_id(gid) if gid else (
            backend.get_security_group_from_name(name) if name else None)
        if group is not None:
            if group.name == "default":
                raise refuse("delete-sg-default", group=group.id)
            for eni in list(backend.enis.values()):
                owner = getattr(eni, "instance", None)
                if (owner is None or _live(owner)) and any(g.id == group.id for g in eni.group_set):
                    raise refuse("delete-sg-in-use", group=group.id)
            for groups in list(backend.groups.values()):
                for other in list(groups.values()):
                    if other.id != group.id and any((r.source_group or {}).get("GroupId") == group.id
                                                    for r in [*other.ingress_rules, *other.egress_rules]):
                        raise refuse("delete-sg-referenced", group=group.id, referrer=other.id)
        return original_delete_sg(self)

    original_console = EC2Response.get_console_output

    def get_console_output(self: Any) -> Any:
        instance_id = self._get_param("InstanceId")
        text = SIM.console(instance_id)
        if text is None:
            return original_console(self)
        instance = self.ec2_backend.get_instance(instance_id)
        RULES.applies("console-output-base64")
        return ActionResult({"InstanceId": instance.id, "Timestamp": utcnow(),
                             "Output": Base64EncodedString.from_raw_string(text)})

    original_stop, original_start, original_reboot = Instance.stop, Instance.start, Instance.reboot

    def stop(self: Any) -> Any:
        previous = original_stop(self)
        SIM.power_off(self.id)
        return previous

    def start(self: Any) -> Any:
        previous = original_start(self)
        SIM.power_on(self.id)
        return previous

    def reboot(self: Any) -> None:
        original_reboot(self)
        SIM.reboot(self.id)

    # -- (c) NICs on every network card --------------------------------------------------------
    original_prep = Instance.prep_nics

    def prep_nics(self: Any, nic_spec: list[dict[str, Any]], private_ip: str | None = None,
                  associate_public_ip: bool | None = None, security_groups: list[Any] | None = None,
                  ipv6_address_count: int | None = None) -> None:
        def card(n: dict[str, Any]) -> int:
            return int(n.get("NetworkCardIndex") or 0)

        primary = [n for n in nic_spec if card(n) == 0]
        others = [n for n in nic_spec if card(n) != 0]
        original_prep(self, primary, private_ip, associate_public_ip, security_groups, ipv6_address_count)
        if others or any(n.get("InterfaceType") for n in primary):
            RULES.applies("run-nic-keeps-card-and-type")
        for n in primary:
            if n.get("InterfaceType") and int(n["DeviceIndex"]) in self.nics:
                self.nics[int(n["DeviceIndex"])].interface_type = n["InterfaceType"]
        self.card_nics = []
        for n in others:
            groups = list(n.get("Groups") or []) + [g.id for g in security_groups or []]
            eni = self.ec2_backend.create_network_interface(
                n.get("SubnetId") or self.subnet_id, None, device_index=int(n["DeviceIndex"]),
                public_ip_auto_assign=False, group_ids=groups,
                delete_on_termination=str(n.get("DeleteOnTermination")).lower() == "true",
                description=n.get("Description"))
            eni.interface_type = n.get("InterfaceType") or "interface"
            eni.network_card_index = card(n)
            eni.instance = self
            eni.attachment_id = random_eni_attach_id()
            eni.attach_time = datetime.now(UTC)
            eni.status = "in-use"
            self.card_nics.append(eni)

    def network_interfaces(self: Any) -> list[Any]:
        return list(self.nics.values()) + list(getattr(self, "card_nics", []))

    original_attachment_init = Attachment.__init__

    def attachment_init(self: Any, eni: Any) -> None:
        original_attachment_init(self, eni)
        self.network_card_index = getattr(eni, "network_card_index", 0)

    # -- (f) terminate is idempotent; (c)/(d) clean up on terminate ------------------------------
    original_terminate = Instance.terminate

    def terminate(self: Any) -> Any:
        if self._state.name == "terminated":
            RULES.applies("terminate-idempotent")
            return type(self._state)(self._state.name, self._state.code)
        previous = original_terminate(self)
        SIM.stop(self.id)
        SSH_BACKENDS.pop(self.id, None)
        for eni in getattr(self, "card_nics", []):
            eni.stop()
            if eni.delete_on_termination:
                with contextlib.suppress(Exception):
                    eni.delete()
        ext = _ext(self.ec2_backend)
        cr_id = getattr(self, "capacity_reservation_id", None) or ""
        if cr_id in ext.reservations:
            ext.reservation_used[cr_id] = max(0, ext.reservation_used.get(cr_id, 0) - 1)
            _refresh_reservation(ext, ext.reservations[cr_id])
        return previous

    # -- (g) stable default subnet ids ------------------------------------------------------------
    import moto.ec2.models.subnets as subnets_module

    random_subnet_id = getattr(subnets_module, "random_subnet_id")  # noqa: B009 - not re-exported by moto
    next_subnet_id = threading.local()

    def subnet_id() -> str:
        chosen = getattr(next_subnet_id, "value", None)
        next_subnet_id.value = None
        return str(chosen or random_subnet_id())

    original_default_subnet = subnets_module.SubnetBackend.create_default_subnet

    def create_default_subnet(self: Any, availability_zone: str) -> Any:
        next_subnet_id.value = default_subnet_id(availability_zone, self.account_id)
        try:
            return original_default_subnet(self, availability_zone)
        finally:
            next_subnet_id.value = None

    setattr(subnets_module, "random_subnet_id", subnet_id)  # noqa: B010
    subnets_module.SubnetBackend.create_default_subnet = create_default_subnet  # type: ignore[method-assign]

    for name, fn in {
        "create_placement_group": create_placement_group,
        "describe_placement_groups": describe_placement_groups,
        "delete_placement_group": delete_placement_group,
        "create_capacity_reservation": create_capacity_reservation,
        "describe_capacity_reservations": describe_capacity_reservations,
        "cancel_capacity_reservation": cancel_capacity_reservation,
        "describe_capacity_block_offerings": describe_capacity_block_offerings,
        "purchase_capacity_block": purchase_capacity_block,
        "run_instances": run_instances,
        "get_console_output": get_console_output,
        "create_tags": create_tags,
        "delete_security_group": delete_security_group,
    }.items():
        setattr(EC2Response, name, fn)
    Instance.prep_nics = prep_nics  # type: ignore[method-assign]
    Instance.stop = stop  # type: ignore[method-assign]
    Instance.start = start  # type: ignore[method-assign]
    Instance.reboot = reboot  # type: ignore[method-assign]
    Instance.network_interfaces = property(network_interfaces)  # type: ignore[assignment,method-assign]
    Instance.terminate = terminate  # type: ignore[method-assign]
    Attachment.__init__ = attachment_init  # type: ignore[method-assign]



# ---------------------------------------------------------------------------------------------
# Entry point.
# ---------------------------------------------------------------------------------------------
def _after_call(action: str, status: int) -> None:
    if SIM.enabled and action in SSH_RULE_ACTIONS and status == 200:
        sim_ssh_rules()


def _reset_state() -> None:
    from moto.backends import get_backend

    get_backend("ec2").reset()
    SSH_BACKENDS.clear()
    EXT_BACKENDS.clear()


def build_app() -> FaultMiddleware:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    install_extensions()
    moto_app = DomainDispatcherApplication(create_backend_app)

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        sweep_capacity_blocks()  # (l) under the moto lock, before the call reads any state
        return moto_app(environ, start_response)

    return FaultMiddleware(app, switch=SWITCH,
                           error_body=_error_reply, clock=CLOCK, sim_hosts=SIM, lock=MOTO_LOCK,
                           after_call=_after_call, reset_state=_reset_state)


def main(argv: list[str] | None = None) -> int:
    from moto.moto_server.werkzeug_app import MotoRequestHandler

    parser = server_parser(__doc__.split("\n\n")[0] if __doc__ else None, default_port=5055,
                           sim_hosts_help="boot a simulated GPU host per instance (extension h; needs root)")
    args = parser.parse_args(argv)
    os.environ.setdefault("MOTO_PORT", str(args.port))
    return run_server(parser, args, build_app, title="EC2 emulator", sim_hosts=SIM,
                      request_handler=MotoRequestHandler)


if __name__ == "__main__":
    sys.exit(main())
