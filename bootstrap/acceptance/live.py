"""Live acceptance: run a node's probes over SSH, judge them, report (and save what was read).

::

    from metalfleet.bootstrap import load_inventory
    from metalfleet.bootstrap.acceptance.live import run_acceptance, format_table

    report = run_acceptance(load_inventory("hosts.yaml"), save_dir="accept/")
    print(format_table(report))
    sys.exit(0 if report.passed else 1)

Per host: one SSH connection and one exec channel carrying every probe of :func:`.probes.plan_probes`
(the cheap reads first, then all_reduce_perf), each under its own ``timeout``; each probe's stdout,
exit status and stderr come back framed by a random token. Then :func:`.gate.judge` against the
host's offering. A host that cannot be reached, or whose probes cannot run, is reported failed
while the others are judged. When two or more nodes of one offering pass on their own, one
all_reduce runs across them (mpirun from the first, with a hostfile) and is judged as a
multi-node run; its failure fails the report but no single node.

With ``save_dir``, each host's outputs land in ``save_dir/<host>/`` under the names
:mod:`.offline` recognises, so ``metalfleet verify --from-dir save_dir/<host> --offering NAME``
re-judges a support bundle offline. Outputs that are no evidence (tool absent, timed out, failed)
go to ``.failed/`` and the session's details to ``.acceptance.json`` (hidden: the offline reader
skips dot files).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from metalfleet.providers.errors import InvalidSpecError, MetalfleetError

from ..errors import CommandTimeout, HostUnreachable
from ..inventory import Host, Inventory
from ..logs import HostLog
from ..parsers import ParseError, to_jsonable
from ..progress import ProgressCallback, ProgressEvent
from ..runner import select_hosts
from ..script import new_token, parse_batch_output
from ..ssh import KnownHosts, SshConnection, SshOptions, parse_bastion
from .baselines import resolve_baseline
from .gate import EXTRA_CHECKS, FAIL, NCCL_CHECKS, SKIP, CheckResult, Verdict, applicable_checks, judge
from .probes import AcceptanceOptions, Probe, ProbeOutput, multi_node_probe, plan_probes
from .report import to_json, to_junit, to_markdown, verdict_to_dict

__all__ = [
    "AcceptanceReport",
    "MultiNodeResult",
    "NodeAcceptance",
    "ProbeResult",
    "check_statuses",
    "format_table",
    "probe_script",
    "run_acceptance",
]

PASS, FAILED, UNREACHABLE, ERROR = "pass", "fail", "unreachable", "error"


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
    status: str
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
    baseline: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def passed(self) -> bool:
        return self.status == PASS

    @property
    def reason(self) -> str:
        """The first failing check as ``name: reason`` (or the error); "" when passed."""
        if self.error and self.status in (UNREACHABLE, ERROR):
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
    status: str
    verdict: Verdict
    probe: ProbeResult | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == PASS

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
        return [n.verdict for n in self.nodes] + [m.verdict for m in self.multi_node]

    def to_json(self) -> str:
        return to_json(self.verdicts)

    def to_junit(self) -> str:
        return to_junit(self.verdicts)

    def to_markdown(self) -> str:
        return to_markdown(self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "seconds": round(self.seconds, 3), "save_dir": self.save_dir,
                "nodes": [n.to_dict() for n in self.nodes], "multi_node": [m.to_dict() for m in self.multi_node]}


# --------------------------------------------------------------------------------------------
# The script: every probe in one channel, framed


def probe_script(probes: Sequence[Probe], token: str) -> str:
    """One script that runs every probe (under ``timeout``) and frames stdout, status and stderr.

    Per probe: ``<token> <i>``, its stdout, ``\\n<token>-rc <i> <rc>``, then ``<token>-err <i>``, the
    tail of its stderr and ``\\n<token>-end <i>``. Values reach the script only through
    :func:`shlex.join`-quoted argv. Probes never stop the script: each one's failure is evidence.
    """
    import shlex

    lines = [f"T={shlex.quote(token)}",
             'E=$(mktemp 2>/dev/null) || E="/tmp/.mf-accept.$$"',
             "trap 'rm -f \"$E\"' EXIT"]
    for i, p in enumerate(probes):
        lines.append(f'printf "%s %s\\n" "$T" {i}; {shlex.join(p.command())} </dev/null 2>"$E"; mf_rc=$?; '
                     f'printf "\\n%s-rc %s %s\\n" "$T" {i} "$mf_rc"; printf "%s-err %s\\n" "$T" {i}; '
                     f'tail -c 4000 "$E"; printf "\\n%s-end %s\\n" "$T" {i}')
    return "\n".join(lines) + "\nexit 0\n"


def _stderr_frames(text: str, token: str) -> dict[int, str]:
    pattern = re.compile(rf"^{re.escape(token)}-err (\d+)\n(.*?)\n{re.escape(token)}-end \1$", re.M | re.S)
    return {int(m.group(1)): m.group(2) for m in pattern.finditer(text)}


class _Clock:
    """Streams the channel's output, timing each probe and telling progress when one ends."""

    def __init__(self, token: str, probes: Sequence[Probe], on_done: Callable[[int, int, float], None],
                 log: HostLog | None) -> None:
        self.begin = f"{token} "
        self.end = f"{token}-rc "
        self.probes = probes
        self.on_done = on_done
        self.started: dict[int, float] = {}
        self.seconds: dict[int, float] = {}
        self.buf = bytearray()
        self.log_feed = log.stream(token, [p.label for p in probes]) if log else None

    def feed(self, chunk: bytes) -> None:
        if self.log_feed:
            self.log_feed(chunk)
        self.buf.extend(chunk)
        while True:
            nl = self.buf.find(b"\n")
            if nl < 0:
                if len(self.buf) > 1 << 16:
                    del self.buf[:-256]  # a long line: only its end can hold a marker's start
                return
            line = self.buf[:nl].decode(errors="replace")
            del self.buf[:nl + 1]
            if line.startswith(self.begin) and line[len(self.begin):].isdigit():
                self.started[int(line[len(self.begin):])] = time.monotonic()
            elif line.startswith(self.end):
                fields = line[len(self.end):].split()
                if len(fields) >= 2 and fields[0].isdigit() and fields[1].lstrip("-").isdigit():
                    i, rc = int(fields[0]), int(fields[1])
                    self.seconds[i] = time.monotonic() - self.started.get(i, time.monotonic())
                    self.on_done(i, rc, self.seconds[i])


