"""Slurm node definitions from what a node is and what the acceptance gate measured on it.

A node joins a partition with the CPUs, sockets, cores, threads and memory its own facts show, and with
``Gres=gpu:<model>:<n>`` (``npu:<model>:<n>`` on Ascend) from the gate's evidence: the GPUs that answered
``nvidia-smi`` and passed, not a hand-written table. Its features name the offering, the fabric, the provider and
the accelerator, so jobs can ``--constraint`` on them. Switches come from the nodes' topology labels (the same
ones the gate's localisation orders by), so ``topology.conf`` places jobs on nodes that share a leaf.

Pure: :class:`SlurmNode` values in, ``slurm.conf`` lines, ``gres.conf`` and ``topology.conf`` text out, and the
``scontrol`` argv that drains, resumes or forgets a node (``shlex.join``-safe lists, never formatted strings).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from metalfleet.providers.errors import InvalidSpecError

from .acceptance.localise import TOPOLOGY_LABELS
from .acceptance.results import NodeAcceptance
from .facts import CpuLayout

__all__ = [
    "GateNode",
    "Gres",
    "NodeResources",
    "NodeState",
    "SlurmNode",
    "create_argv",
    "create_tokens",
    "delete_argv",
    "drain_argv",
    "dynamic_conf",
    "gres_conf",
    "gres_type",
    "health_check_script",
    "node_from_acceptance",
    "node_lines",
    "parse_nodes",
    "partition_line",
    "plan_sync",
    "record_drift",
    "remove_argv",
    "resume_argv",
    "task_prolog",
    "topology_conf",
]

#: Every reason metalfleet gives Slurm starts with this, so a later run resumes only the drains it made.
REASON_PREFIX = "metalfleet: "

#: Slurm node and feature names: letters, digits, '-', '_', '.' (a feature may not hold ',', '&', '|' or spaces:
#: they are the --constraint operators).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
#: Accelerator names as a gres type: the family token of the product name ("NVIDIA H100 80GB HBM3" -> "h100").
_FAMILY = re.compile(r"\b(GB\d{3}|[A-Z]{1,2}\d{2,4}[A-Z]?|9\d{2}[A-Z]\d?)\b")


@dataclass(frozen=True)
class NodeResources:
    """What ``slurmd -C`` would print for the node: sockets x cores x threads, and memory in MiB."""

    sockets: int
    cores_per_socket: int
    threads_per_core: int
    memory_mib: int

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core

    @classmethod
    def from_facts(cls, layout: CpuLayout | None, memory_mib: int | None, node: str = "node") -> NodeResources:
        """From the node's :class:`~.facts.CpuTopology` and :class:`~.facts.MemoryTotal` facts; a node whose
        facts could not be read is refused (Slurm would drain it for resources it does not have)."""
        if layout is None or memory_mib is None:
            missing = " and ".join(w for w, v in (("lscpu", layout), ("/proc/meminfo", memory_mib)) if v is None)
            raise InvalidSpecError(f"node {node}: its {missing} could not be read, so it has no Slurm definition",
                                   field="scheduler", value=node)
        threads = layout.threads_per_core or 1
        sockets = layout.sockets or 1
        cores = layout.cores_per_socket or max(layout.cpus // (sockets * threads), 1)
        return cls(sockets, cores, threads, memory_mib)


@dataclass(frozen=True)
class Gres:
    """One generic resource of a node: ``gpu`` (or ``npu``), its type, count and device files."""

    name: str
    type: str
    count: int
    #: The device files, as gres.conf's File= (one per device): /dev/nvidia[0-7], /dev/davinci[0-7].
    files: str | None = None

    def spec(self) -> str:
        return f"{self.name}:{self.type}:{self.count}"


@dataclass(frozen=True)
class SlurmNode:
    name: str
    address: str
    cpu: NodeResources
    gres: tuple[Gres, ...] = ()
    features: tuple[str, ...] = ()
    #: The leaf switch it hangs off (topology.conf); None when its labels say nothing.
    switch: str | None = None
    #: Slurmd's port on the node (None: the cluster's SlurmdPort).
    port: int | None = None
    #: The node's own short host name, when it differs from ``name`` (slurmd finds its NodeName by it).
    hostname: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


def _check_name(what: str, value: str) -> str:
    if not _NAME.match(value):
        raise InvalidSpecError(f"{what} {value!r} is not a Slurm name (letters, digits, '-', '_', '.'; at most 63)",
                               field=what, value=value)
    return value


def gres_type(product: str) -> str:
    """The gres type of an accelerator product name: its family token, lower-case ("NVIDIA H100 80GB HBM3" ->
    "h100", "NVIDIA A100-SXM4-80GB" -> "a100", "Ascend910B3" -> "910b3"); the whole name sanitised when none."""
    m = _FAMILY.search(product.replace("-", " ").replace("Ascend", "Ascend "))
    token = m.group(1) if m else product
    return re.sub(r"[^a-z0-9_]+", "_", token.lower()).strip("_") or "gpu"


@dataclass(frozen=True)
class GateNode:
    """What a Slurm definition needs from the gate's verdict on one node, as plain data (a Pulumi resource passes
    it on): whether it passed and why not, what the gate counted and named, what its baseline says it has."""

    host: str
    address: str
    offering: str
    passed: bool
    reason: str = ""
    provider: str | None = None
    gpu_count: int | None = None
    gpu_model: str | None = None
    fabric: str | None = None
    ascend: bool = False
    baseline_gpu_count: int | None = None
    baseline_gpu_model: str | None = None

    @classmethod
    def from_acceptance(cls, node: NodeAcceptance) -> GateNode:
        count = node.verdict.check("gpu-count")
        model = node.verdict.check("gpu-model")
        names = model.measured if model is not None else None
        b = node.baseline
        return cls(node.host, node.address, node.offering, node.passed, node.reason, node.provider,
                   count.measured if count is not None and isinstance(count.measured, int) else None,
                   str(names[0]) if isinstance(names, list) and names else None,
                   b.fabric.kind if b is not None else None, bool(b is not None and b.ascend),
                   b.gpu.count if b is not None else None, b.gpu.model if b is not None else None)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateNode:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for k in ("gpu_count", "baseline_gpu_count"):  # through Pulumi's state every number is a float
            if isinstance(values.get(k), float) and values[k].is_integer():
                values[k] = int(values[k])
        return cls(**values)


def node_from_acceptance(node: NodeAcceptance | GateNode, cpu: NodeResources, *, name: str | None = None,
                         labels: Mapping[str, str] | None = None, extra_features: Iterable[str] = (),
                         port: int | None = None, device_dir: str = "/dev", keep: bool = False,
                         hostname: str | None = None) -> SlurmNode:
    """The Slurm node of an accepted node: its GPUs (or NPUs) as the gate counted and named them, features from
    its offering, fabric and provider, the switch from its labels. Raises InvalidSpecError for a node that did
    not pass (it must not join) or whose evidence names no accelerator.

    ``keep``: a node that failed but that Slurm already has (it is drained, not dropped): its definition is what
    its offering's baseline says it has, so the line stays as it was and Slurm needs no restart."""
    gate = node if isinstance(node, GateNode) else GateNode.from_acceptance(node)
    if not gate.passed and not keep:
        raise InvalidSpecError(f"node {gate.host} did not pass acceptance ({gate.reason}); it does not join Slurm",
                               field="scheduler", value=gate.host)
    count, product = gate.gpu_count, gate.gpu_model or gate.baseline_gpu_model
    if not gate.passed:
        count, product = gate.baseline_gpu_count, gate.baseline_gpu_model or product
    if not isinstance(count, int) or count < 1:
        raise InvalidSpecError(f"node {gate.host}: the gate counted no accelerators, so it has no Gres to offer",
                               field="gpu-count", value=count)
    if not product:
        raise InvalidSpecError(f"node {gate.host}: the gate's evidence names no accelerator model",
                               field="gpu-model", value=None)
    kind, dev = ("npu", "davinci") if gate.ascend else ("gpu", "nvidia")
    files = f"{device_dir.rstrip('/')}/{dev}[0-{count - 1}]" if count > 1 else f"{device_dir.rstrip('/')}/{dev}0"
    gres = Gres(kind, gres_type(str(product)), count, files)
    fabric = gate.fabric
    feats = [gate.offering, *([fabric] if fabric and fabric != "none" else []),
             *([gate.provider] if gate.provider else []), gres.type, *extra_features]
    features = tuple(dict.fromkeys(_check_name("scheduler.features", f) for f in feats if f))
    labels = dict(labels or {})
    switch = next((labels[k] for k in TOPOLOGY_LABELS if labels.get(k)), None)
    return SlurmNode(_check_name("node name", name or gate.host), gate.address, cpu, (gres,), features,
                     _check_name("switch", switch) if switch else None, port=port, labels=labels,
                     hostname=_check_name("host name", hostname) if hostname else None)


