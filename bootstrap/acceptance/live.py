"""Live acceptance: run a node's probes over SSH, judge them, report (and save what was read).

::

    from metalfleet.bootstrap import load_inventory
    from metalfleet.bootstrap.acceptance.live import run_acceptance, format_table

    report = run_acceptance(load_inventory("hosts.yaml"), save_dir="accept/")
    print(format_table(report))
    sys.exit(0 if report.passed else 1)

Per host: one connector (SSH unless ``connect`` says otherwise; the pool, jump hosts and fan-out are
:mod:`..sessions`'s, as for bootstrap) and one exec channel carrying every probe of :func:`.probes.plan_probes`
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
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from metalfleet.providers.errors import InvalidSpecError, MetalfleetError
from metalfleet.providers.merge import deep_merge

from ..connector import Connect, Connector, SshOptions
from ..errors import CommandTimeout, HostUnreachable
from ..inventory import Host, Inventory
from ..logs import HostLog
from ..parsers import ParseError, parse, to_jsonable
from ..progress import ProgressCallback, ProgressEvent
from ..script import Script, parse_batch_output, parse_probe_stderr
from ..script import probe_script as _framed
from ..sessions import FanOut, SessionPool, host_folder, select_hosts
from .baselines import Baseline, resolve_baseline
from .checks import EXTRA_CHECKS, NCCL_CHECKS
from .gate import applicable_checks, judge
from .localise import Job, Localisation, Round, Run, localise, outliers
from .probes import AcceptanceOptions, Probe, ProbeOutput, multi_node_probe, plan_probes
from .results import AcceptanceReport, MultiNodeResult, NodeAcceptance, NodeStatus, ProbeResult
from .table import check_statuses, format_table
from .verdict import CheckResult, CheckStatus, Verdict, fail, warn

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


# --------------------------------------------------------------------------------------------
# Every probe in one channel, framed


def probe_script(probes: Sequence[Probe], token: str) -> str:
    """One script that runs every probe (under ``timeout``) and frames stdout, status and stderr
    (:func:`..script.probe_script`). Probes never stop the script: each one's failure is evidence."""
    return _framed([p.command() for p in probes], token)


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



def _synthetic(name: str, offering: str, reason: str, threshold: float, check: str = "reachable") -> Verdict:
    return Verdict(offering=offering, passed=False, threshold=threshold, node=name,
                   checks=(CheckResult(check, False, reason, status=CheckStatus.FAIL),))