# --------------------------------------------------------------------------------------------
# Per host


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "host"


def _synthetic(name: str, offering: str, reason: str, threshold: float, check: str = "reachable") -> Verdict:
    return Verdict(offering=offering, passed=False, checks=(CheckResult(check, False, reason, status=FAIL),),
                   threshold=threshold, node=name)


def _annotate(verdict: Verdict, results: Sequence[ProbeResult], probes: Sequence[Probe]) -> Verdict:
    """A check without evidence (skipped, or failed when mandatory) says which probe should have given it,
    and why it did not."""
    by_name = {p.name: p for p in probes}
    checks = []
    for c in verdict.checks:
        if c.status in (FAIL, SKIP) and "no evidence for" in c.reason:
            why = [f"{r.label}: {r.error}" for r in results
                   if r.error and c.name in by_name[r.name].checks]
            if why:
                c = replace(c, reason=f"{c.reason} ({'; '.join(why)})")
        checks.append(c)
    return replace(verdict, checks=tuple(checks))


def _read(probe: Probe, out: ProbeOutput) -> ProbeResult:
    res = ProbeResult(probe.name, probe.label, out.rc, out.seconds, stdout=out.stdout, stderr=out.stderr)
    res.error = probe.problem(out)
    return res


def _untrusted_exits(verdict: Verdict, probes: Sequence[Probe], results: Sequence[ProbeResult]) -> Verdict:
    """A tool that printed results but exited non-zero, with none of its checks failing, fails its first check.

    nccl-tests and dcgmi exit non-zero when they found a problem, and the gate usually names it; a
    crash after the last row (or a failure the parser does not know) would otherwise pass unseen.
    """
    checks = list(verdict.checks)
    for probe, res in zip(probes, results, strict=True):
        if not res.is_evidence or res.rc == 0 or not probe.checks:
            continue
        if any(c.name in probe.checks and c.status == FAIL for c in checks):
            continue
        name = probe.checks[0]
        tail = res.stderr.strip().splitlines()[-1:] or res.stdout.strip().splitlines()[-1:]
        why = f"{probe.label} exited {res.rc} after printing its results" + (f" ({tail[0].strip()[:200]})"
                                                                              if tail else "")
        at = next((i for i, c in enumerate(checks) if c.name == name), None)
        bad = CheckResult(name, False, f"{why}; its output is not trusted", res.rc, 0, FAIL,
                          mandatory=at is not None and checks[at].mandatory)
        if at is None:
            checks.append(bad)
        else:
            checks[at] = bad
    if checks == list(verdict.checks):
        return verdict
    return replace(verdict, checks=tuple(checks), passed=not any(c.status == FAIL for c in checks))