# --------------------------------------------------------------------------------------------
# slurm.conf, gres.conf, topology.conf


def node_lines(nodes: Sequence[SlurmNode]) -> str:
    """One ``NodeName=`` line per node, as ``slurmd -C`` would describe it, plus its Gres and features."""
    lines = []
    for n in nodes:
        c = n.cpu
        parts = [f"NodeName={n.name}", f"NodeAddr={n.address}",
                 *([f"NodeHostname={n.hostname}"] if n.hostname and n.hostname != n.name else []),
                 f"CPUs={c.cpus}", "Boards=1",
                 f"SocketsPerBoard={c.sockets}", f"CoresPerSocket={c.cores_per_socket}",
                 f"ThreadsPerCore={c.threads_per_core}", f"RealMemory={c.memory_mib}"]
        if n.port is not None:
            parts.append(f"Port={n.port}")
        if n.gres:
            parts.append("Gres=" + ",".join(g.spec() for g in n.gres))
        if n.features:
            parts.append("Feature=" + ",".join(n.features))
        parts.append("State=UNKNOWN")
        lines.append(" ".join(parts))
    return "\n".join(lines) + ("\n" if lines else "")


def partition_line(name: str, nodes: Sequence[SlurmNode], *, default: bool = True) -> str:
    _check_name("scheduler.partition", name)
    members = ",".join(n.name for n in nodes) or "\"\""
    return f"PartitionName={name} Nodes={members} Default={'YES' if default else 'NO'} MaxTime=INFINITE State=UP\n"


