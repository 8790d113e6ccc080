"""What a live acceptance run found: per probe, per node, per run across nodes, and the whole report."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .baselines import Baseline
from .localise import Localisation
from .report import to_json, to_junit, to_markdown, verdict_to_dict
from .verdict import TextEnum, Verdict

__all__ = ["AcceptanceReport", "MultiNodeResult", "NodeAcceptance", "NodeStatus", "ProbeResult"]


class NodeStatus(TextEnum):
    """A node's (or a run across nodes') acceptance status; its value is what reports print."""

    PASS = "pass"
    FAIL = "fail"
    #: It could not be reached: never judged.
    UNREACHABLE = "unreachable"
    #: Its probes could not run or did not finish.
    ERROR = "error"


@dataclass
class ProbeResult:
    """What one probe printed and what became of it."""

    name: str
    label: str
    rc: int
    seconds: float | None = None
    #: The parser kind its output was read as (None when it was no evidence).
    kind: str | None = None
    #: Why it is no evidence: "not installed (exit 127)", "timed out after 60s", a parse error...
    error: str | None = None
    #: The file name its evidence is saved under (one the offline reader recognises).
    file: str | None = None
    #: Saved file, relative to the host's folder.
    saved_as: str | None = None
    stdout: str = field(default="", repr=False)
    stderr: str = field(default="", repr=False)

    @property
    def is_evidence(self) -> bool:
        return self.kind is not None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "command": self.label, "rc": self.rc,
                "seconds": None if self.seconds is None else round(self.seconds, 3), "kind": self.kind,
                "error": self.error, "saved_as": self.saved_as, "stderr_tail": self.stderr[-2000:]}


@dataclass
class NodeAcceptance:
    """One node's verdict (synthesised for a node that could not be judged) and its probes."""

    host: str
    address: str
    offering: str
    status: NodeStatus
    verdict: Verdict
    provider: str | None = None
    error: str | None = None
    probes: list[ProbeResult] = field(default_factory=list)
    seconds: float = 0.0
    round_trips: int = 0
    #: The provider's node id, when the host came from a provider (set by accept_cluster).
    node_id: str | None = None
    saved_to: str | None = None
    #: The resolved baseline (for tables); not serialised.
    baseline: Baseline | None = field(default=None, repr=False)

    @property
    def passed(self) -> bool:
        return self.status == NodeStatus.PASS

    @property
    def reason(self) -> str:
        """The first failing check as ``name: reason`` (or the error); "" when passed."""
        if self.error and self.status in (NodeStatus.UNREACHABLE, NodeStatus.ERROR):
            return self.error
        first = next(iter(self.verdict.failures), None)
        return f"{first.name}: {first.reason}" if first else ""

    def probe(self, name: str) -> ProbeResult | None:
        return next((p for p in self.probes if p.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "address": self.address, "node_id": self.node_id, "provider": self.provider,
                "offering": self.offering, "status": self.status, "passed": self.passed, "reason": self.reason,
                "error": self.error, "seconds": round(self.seconds, 3), "round_trips": self.round_trips,
                "saved_to": self.saved_to, "probes": [p.to_dict() for p in self.probes],
                "verdict": verdict_to_dict(self.verdict)}


@dataclass
class MultiNodeResult:
    """The all_reduce across the nodes of one offering that passed on their own."""

    offering: str
    hosts: list[str]
    launcher: str
    hostfile: str
    status: NodeStatus
    verdict: Verdict
    probe: ProbeResult | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == NodeStatus.PASS

    @property
    def reason(self) -> str:
        if self.error:
            return self.error
        first = next(iter(self.verdict.failures), None)
        return f"{first.name}: {first.reason}" if first else ""

    def to_dict(self) -> dict[str, Any]:
        return {"offering": self.offering, "hosts": list(self.hosts), "launcher": self.launcher,
                "hostfile": self.hostfile, "status": self.status, "passed": self.passed, "reason": self.reason,
                "error": self.error, "seconds": round(self.seconds, 3),
                "probe": self.probe.to_dict() if self.probe else None, "verdict": verdict_to_dict(self.verdict)}


@dataclass
class AcceptanceReport:
    nodes: list[NodeAcceptance] = field(default_factory=list)
    multi_node: list[MultiNodeResult] = field(default_factory=list)
    seconds: float = 0.0
    save_dir: str | None = None
    #: Per offering: the localisation rounds after a failed run across nodes, and the fleet's outliers.
    localisation: dict[str, Localisation] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return bool(self.nodes) and all(n.passed for n in self.nodes) and all(m.passed for m in self.multi_node)

    @property
    def failed(self) -> list[NodeAcceptance]:
        return [n for n in self.nodes if not n.passed]

    @property
    def accepted(self) -> list[NodeAcceptance]:
        return [n for n in self.nodes if n.passed]

    def node(self, host: str) -> NodeAcceptance:
        for n in self.nodes:
            if n.host == host:
                return n
        raise KeyError(host)

    @property
    def verdicts(self) -> list[Verdict]:
        """Every node's verdict, then each multi-node run's (what the JSON/JUnit/Markdown reports hold)."""
        return ([n.verdict for n in self.nodes] + [m.verdict for m in self.multi_node]
                + [loc.verdict(o, self._threshold(o)) for o, loc in self.localisation.items() if loc.rounds or
                   loc.unresolved])

    def _threshold(self, offering: str) -> float:
        return next((n.verdict.threshold for n in self.nodes if n.offering == offering), 0.9)

    def to_json(self) -> str:
        """The verdicts (:func:`.report.to_json`) plus ``localisation``: each offering's rounds, blames,
        groups and outliers."""
        doc = json.loads(to_json(self.verdicts))
        doc["localisation"] = {o: loc.to_dict() for o, loc in self.localisation.items()}
        return json.dumps(doc, indent=2, allow_nan=False)

    def to_junit(self) -> str:
        return to_junit(self.verdicts)

    def to_markdown(self) -> str:
        return to_markdown(self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "seconds": round(self.seconds, 3), "save_dir": self.save_dir,
                "nodes": [n.to_dict() for n in self.nodes], "multi_node": [m.to_dict() for m in self.multi_node],
                "localisation": {o: loc.to_dict() for o, loc in self.localisation.items()}}