def _judge_host(name: str, baseline_name: str, overrides: Mapping[str, Any] | None, probes: Sequence[Probe],
                results: list[ProbeResult], scope: Sequence[str] | None = None) -> Verdict:
    """Judge a host's probe results on ``scope`` (default: the offering's checks plus the extras its probes
    were planned for, e.g. dcgm-diag)."""
    facts: dict[str, list[Any]] = {}
    for probe, res in zip(probes, results, strict=True):
        if res.error:
            continue
        try:
            kind, value = probe.evidence(ProbeOutput(res.rc, res.stdout))
        except ParseError as exc:
            res.error = (f"exited {res.rc}; " if res.rc else "") + f"output not understood: {exc}"
            continue
        res.kind = kind
        res.file = probe.file_for(kind)  # evidence, whatever the status (see Probe.parse_on_failure)
        facts.setdefault(kind, []).append(value)
    over = dict(overrides) if overrides else None
    if scope is None:
        planned = {c for p in probes for c in p.checks if c in EXTRA_CHECKS}
        scope = (*applicable_checks(resolve_baseline(baseline_name, over)), *sorted(planned))
    verdict = judge(baseline_name, facts, over, node=name, scope=scope)
    return _untrusted_exits(_annotate(verdict, results, probes), probes, results)


def _save(folder: Path, node: NodeAcceptance) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for res in node.probes:
        if res.is_evidence and res.file:
            res.saved_as = res.file
            (folder / res.file).write_text(res.stdout, encoding="utf-8")
        elif res.stdout or res.stderr:
            failed = folder / ".failed"
            failed.mkdir(exist_ok=True)
            res.saved_as = f".failed/{res.name}.txt"
            (folder / res.saved_as).write_text(res.stdout + (f"\n--- stderr ---\n{res.stderr}" if res.stderr else ""),
                                               encoding="utf-8")
    node.saved_to = str(folder)
    (folder / ".acceptance.json").write_text(json.dumps(node.to_dict(), indent=2, allow_nan=False,
                                                        default=str) + "\n", encoding="utf-8")