def _annotate(verdict: Verdict, results: Sequence[ProbeResult], probes: Sequence[Probe]) -> Verdict:
    """A check without evidence (skipped, or failed when mandatory) says which probe should have given it,
    and why it did not."""
    by_name = {p.name: p for p in probes}
    checks = []
    for c in verdict.checks:
        if (c.failed or c.skipped) and "no evidence for" in c.reason:
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
        if any(c.name in probe.checks and c.failed for c in checks):
            continue
        name = probe.checks[0]
        tail = res.stderr.strip().splitlines()[-1:] or res.stdout.strip().splitlines()[-1:]
        why = f"{probe.label} exited {res.rc} after printing its results" + (f" ({tail[0].strip()[:200]})"
                                                                              if tail else "")
        at = next((i for i, c in enumerate(checks) if c.name == name), None)
        bad = CheckResult(name, False, f"{why}; its output is not trusted", res.rc, 0, CheckStatus.FAIL,
                          mandatory=at is not None and checks[at].mandatory)
        if at is None:
            checks.append(bad)
        else:
            checks[at] = bad
    if checks == list(verdict.checks):
        return verdict
    return replace(verdict, checks=tuple(checks), passed=not any(c.failed for c in checks))


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
    def __init__(self, pool: SessionPool, options: AcceptanceOptions, overrides: Mapping[str, Any] | None,
                 emit: ProgressCallback, total: int, save_dir: Path | None, max_workers: int = 32) -> None:
        self.pool = pool
        self.max_workers = max_workers
        self.options = options
        self.overrides = overrides
        self.emit = emit
        self.total = total
        self.done = 0
        self.lock = threading.Lock()
        self.save_dir = save_dir

    def event(self, kind: Any, host: str, **kw: Any) -> None:
        self.emit(ProgressEvent(kind=kind, host=host, done=self.done, total=self.total, **kw))

    def run_probes(self, h: Host, conn: Connector, probes: Sequence[Probe],
                   log: HostLog | None) -> list[ProbeResult]:
        """Run ``probes`` in one channel; their results, in order."""
        script = Script.probes([p.command() for p in probes])

        def done(i: int, rc: int, seconds: float) -> None:
            if i < len(probes):
                p = probes[i]
                state = ("timed out" if rc in (124, 137) else "absent" if rc == 127
                         else "ok" if rc == 0 else f"exit {rc}")
                self.event("step-done", h.name, step=p.name, status=state, seconds=seconds)

        clock = _Clock(script.token, probes, done, log)
        budget = sum(p.timeout + 10 for p in probes) + 30
        res = conn.run_script(script, sudo=self.options.sudo, timeout=budget, retry_on_drop=True,
                              on_output=clock.feed)
        text = res.text
        items = {r.index: r for r in parse_batch_output(text, script.token)}
        errs = parse_probe_stderr(text, script.token)
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

    def host(self, h: Host, baseline: Baseline) -> NodeAcceptance:
        t0 = time.monotonic()
        name = baseline.name
        threshold = float(baseline.threshold)
        node = NodeAcceptance(h.name, h.address, name, NodeStatus.ERROR, _synthetic(h.name, name, "not run", 0.0),
                              provider=h.provider, baseline=baseline)
        probes = plan_probes(h, baseline, self.options)
        folder = host_folder(self.save_dir, h.name) if self.save_dir else None
        log = HostLog(folder / ".session.log") if folder else None
        conn = self.pool.connector(h)
        self.event("host-start", h.name)
        try:
            conn.connect()
            results = self.run_probes(h, conn, probes, log)
            node.round_trips = 1
            node.probes = results
            node.verdict = _judge_host(h.name, name, self.overrides, probes, results)
            node.status = NodeStatus.PASS if node.verdict.passed else NodeStatus.FAIL
        except HostUnreachable as exc:
            node.status, node.error = NodeStatus.UNREACHABLE, f"unreachable: {exc.message}"
            node.verdict = _synthetic(h.name, name, node.error, threshold)
        except CommandTimeout as exc:
            node.status, node.error = NodeStatus.ERROR, f"probes did not finish: {exc.message}"
            node.verdict = _synthetic(h.name, name, node.error, threshold, "probes")
        except MetalfleetError as exc:
            node.status, node.error = NodeStatus.ERROR, f"{type(exc).__name__}: {exc.message}"
            node.verdict = _synthetic(h.name, name, node.error, threshold, "probes")
        except Exception as exc:  # a bug for one host must not hide the others
            node.status, node.error = NodeStatus.ERROR, f"{type(exc).__name__}: {exc}"
            node.verdict = _synthetic(h.name, name, node.error, threshold, "probes")
        finally:
            conn.close()
            if log:
                log.close()
        node.seconds = time.monotonic() - t0
        if folder:
            _save(folder, node)
        return node

    def host_done(self, h: Host, node: NodeAcceptance) -> None:
        with self.lock:
            self.done += 1
        self.event("host-done", h.name, status=node.status, seconds=node.seconds, detail=node.reason)

    def multi(self, hosts: Sequence[Host], baseline: Baseline) -> MultiNodeResult:
        t0 = time.monotonic()
        name = baseline.name
        probe, hostfile = multi_node_probe(hosts, baseline, self.options)
        launcher = hosts[0]
        label = f"all_reduce across {len(hosts)} nodes ({name})"
        result = MultiNodeResult(name, [h.name for h in hosts], launcher.name, hostfile, NodeStatus.ERROR,
                                 _synthetic(label, name, "not run", float(baseline.threshold), "probes"))
        folder = host_folder(self.save_dir, f"multinode-{name}") if self.save_dir else None
        log = HostLog(folder / ".session.log") if folder else None
        conn = self.pool.connector(launcher)
        self.event("host-start", label)
        try:
            conn.connect()
            (res,) = self.run_probes(launcher, conn, [probe], log)
            result.probe = res
            result.verdict = _judge_host(label, name, self.overrides, [probe], [res], scope=NCCL_CHECKS)
            result.status = NodeStatus.PASS if result.verdict.passed else NodeStatus.FAIL
        except MetalfleetError as exc:
            result.error = f"{type(exc).__name__} on {launcher.name}: {exc.message}"
            result.verdict = _synthetic(label, name, result.error, float(baseline.threshold), "probes")
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


    # ----------------------------------------------------------------------------------------
    # Localisation: the jobs of one round, side by side

    def _judge_run(self, label: str, baseline: Baseline, expected: float, probe: Probe,
                   res: ProbeResult) -> tuple[bool, float | None, str]:
        """(passed, busbw, first failure) of one localisation run, judged against ``expected``."""
        if res.error:
            return False, None, f"{probe.name}: {res.error}"
        over = deep_merge(dict(self.overrides or {}),
                          {"nccl": {"all_reduce": {"multi_node_busbw_gbs": expected, "multi_node_scaling": []}}})
        v = _judge_host(label, baseline.name, over, [probe], [res], scope=NCCL_CHECKS)
        c = v.check("allreduce-busbw")
        got = c.measured if c is not None and isinstance(c.measured, int | float) else None
        first = next(iter(v.failures), None)
        return v.passed, (float(got) if got is not None else None), (f"{first.name}: {first.reason}" if first else "")

    def job(self, hosts: Mapping[str, Host], job: Job, baseline: Baseline, repeats: int,
            rails: Sequence[str]) -> list[Run]:
        """Run ``job`` ``repeats`` times, then each of ``rails`` alone as many times, in one channel from its
        first host: [the full run, one run per rail]."""
        members = [hosts[n] for n in job.hosts]
        expected, _how = baseline.nccl.all_reduce.multi_node(len(members))
        full = expected or 0.0
        per_rail = full / len(rails) if rails else full
        plan: list[tuple[str | None, Probe]] = []
        unit = max(int(baseline.nccl.measure_min_bytes or 0), 1 << 20)
        lo, hi = self.options.localise_sizes
        for nic in (None, *rails):
            sizes = (lo * unit, hi * unit) if nic is None else (self.options.localise_nic_size * unit,) * 2
            args = ("-b", str(sizes[0]), "-e", str(sizes[1]), "-f", "2")
            opts = replace(self.options, nccl_args=args) if nic is None else replace(
                self.options, nccl_args=args, mpirun_args=(*self.options.mpirun_args, "-x", f"NCCL_IB_HCA=={nic}"))
            probe, _hostfile = multi_node_probe(members, baseline, opts)
            plan += [(nic, probe)] * max(1, repeats)
        t0 = time.monotonic()
        conn = self.pool.connector(members[0])
        results: list[ProbeResult | None]
        why = ""
        try:
            conn.connect()
            results = list(self.run_probes(members[0], conn, [p for _n, p in plan], None))
        except MetalfleetError as exc:
            results, why = [None] * len(plan), f"{type(exc).__name__} on {members[0].name}: {exc.message}"
        finally:
            conn.close()
        seconds = time.monotonic() - t0
        out: list[Run] = []
        for nic in (None, *rails):
            want = full if nic is None else per_rail
            marks: list[bool] = []
            figures: list[float] = []
            reasons: list[str] = []
            busy = 0.0
            for (n, probe), res in zip(plan, results, strict=True):
                if n != nic:
                    continue
                ok, got, reason = (False, None, why) if res is None else self._judge_run(
                    Job(job.hosts, nic).label(), baseline, want, probe, res)
                marks.append(ok)
                busy += 0.0 if res is None else _collective_seconds(res.stdout)
                if got is not None:
                    figures.append(got)
                if reason:
                    reasons.append(reason)
            out.append(Run(Job(job.hosts, nic), all(marks), max(figures) if figures else None, want,
                           reasons[0] if reasons else "", tuple(marks), seconds, round(busy, 3)))
        return out

    def measure(self, hosts: Mapping[str, Host], baseline: Baseline, kind: str, jobs: Sequence[Job], repeats: int,
                rails: Mapping[str, Sequence[str]]) -> list[Run]:
        fan: FanOut[Job, list[Run]] = FanOut(list(jobs), max_workers=self.max_workers,
                                             thread_name_prefix=f"mf-{kind}")
        done = fan.run(lambda j: self.job(hosts, j, baseline, repeats, tuple(rails.get(j.hosts[0], ()))))
        return [runs[0] for runs in done] + [r for runs in done for r in runs[1:]]

    def localise(self, group: Sequence[Host], baseline: Baseline, cluster: MultiNodeResult,
                 nodes: Mapping[str, NodeAcceptance]) -> Localisation:
        by_name = {h.name: h for h in group}
        expected, _how = baseline.nccl.all_reduce.multi_node(len(group))
        c = cluster.verdict.check("allreduce-busbw")
        got = c.measured if c is not None and isinstance(c.measured, int | float) else None
        first = Run(Job(tuple(by_name)), cluster.passed, None if got is None else float(got), expected,
                    cluster.reason, (cluster.passed,), cluster.seconds,
                    _collective_seconds(cluster.probe.stdout) if cluster.probe else 0.0)

        def told(r: Round) -> None:
            self.emit(ProgressEvent(kind="host-done", host=f"localisation {baseline.name}", done=self.done,
                                    total=self.total, status="pass" if not r.failed else "fail",
                                    seconds=r.seconds, detail=r.summary()))

        return localise(list(by_name), lambda kind, jobs, times, rails: self.measure(
                            by_name, baseline, kind, jobs, times, rails), first,
                        nics={h: _rails(nodes[h], baseline) for h in by_name},
                        labels={h.name: dict(h.labels) for h in group}, repeats=baseline.fleet.localise_repeats,
                        threshold=float(baseline.threshold), on_round=told)