# --------------------------------------------------------------------------------------------
# Joining a controller that exists: dynamic nodes (Slurm 22.05+, https://slurm.schedmd.com/dynamic_nodes.html)

#: The node keys ``slurmd -Z --conf`` takes (slurmd(8): "NodeName and Port are not supported").
DYNAMIC_KEYS = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory", "Gres",
                "Feature")


def create_tokens(n: SlurmNode) -> list[str]:
    """The node's definition for ``scontrol create`` ("the same NodeName line that you would define in the
    slurm.conf ... Only State=CLOUD and State=FUTURE are supported"): FUTURE until its slurmd registers. Created
    before slurmd starts, it carries the address metalfleet knows (a registration alone takes the connection's)."""
    c = n.cpu
    parts = [f"NodeName={n.name}", f"NodeAddr={n.address}", f"NodeHostname={n.hostname or n.name}",
             f"CPUs={c.cpus}", "Boards=1", f"SocketsPerBoard={c.sockets}", f"CoresPerSocket={c.cores_per_socket}",
             f"ThreadsPerCore={c.threads_per_core}", f"RealMemory={c.memory_mib}"]
    if n.gres:
        parts.append("Gres=" + ",".join(g.spec() for g in n.gres))
    if n.features:
        parts.append("Feature=" + ",".join(n.features))
    return [*parts, "State=FUTURE"]


def create_argv(tokens: Sequence[str]) -> list[str]:
    return ["scontrol", "create", *tokens]


def dynamic_conf(tokens: Sequence[str]) -> str:
    """``slurmd -Z --conf`` from the create tokens: the same resources and features, in the same words."""
    return " ".join(t for t in tokens if t.partition("=")[0] in DYNAMIC_KEYS)


def delete_argv(name: str) -> list[str]:
    """Forget a dynamic node ("Only dynamic nodes that have no running jobs and that are not part of a reservation
    can be deleted")."""
    return ["scontrol", "delete", f"nodename={name}"]


#: scontrol's field for each create key, to compare a record with what it should be.
_SHOWN = {"NodeAddr": "NodeAddr", "NodeHostname": "NodeHostName", "CPUs": "CPUTot", "RealMemory": "RealMemory",
          "SocketsPerBoard": "Sockets", "CoresPerSocket": "CoresPerSocket", "ThreadsPerCore": "ThreadsPerCore",
          "Gres": "Gres", "Feature": "AvailableFeatures"}