class _Runner:
    def __init__(self, ssh: SshOptions, options: AcceptanceOptions, overrides: Mapping[str, Any] | None,
                 emit: ProgressCallback, total: int, save_dir: Path | None) -> None:
        self.ssh = ssh
        self.options = options
        self.overrides = overrides
        self.emit = emit
        self.total = total
        self.done = 0
        self.lock = threading.Lock()
        self.known_hosts = KnownHosts(ssh)
        self.bastions: dict[str, SshConnection] = {}
        self.save_dir = save_dir

    def connection(self, h: Host) -> SshConnection:
        bastion = None
        if h.bastion:
            with self.lock:
                bastion = self.bastions.get(h.bastion)
                if bastion is None:
                    bastion = SshConnection(parse_bastion(h.bastion, default_user=h.user, key_path=h.key),
                                            self.ssh, known_hosts=self.known_hosts)
                    self.bastions[h.bastion] = bastion
        return SshConnection(h.endpoint(), self.ssh, known_hosts=self.known_hosts, bastion=bastion)

    def event(self, kind: Any, host: str, **kw: Any) -> None:
        self.emit(ProgressEvent(kind=kind, host=host, done=self.done, total=self.total, **kw))

    def run_probes(self, h: Host, conn: SshConnection, probes: Sequence[Probe],
                   log: HostLog | None) -> list[ProbeResult]:
        """Run ``probes`` in one channel; their results, in order."""
        token = new_token()

        def done(i: int, rc: int, seconds: float) -> None:
            if i < len(probes):
                p = probes[i]
                state = ("timed out" if rc in (124, 137) else "absent" if rc == 127
                         else "ok" if rc == 0 else f"exit {rc}")
                self.event("step-done", h.name, step=p.name, status=state, seconds=seconds)

        clock = _Clock(token, probes, done, log)
        budget = sum(p.timeout + 10 for p in probes) + 30
        res = conn.run(["sh", "-c", probe_script(probes, token)], sudo=self.options.sudo, timeout=budget,
                       retry_on_drop=True, on_output=clock.feed)
        text = res.text
        items = {r.index: r for r in parse_batch_output(text, token)}
        errs = _stderr_frames(text, token)
        results = []
        for i, p in enumerate(probes):
            item = items.get(i)
            out = ProbeOutput(item.rc if item else -1, item.output if item else "", errs.get(i, ""),
                              clock.seconds.get(i))
            results.append(_read(p, out))
        if not items and res.rc != 0:
            raise MetalfleetError(f"{h.name}: the probe script did not start (exit {res.rc}): "
                                  f"{(res.stderr or res.stdout).decode(errors='replace').strip()[-300:]}")
        return results

    def host(self, h: Host, baseline: Mapping[str, Any]) -> NodeAcceptance:
        t0 = time.monotonic()
        name = baseline["name"]
        node = NodeAcceptance(h.name, h.address, name, ERROR, _synthetic(h.name, name, "not run", 0.0),
                              provider=h.provider, baseline=baseline)
        probes = plan_probes(h, baseline, self.options)
        folder = self.save_dir / _safe(h.name) if self.save_dir else None
        log = HostLog(folder / ".session.log") if folder else None
        conn = self.connection(h)
        self.event("host-start", h.name)
        try:
            conn.connect()
            results = self.run_probes(h, conn, probes, log)
            node.round_trips = 1
            node.probes = results
            node.verdict = _judge_host(h.name, name, self.overrides, probes, results)
            node.status = PASS if node.verdict.passed else FAILED
        except HostUnreachable as exc:
            node.status, node.error = UNREACHABLE, f"unreachable: {exc.message}"
            node.verdict = _synthetic(h.name, name, node.error, float(baseline["threshold"]))
        except CommandTimeout as exc:
            node.status, node.error = ERROR, f"probes did not finish: {exc.message}"
            node.verdict = _synthetic(h.name, name, node.error, float(baseline["threshold"]), "probes")
        except MetalfleetError as exc:
            node.status, node.error = ERROR, f"{type(exc).__name__}: {exc.message}"
            node.verdict = _synthetic(h.name, name, node.error, float(baseline["threshold"]), "probes")
        except Exception as exc:  # a bug for one host must not hide the others
            node.status, node.error = ERROR, f"{type(exc).__name__}: {exc}"
            node.verdict = _synthetic(h.name, name, node.error, float(baseline["threshold"]), "probes")
        finally:
            conn.close()
            if log:
                log.close()
        node.seconds = time.monotonic() - t0
        if folder:
            _save(folder, node)
        with self.lock:
            self.done += 1
        self.event("host-done", h.name, status=node.status, seconds=node.seconds, detail=node.reason)
        return node

    def multi(self, hosts: Sequence[Host], baseline: Mapping[str, Any]) -> MultiNodeResult:
        t0 = time.monotonic()
        name = baseline["name"]
        probe, hostfile = multi_node_probe(hosts, baseline, self.options)
        launcher = hosts[0]
        label = f"all_reduce across {len(hosts)} nodes ({name})"
        result = MultiNodeResult(name, [h.name for h in hosts], launcher.name, hostfile, ERROR,
                                 _synthetic(label, name, "not run", float(baseline["threshold"]), "probes"))
        folder = self.save_dir / _safe(f"multinode-{name}") if self.save_dir else None
        log = HostLog(folder / ".session.log") if folder else None
        conn = self.connection(launcher)
        self.event("host-start", label)
        try:
            conn.connect()
            (res,) = self.run_probes(launcher, conn, [probe], log)
            result.probe = res
            result.verdict = _judge_host(label, name, self.overrides, [probe], [res], scope=NCCL_CHECKS)
            result.status = PASS if result.verdict.passed else FAILED
        except MetalfleetError as exc:
            result.error = f"{type(exc).__name__} on {launcher.name}: {exc.message}"
            result.verdict = _synthetic(label, name, result.error, float(baseline["threshold"]), "probes")
        finally:
            conn.close()
            if log:
                log.close()
        result.seconds = time.monotonic() - t0
        if folder and result.probe is not None:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "hostfile").write_text(hostfile, encoding="utf-8")
            if result.probe.is_evidence and result.probe.file:
                result.probe.saved_as = result.probe.file
                (folder / result.probe.file).write_text(result.probe.stdout, encoding="utf-8")
            (folder / ".acceptance.json").write_text(json.dumps(to_jsonable(result.to_dict()), indent=2) + "\n",
                                                     encoding="utf-8")
        self.event("host-done", label, status=result.status, seconds=result.seconds, detail=result.reason)
        return result

    def close(self) -> None:
        for b in self.bastions.values():
            b.close()


