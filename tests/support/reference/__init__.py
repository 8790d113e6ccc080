"""The reference tables: what each cloud API really accepts, refuses and answers, each fact with its citation.

One YAML file per platform (``alibaba-ecs.yaml``, ``huawei-bms.yaml``, ``ec2.yaml``), read by the emulator that
stands in for the service, by the tests that hold the emulator and the driver to it, and rendered as a page
(``python -m metalfleet.testing.reference``, the ``.md`` beside each file). An emulator is a claim about the real
service: a rule it enforces exists only as an entry here (the emulator names it by id and takes its error code,
HTTP status and message from the entry), and an entry exists only with the sentence of the provider's own
reference (or official SDK model) it rests on.

A file holds:

``sources``
    ``{key: {url, title, read}}``: the pages cited (``read``: the date the sentence was read there).
``operations``
    ``{Operation: {source, sends, answers}}``. ``sends``: every request parameter the driver sends, flattened as
    the wire names it with ``N`` for a list index (``NetworkInterface.N.VSwitchId``; REST bodies as dotted paths,
    ``server.extendparam.chargingMode``), each ``{says}`` (and ``source`` when not the operation's). ``answers``:
    every response field the emulator answers, ``{path: type}`` with a JSON type (string, integer, number,
    boolean, object, array), cited once per operation by ``answers_model``: the official SDK's response model.
``rules``
    ``[{id, op, kind, cite, ...}]``. ``kind``: ``refuse`` (the service refuses such a request: ``code``,
    ``status``, ``message`` as the emulator answers it, ``code_cite`` where the page lists that code, or
    ``code_note`` saying why the reference names none and what the emulator answers instead), ``accept`` (a form
    of request the service takes that a stricter emulator would refuse: a signature version, an encoding) or
    ``behave`` (what the service does: a state it goes through, a default, a dry run). ``cite``: ``{source,
    says}``: the page and the sentence. ``probe``: how the test shows the emulator keeps the rule (see each
    platform's ``tests/<platform>/test_reference.py``).
``divergences``
    What the audit found where the driver or the emulator disagreed with the reference, and what was done.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["KINDS", "NAMES", "TYPES", "Citation", "Divergence", "Enforcer", "Operation", "Reference", "Rule",
           "flat_name",
           "load", "page_path", "problems", "render"]

HERE = Path(__file__).resolve().parent
#: The platforms with a table (file stem -> what it covers).
NAMES = ("alibaba-ecs", "huawei-bms", "ec2")
KINDS = ("refuse", "accept", "behave")
TYPES = ("string", "integer", "number", "boolean", "object", "array")
_URL = re.compile(r"^https://\S+$")


@dataclass(frozen=True)
class Citation:
    """Where a fact is written: a source (its URL) and the sentence, quoted as the page has it."""

    source: str
    url: str
    says: str


@dataclass(frozen=True)
class Rule:
    id: str
    op: str
    kind: str
    cite: Citation
    code: str | None = None
    status: int | None = None
    message: str | None = None
    code_cite: Citation | None = None
    code_note: str | None = None
    probe: Mapping[str, Any] | None = None
    note: str | None = None


@dataclass(frozen=True)
class Operation:
    name: str
    source: str
    sends: Mapping[str, Citation] = field(default_factory=dict)
    answers: Mapping[str, str] = field(default_factory=dict)
    answers_model: str | None = None


@dataclass(frozen=True)
class Divergence:
    what: str
    reference: str
    done: str


@dataclass(frozen=True)
class Reference:
    name: str
    title: str
    sources: Mapping[str, Mapping[str, str]]
    operations: Mapping[str, Operation]
    rules: Mapping[str, Rule]
    divergences: tuple[Divergence, ...] = ()
    sdk: str | None = None

    def rule(self, rule_id: str) -> Rule:
        try:
            return self.rules[rule_id]
        except KeyError:
            raise KeyError(f"{self.name}: no rule {rule_id!r} in the reference table {self.name}.yaml (an emulator "
                           "rule exists only with its citation there)") from None

    def refusal(self, rule_id: str, **fmt: Any) -> tuple[str, int, str]:
        """(code, HTTP status, message) of refusal rule ``rule_id``, its message formatted with ``fmt``."""
        r = self.rule(rule_id)
        if r.kind != "refuse" or r.code is None or r.status is None:
            raise KeyError(f"{self.name}: rule {rule_id!r} is not a refusal")
        return r.code, r.status, (r.message or r.code).format(**fmt)

    def sent(self, op: str) -> Mapping[str, Citation]:
        return self.operations[op].sends if op in self.operations else {}


class Enforcer:
    """An emulator's hold on its table: every rule it applies is named here by id, which records it on the
    call being answered (the request log's ``rules``) and, for a refusal, gives the code, status and message.

    ``note`` is :meth:`metalfleet.testing.kit.FaultSwitch.note_rule` (or any callable taking the rule id)."""

    def __init__(self, name: str, note: Any) -> None:
        self.ref = load(name)
        self._note = note

    def refusal(self, rule_id: str, **fmt: Any) -> tuple[str, int, str]:
        """(code, HTTP status, message) of refusal ``rule_id``; the rule is recorded as applied."""
        answer = self.ref.refusal(rule_id, **fmt)
        self._note(rule_id)
        return answer

    def applies(self, rule_id: str) -> None:
        """Record that accept/behave rule ``rule_id`` decided what the call did."""
        r = self.ref.rule(rule_id)
        if r.kind == "refuse":
            raise KeyError(f"{self.ref.name}: rule {rule_id!r} is a refusal: use refusal()")
        self._note(rule_id)


def _citation(raw: Any, default_source: str, sources: Mapping[str, Mapping[str, str]]) -> Citation:
    if not isinstance(raw, Mapping):
        raw = {"says": raw}
    source = str(raw.get("source") or default_source)
    url = str((sources.get(source) or {}).get("url", ""))
    if raw.get("anchor"):
        url = f"{url}#{raw['anchor']}"
    return Citation(source=source, url=url, says=str(raw.get("says") or ""))


@functools.cache
def load(name: str) -> Reference:
    """The table ``name`` (one of :data:`NAMES`), parsed; cached per process."""
    path = HERE / f"{name}.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    sources: dict[str, dict[str, str]] = {str(k): dict(v) for k, v in (doc.get("sources") or {}).items()}
    ops: dict[str, Operation] = {}
    for op, body in (doc.get("operations") or {}).items():
        body = body or {}
        src = str(body.get("source") or op)
        sends = {str(p): _citation(c, src, sources) for p, c in (body.get("sends") or {}).items()}
        ops[str(op)] = Operation(name=str(op), source=src, sends=sends,
                                 answers={str(k): str(v) for k, v in (body.get("answers") or {}).items()},
                                 answers_model=body.get("answers_model"))
    rules: dict[str, Rule] = {}
    for raw in doc.get("rules") or []:
        op = str(raw.get("op") or "")
        src = ops[op].source if op in ops else op
        rid = str(raw["id"])
        if rid in rules:
            raise ValueError(f"{path}: rule {rid!r} is listed twice")
        rules[rid] = Rule(
            id=rid, op=op, kind=str(raw.get("kind") or ""), cite=_citation(raw.get("cite"), src, sources),
            code=raw.get("code"), status=int(raw["status"]) if raw.get("status") is not None else None,
            message=raw.get("message"),
            code_cite=_citation(raw["code_cite"], src, sources) if raw.get("code_cite") else None,
            code_note=raw.get("code_note"), probe=raw.get("probe"), note=raw.get("note"))
    divergences = tuple(Divergence(what=str(d["what"]), reference=str(d.get("reference") or ""),
                                   done=str(d.get("done") or "")) for d in doc.get("divergences") or [])
    return Reference(name=name, title=str(doc.get("title") or name), sources=sources, operations=ops, rules=rules,
                     divergences=divergences, sdk=doc.get("sdk"))


def problems(ref: Reference) -> list[str]:
    """Every way the table breaks its own rules: a fact without a citation, a citation without its sentence or
    URL, a refusal without its code and status, a code neither cited nor explained, an unknown kind or type."""
    out: list[str] = []
    for key, src in ref.sources.items():
        if not _URL.match(str(src.get("url", ""))):
            out.append(f"source {key}: no https URL")
        if not src.get("read"):
            out.append(f"source {key}: no date it was read ('read')")

    def check(c: Citation, where: str) -> None:
        if c.source not in ref.sources:
            out.append(f"{where}: cites unknown source {c.source!r}")
        if len(c.says.strip()) < 12:
            out.append(f"{where}: no sentence quoted from the reference ('says')")

    for op in ref.operations.values():
        if op.source not in ref.sources:
            out.append(f"operation {op.name}: unknown source {op.source!r}")
        for param, c in op.sends.items():
            check(c, f"{op.name} sends {param}")
        for path, kind in op.answers.items():
            if kind not in TYPES:
                out.append(f"{op.name} answers {path}: type {kind!r} is not one of {', '.join(TYPES)}")
        if op.answers and not op.answers_model:
            out.append(f"{op.name}: answers listed without the SDK response model they follow ('answers_model')")
    for r in ref.rules.values():
        where = f"rule {r.id}"
        if r.kind not in KINDS:
            out.append(f"{where}: kind {r.kind!r} is not one of {', '.join(KINDS)}")
        if r.op not in ref.operations and r.op != "*":
            out.append(f"{where}: operation {r.op!r} is not in the table")
        check(r.cite, where)
        if r.kind == "refuse":
            if not r.code or r.status is None:
                out.append(f"{where}: a refusal needs its error code and HTTP status")
            if r.code_cite is None and not (r.code_note and len(r.code_note) > 20):
                out.append(f"{where}: its code {r.code} is neither cited (code_cite) nor explained (code_note)")
            if r.code_cite is not None:
                check(r.code_cite, f"{where} code")
        if r.probe is None:
            out.append(f"{where}: no probe (how a test shows the emulator keeps it)")
    return out


_PLACEHOLDER = re.compile(r"\.\d+(?=\.|$)")


def flat_name(param: str) -> str:
    """A wire parameter name with its list indexes as ``N`` (``Tag.3.Key`` -> ``Tag.N.Key``)."""
    return _PLACEHOLDER.sub(".N", param)


def page_path(name: str) -> Path:
    return HERE / f"{name}.md"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def render(ref: Reference) -> str:
    """The table as a Markdown page (what ``python -m metalfleet.testing.reference`` writes)."""
    lines = [f"# {ref.title}: the reference table", "",
             f"Generated from `{ref.name}.yaml` by `python -m metalfleet.testing.reference`; do not edit by hand. "
             "Every rule the emulator enforces and every parameter the driver sends, with the sentence of the "
             "provider's reference it rests on.", ""]
    if ref.sdk:
        lines += [f"Response fields follow the official SDK models: {ref.sdk}.", ""]
    lines += ["## Sources", "", "| key | page | read |", "|---|---|---|"]
    lines += [f"| {k} | [{_cell(s.get('title') or s['url'])}]({s['url']}) | {s.get('read', '')} |"
              for k, s in sorted(ref.sources.items())]
    lines += ["", "## Rules", "", "| rule | operation | kind | answer | the reference says |", "|---|---|---|---|---|"]
    for r in sorted(ref.rules.values(), key=lambda r: (r.op, r.id)):
        answer = f"{r.code} ({r.status})" if r.kind == "refuse" else r.kind
        says = f"[{r.cite.source}]({r.cite.url}): \u201c{_cell(r.cite.says)}\u201d"
        if r.code_cite is not None:
            says += f" Code: \u201c{_cell(r.code_cite.says)}\u201d"
        elif r.code_note:
            says += f" Code: {_cell(r.code_note)}"
        lines.append(f"| `{r.id}` | {r.op} | {r.kind} | {_cell(answer)} | {says} |")
    lines += ["", "## What the driver sends", ""]
    for op in sorted(ref.operations.values(), key=lambda o: o.name):
        if not op.sends:
            continue
        lines += [f"### {op.name}", "", "| parameter | the reference says |", "|---|---|"]
        lines += [f"| `{p}` | [{c.source}]({c.url}): \u201c{_cell(c.says)}\u201d |"
                  for p, c in sorted(op.sends.items())]
        lines.append("")
    lines += ["## What the emulator answers", ""]
    for op in sorted(ref.operations.values(), key=lambda o: o.name):
        if not op.answers:
            continue
        lines += [f"### {op.name} (`{op.answers_model}`)", "", "| field | JSON type |", "|---|---|"]
        lines += [f"| `{p}` | {t} |" for p, t in sorted(op.answers.items())]
        lines.append("")
    if ref.divergences:
        lines += ["## Divergences the audit found", "", "| what | the reference | done |", "|---|---|---|"]
        lines += [f"| {_cell(d.what)} | {_cell(d.reference)} | {_cell(d.done)} |" for d in ref.divergences]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