# --------------------------------------------------------------------------------------------


def _baselines(hosts: Sequence[Host], offering: str | None,
               overrides: Mapping[str, Any] | None) -> dict[str, Baseline]:
    """host name -> resolved baseline; raises InvalidSpecError before any connection."""
    out: dict[str, Baseline] = {}
    cache: dict[str, Baseline] = {}
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
    connect: Connect | None = None,
) -> AcceptanceReport:
    """Probe, judge and report every host; never raises for a host's failure.

    ``offering``: judge every host against this baseline instead of its own ``Host.offering``.
    ``overrides``: baseline fields to lay over it (``{"threshold": 0.8, "nccl": {...}}``), as for
    :func:`.gate.judge`. ``limit``: host globs or ``label=value`` (as ``metalfleet bootstrap --limit``).
    ``progress``: bootstrap :class:`ProgressEvent` s (``step-done`` per probe, ``host-done`` per
    node with its status and first failing reason). ``connect``: how hosts are reached (default: SSH
    with ``ssh`` or the inventory's SSH options; a :class:`~..replay.ReplayFleet` in tests). A missing
    or unknown offering, or a bad override, raises :class:`InvalidSpecError` before any connection.
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
    report = AcceptanceReport(save_dir=str(folder) if folder else None)
    with SessionPool(ssh, connect) as pool:
        runner = _Runner(pool, opts, overrides, progress or (lambda ev: None), len(chosen), folder, max_workers)
        fan: FanOut[Host, NodeAcceptance] = FanOut(chosen, max_workers=max_workers, thread_name_prefix="mf-accept")
        report.nodes = fan.run(lambda h: runner.host(h, baselines[h.name]), on_done=runner.host_done)
        if opts.multi_node and opts.nccl:
            groups: dict[str, list[Host]] = {}
            for h, n in zip(chosen, report.nodes, strict=True):
                if n.passed and not baselines[h.name].ascend:
                    groups.setdefault(n.offering, []).append(h)
            for group in groups.values():
                if len(group) >= 2:
                    b = baselines[group[0].name]
                    m = runner.multi(group, b)
                    report.multi_node.append(m)
                    if opts.localise and not m.passed and b.nccl.all_reduce.multi_node(2)[0] is not None:
                        nodes = {n.host: n for n in report.nodes}
                        report.localisation[m.offering] = runner.localise(group, b, m, nodes)
        _flag_outliers(report, chosen, baselines)
        _apply_blames(report)
    report.seconds = time.monotonic() - t0
    return report


def _collective_seconds(text: str) -> float:
    """The time the collectives of an nccl-tests log took by its own rows: each row's out-of-place and in-place
    time (us per iteration) times the warm-up and timed iterations its header gives (nccl-tests' defaults 5 and
    20). What a real fabric would spend on the run, without launch and set-up."""
    import re

    m = re.search(r"warmup iters: (\d+) iters: (\d+)", text)
    per_row = int(m.group(1)) + int(m.group(2)) if m else 25
    try:
        rep = parse("nccl-tests", text)
    except ParseError:
        return 0.0
    return float(sum((row.oop_time_us + row.ip_time_us) * per_row for run in rep.runs for row in run.rows)) / 1e6


def _rails(node: NodeAcceptance, baseline: Baseline) -> list[str]:
    """The node's fabric interfaces a job can be held to (``NCCL_IB_HCA``): its Active InfiniBand / RoCE
    ports (at the fabric rate) from its ibstat, its eRDMA devices (NCCL reaches them as IB verbs devices) from
    the fabric check; none on EFA (aws-ofi-nccl has no per-device selection here)."""
    kind = baseline.fabric.kind
    if kind == "erdma":
        c = node.verdict.check("fabric-ports")
        ok = c is not None and c.passed and isinstance(c.measured, list)
        return [str(name) for name in c.measured] if ok and c is not None else []
    res = node.probe("ibstat")
    if kind not in ("infiniband", "roce") or res is None or res.kind != "ibstat":
        return []
    try:
        rep = parse("ibstat", res.stdout)
    except ParseError:
        return []
    layer = "InfiniBand" if kind == "infiniband" else "Ethernet"
    rate = baseline.fabric.port_gbps
    return [d.name for d in rep.devices if any(
        pt.link_layer == layer and pt.state == "Active" and (rate is None or (pt.rate_gbps or 0) >= rate)
        for pt in d.ports)]


def _flag_outliers(report: AcceptanceReport, hosts: Sequence[Host], baselines: Mapping[str, Baseline]) -> None:
    """Per offering, the passing nodes whose own all_reduce busbw sits far below their peers'."""
    by_offering: dict[str, dict[str, float]] = {}
    for h, n in zip(hosts, report.nodes, strict=True):
        c = n.verdict.check("allreduce-busbw")
        if c is not None and isinstance(c.measured, int | float) and n.status in (NodeStatus.PASS, NodeStatus.FAIL):
            by_offering.setdefault(n.offering, {})[h.name] = float(c.measured)
    first = {n.offering: baselines[h.name] for h, n in zip(hosts, report.nodes, strict=True)}
    for offering, figures in by_offering.items():
        fleet = first[offering].fleet
        found = outliers(figures, figure="all_reduce busbw on its own", z_limit=fleet.outlier_z,
                         min_deficit=fleet.outlier_min_deficit, mandatory=fleet.outliers == "mandatory")
        found = [o for o in found if report.node(o.host).passed]
        if found:
            report.localisation.setdefault(offering, Localisation()).outliers.extend(found)


def _with_check(node: NodeAcceptance, check: CheckResult) -> None:
    checks = (*node.verdict.checks, check)
    passed = not any(c.failed for c in checks)
    node.verdict = replace(node.verdict, checks=checks, passed=passed)
    if not passed and node.status == NodeStatus.PASS:
        node.status = NodeStatus.FAIL


def _apply_blames(report: AcceptanceReport) -> None:
    """A blamed node fails (``fabric-localisation``); an outlier warns, or fails when the spec says so
    (``fleet-outlier``). A group (a switch) fails no node: the report names it."""
    for loc in report.localisation.values():
        for b in loc.blames:
            _with_check(report.node(b.host), fail("fabric-localisation", b.reason, b.to_dict(), None))
        for o in loc.outliers:
            mk = fail if o.mandatory else warn
            _with_check(report.node(o.host), mk("fleet-outlier", o.reason, o.value, o.median))