# --------------------------------------------------------------------------------------------


def _baselines(hosts: Sequence[Host], offering: str | None,
               overrides: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """host name -> resolved baseline; raises InvalidSpecError before any connection."""
    out: dict[str, dict[str, Any]] = {}
    cache: dict[str, dict[str, Any]] = {}
    for h in hosts:
        name = offering or h.offering
        if not name:
            raise InvalidSpecError(f"host {h.name} has no offering to judge against; set offering in the "
                                   "inventory or pass one (--offering)", field="offering", value=None)
        if name not in cache:
            cache[name] = resolve_baseline(name, dict(overrides) if overrides else None)
        out[h.name] = cache[name]
    return out


def run_acceptance(
    inventory_or_hosts: Inventory | Sequence[Host],
    *,
    offering: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    progress: ProgressCallback | None = None,
    max_workers: int = 32,
    limit: str | Sequence[str] | None = None,
    options: AcceptanceOptions | None = None,
    ssh: SshOptions | None = None,
    save_dir: str | Path | None = None,
) -> AcceptanceReport:
    """Probe, judge and report every host; never raises for a host's failure.

    ``offering``: judge every host against this baseline instead of its own ``Host.offering``.
    ``overrides``: baseline fields to lay over it (``{"threshold": 0.8, "nccl": {...}}``), as for
    :func:`.gate.judge`. ``limit``: host globs or ``label=value`` (as ``metalfleet bootstrap --limit``).
    ``progress``: bootstrap :class:`ProgressEvent` s (``step-done`` per probe, ``host-done`` per
    node with its status and first failing reason). A missing or unknown offering, or a bad
    override, raises :class:`InvalidSpecError` before any connection.
    """
    if isinstance(inventory_or_hosts, Inventory):
        hosts: Sequence[Host] = inventory_or_hosts.hosts
        ssh = ssh or inventory_or_hosts.ssh
    else:
        hosts = list(inventory_or_hosts)
    chosen = select_hosts(hosts, limit)
    opts = options or AcceptanceOptions()
    baselines = _baselines(chosen, offering, overrides)
    t0 = time.monotonic()
    folder = Path(save_dir) if save_dir else None
    runner = _Runner(ssh or SshOptions(), opts, overrides, progress or (lambda ev: None), len(chosen), folder)
    report = AcceptanceReport(save_dir=str(folder) if folder else None)
    try:
        if chosen:
            with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(chosen))),
                                    thread_name_prefix="mf-accept") as pool:
                report.nodes = list(pool.map(lambda h: runner.host(h, baselines[h.name]), chosen))
        if opts.multi_node and opts.nccl:
            groups: dict[str, list[Host]] = {}
            for h, n in zip(chosen, report.nodes, strict=True):
                if n.passed and baselines[h.name].get("accelerator") != "ascend":
                    groups.setdefault(n.offering, []).append(h)
            for group in groups.values():
                if len(group) >= 2:
                    report.multi_node.append(runner.multi(group, baselines[group[0].name]))
    finally:
        runner.close()
    report.seconds = time.monotonic() - t0
    return report


# --------------------------------------------------------------------------------------------
# The acceptance table


def _mark(c: CheckResult) -> str:
    return {"fail": " FAIL", "skip": " SKIP"}.get(c.status, "")


def _cell_gpus(n: NodeAcceptance) -> str:
    c = n.verdict.check("gpu-count")
    if c is None or c.measured is None:
        return "-" if c is None else f"?{_mark(c)}"
    return f"{c.measured}/{c.expected}" if c.expected is not None else str(c.measured)