def record_drift(tokens: Sequence[str], record: NodeState) -> tuple[list[str], list[str]]:
    """How the controller's record differs from the create tokens: (address keys, resource keys). Addresses can be
    updated in place; resources of a dynamic node only by deleting and creating it again."""
    want = dict(t.split("=", 1) for t in tokens)
    addr: list[str] = []
    res: list[str] = []
    for key, shown in _SHOWN.items():
        if key not in want:
            continue
        have = record.fields.get(shown, "")
        same = sorted(have.split(",")) == sorted(want[key].split(",")) if key in ("Gres", "Feature") \
            else have == want[key]
        if not same:
            (addr if key in ("NodeAddr", "NodeHostname") else res).append(f"{key}: {have or '-'} -> {want[key]}")
    return addr, res


def gres_conf(nodes: Sequence[SlurmNode]) -> str:
    """One line per node and resource: what each device file is (Slurm binds jobs to them)."""
    lines = [f"NodeName={n.name} Name={g.name} Type={g.type}" + (f" File={g.files}" if g.files else f" Count={g.count}")
             for n in nodes for g in n.gres]
    return "\n".join(lines) + ("\n" if lines else "")


def topology_conf(nodes: Sequence[SlurmNode], *, root: str = "spine") -> str:
    """``topology/tree``: a leaf switch per switch label, its nodes under it, and one switch above them all when
    there are several (Slurm then prefers placing a job under one leaf). Empty when no node has a switch."""
    leaves: dict[str, list[str]] = {}
    for n in nodes:
        if n.switch:
            leaves.setdefault(n.switch, []).append(n.name)
    if not leaves:
        return ""
    lines = [f"SwitchName={sw} Nodes={','.join(members)}" for sw, members in sorted(leaves.items())]
    if len(leaves) > 1:
        lines.append(f"SwitchName={root} Switches={','.join(sorted(leaves))}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# The gate's verdicts, as scontrol sees them


def drain_argv(name: str, reason: str) -> list[str]:
    """Drain a node with the gate's reason (``sinfo -R`` shows it); running jobs finish, no new ones start."""
    return ["scontrol", "update", f"nodename={name}", "state=drain", f"reason={REASON_PREFIX}{_reason(reason)}"]


def resume_argv(name: str) -> list[str]:
    return ["scontrol", "update", f"nodename={name}", "state=resume"]


def remove_argv(name: str) -> list[str]:
    """Take a node out of service before its machine goes (the config then drops it): its jobs end. After
    :func:`drain_argv` (plan_sync), so that a registration in between cannot put it back in service."""
    return ["scontrol", "update", f"nodename={name}", "state=down", f"reason={REASON_PREFIX}released"]


def _reason(reason: str) -> str:
    """A reason as scontrol keeps it: one line, no '=' ambiguity, at most 200 characters."""
    text = " ".join(reason.split())
    return (text[:197] + "...") if len(text) > 200 else text


@dataclass(frozen=True)
class NodeState:
    """A node as ``scontrol show nodes --oneliner`` tells it: its state flags and its reason."""

    name: str
    #: The state words, upper-case: {"IDLE", "DRAIN"}, {"MIXED"}, {"DOWN", "NOT_RESPONDING"} ...
    flags: frozenset[str]
    reason: str | None = None
    gres: str | None = None
    features: tuple[str, ...] = ()
    #: Every ``Key=Value`` of its line (NodeAddr, CPUTot, RealMemory, Partitions ...).
    fields: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def partitions(self) -> tuple[str, ...]:
        return tuple(p for p in self.fields.get("Partitions", "").split(",") if p and p != "(null)")

    @property
    def drained(self) -> bool:
        return bool(self.flags & {"DRAIN", "DRAINED", "DRAINING"})

    @property
    def ours(self) -> bool:
        """Drained or downed by metalfleet (its reason says so), not by an operator."""
        return (self.reason or "").startswith(REASON_PREFIX)


_FIELD = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z/]*)=")