def _cell_nvlink(n: NodeAcceptance) -> str:
    parts = []
    topo = n.verdict.check("gpu-interconnect")
    if topo is not None:
        kinds = topo.measured if isinstance(topo.measured, list) else []
        parts.append(("/".join(kinds) or "?") + _mark(topo))
    links = n.verdict.check("nvlink-links")
    if links is not None and not links.skipped:
        parts.append(f"{links.measured} links" + _mark(links))
    return ", ".join(parts) or "-"


def _cell_fabric(n: NodeAcceptance) -> str:
    fab = n.baseline.get("fabric") or {}
    kind = fab.get("kind") or "none"
    c = n.verdict.check("fabric-ports")
    if c is None:
        return kind if kind == "none" else f"{kind} ?"
    if c.measured is None:
        return f"{kind} ?{_mark(c)}"
    count = len(c.measured) if isinstance(c.measured, list) else c.measured
    want = fab.get("ports")
    return f"{kind} {count}/{want}" + _mark(c)


def _cell_busbw(v: Verdict) -> str:
    c = v.check("allreduce-busbw")
    if c is None:
        return "-"
    measured = c.measured.get("busbw_gbs") if isinstance(c.measured, dict) else c.measured
    if not isinstance(measured, int | float):
        return "-" + _mark(c)
    if isinstance(c.expected, int | float) and c.expected:
        return f"{measured:.1f}/{float(c.expected):.1f} GB/s ({measured / float(c.expected):.0%})"
    return f"{measured:.1f} GB/s (no baseline){_mark(c)}"


def _cell_skipped(v: Verdict) -> str:
    return ",".join(c.name for c in v.skipped) or "-"


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *[line(r) for r in rows]])


def _first_clause(reason: str) -> str:
    """The reason up to its first "; " (the measurement; the rest is how it was taken)."""
    return reason.split("; ", 1)[0]


def check_statuses(report: AcceptanceReport) -> str:
    """One line per node (and run across nodes): ``name: check=status check=status ...``, every check judged."""
    lines = [f"{n.host}: " + " ".join(f"{c.name}={c.status}" for c in n.verdict.checks) for n in report.nodes]
    lines += [f"{len(m.hosts)} nodes ({m.offering}): " + " ".join(f"{c.name}={c.status}" for c in m.verdict.checks)
              for m in report.multi_node]
    return "\n".join(lines)


def format_table(report: AcceptanceReport) -> str:
    """One row per node: node, offering, GPUs, NVLink, fabric, busbw vs baseline, the checks that were skipped
    (not judged: no evidence or no baseline; never counted as passed), verdict + first reason; then the
    status of every check of every node."""
    rows = []
    for n in report.nodes:
        verdict = "PASS" if n.passed else \
            f"{'UNREACHABLE' if n.status == UNREACHABLE else 'FAIL'}: {_first_clause(n.reason)}"
        rows.append([n.host, n.offering, _cell_gpus(n), _cell_nvlink(n), _cell_fabric(n), _cell_busbw(n.verdict),
                     _cell_skipped(n.verdict), verdict])
    for m in report.multi_node:
        verdict = "PASS" if m.passed else f"FAIL: {_first_clause(m.reason)}"
        rows.append([f"{len(m.hosts)} nodes", m.offering, "-", "-", "-", _cell_busbw(m.verdict),
                     _cell_skipped(m.verdict), verdict])
    passed = sum(1 for n in report.nodes if n.passed)
    skipped = sum(len(n.verdict.skipped) for n in report.nodes)
    head = f"{passed} of {len(report.nodes)} node(s) passed acceptance in {report.seconds:.1f}s"
    if skipped:
        head += f" ({skipped} check(s) skipped, not counted as passed)"
    if report.multi_node:
        head += "; " + "; ".join(f"all_reduce across {len(m.hosts)} nodes: {'pass' if m.passed else 'FAIL'}"
                                 for m in report.multi_node)
    table = _table(rows, ["node", "offering", "GPUs", "NVLink", "fabric", "busbw vs baseline", "skipped", "verdict"])
    return f"{head}\n{table}\n\nchecks:\n{check_statuses(report)}"