def parse_nodes(text: str) -> dict[str, NodeState]:
    """``scontrol show nodes --oneliner``: one node a line, ``Key=Value`` pairs (a Reason runs to the end of its
    line: it may hold spaces; Slurm appends ``[user@time]``)."""
    out: dict[str, NodeState] = {}
    for line in text.splitlines():
        if not line.startswith("NodeName="):
            continue
        fields: dict[str, str] = {}
        marks = list(_FIELD.finditer(line))
        for i, m in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
            if m.group(1) == "Reason":
                fields["Reason"] = line[m.end():].strip()
                break
            fields[m.group(1)] = line[m.end():end].strip()
        name = fields.get("NodeName", "").split()[0]
        reason = re.sub(r"\s*\[[^\]]*@[^\]]*\]$", "", fields["Reason"]) if "Reason" in fields else None
        feats = fields.get("AvailableFeatures") or fields.get("ActiveFeatures") or ""
        out[name] = NodeState(name, frozenset(w for w in re.split(r"[+*]", fields.get("State", "")) if w),
                              reason, fields.get("Gres"), tuple(f for f in feats.split(",") if f and f != "(null)"),
                              fields)
    return out


def plan_sync(current: Mapping[str, NodeState], *, accepted: Iterable[str], quarantined: Mapping[str, str],
              released: Iterable[str] = (), delete: bool = False) -> list[list[str]]:
    """The scontrol calls that make Slurm agree with the gate: a quarantined node drained with its reason, an
    accepted node that metalfleet drained before resumed (an operator's drain is left alone), a released node
    taken out before its machine goes (``delete``: and then forgotten, as a dynamic node on a controller that
    is not metalfleet's must be). Nothing for a node already as it should be, so a second run is empty."""
    calls: list[list[str]] = []
    for name, why in quarantined.items():
        st = current.get(name)
        want = f"{REASON_PREFIX}{_reason(why)}"
        if st is not None and not (st.drained and st.reason == want):
            calls.append(drain_argv(name, why))
    for name in accepted:
        st = current.get(name)
        if st is not None and st.ours and (st.drained or "DOWN" in st.flags):
            calls.append(resume_argv(name))
    for name in released:
        st = current.get(name)
        # drained first: DRAIN survives the node registering again before its machine goes (ReturnToService
        # brings a DOWN node back, not a drained one), then DOWN, which ends what still runs there
        if st is not None and not (st.drained and st.reason == f"{REASON_PREFIX}released"):
            calls += [drain_argv(name, "released"), remove_argv(name)]
        if st is not None and delete:
            calls.append(delete_argv(name))
    return calls


def task_prolog(env_file: str = "/etc/profile.d/metalfleet-nccl.sh") -> str:
    """A ``TaskProlog`` that hands every job task the NCCL (and libfabric) settings bootstrap's nccl-config wrote
    and the acceptance gate ran with: slurmstepd runs it before each task and sets each ``export NAME=value``
    line it prints. The file is read in a clean shell, so only its own settings pass."""
    import shlex

    path = shlex.quote(env_file)
    return ("#!/bin/sh\n"
            "# metalfleet: the NCCL tuning the acceptance gate ran with, for every task of every job.\n"
            f"[ -r {path} ] || exit 0\n"
            f"env -i /bin/sh -c '. \"$1\" && env' sh {path} | "
            "sed -n 's/^\\(\\(NCCL\\|FI\\)_[A-Za-z0-9_]*\\)=\\(.*\\)$/export \\1=\\3/p'\n")


def health_check_script(expected: Mapping[str, int], kind: str = "gpu") -> str:
    """A ``HealthCheckProgram``: metalfleet's fast node check, the accelerators the gate counted (node name ->
    count) still answering (``nvidia-smi --query-gpu``; ``npu-smi info -l`` on Ascend). slurmd runs it every
    HealthCheckInterval; a node short of one is drained with the check's reason, which says so."""
    import shlex

    table = " ".join(f"{shlex.quote(name)}={int(count)}" for name, count in sorted(expected.items()))
    count = ("nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c ." if kind == "gpu"
             else "npu-smi info -l 2>/dev/null | grep -c 'NPU ID'")
    return ("#!/bin/sh\n"
            "# metalfleet: the accelerators the acceptance gate counted must still answer; drain the node if not.\n"
            f"node=${{SLURMD_NODENAME:-$(hostname -s)}}\nwant=0\nfor e in {table}; do\n"
            '  [ "${e%%=*}" = "$node" ] && want=${e#*=}\ndone\n'
            f"have=$({count})\n"
            'if [ "$have" -lt "$want" ]; then\n'
            f'  scontrol update nodename="$node" state=drain reason="{REASON_PREFIX}health check: $have of $want '
            f'{kind.upper()}s answer"\n'
            "  exit 1\nfi\nexit 0\n")
