"""The engine: fan out over hosts, read facts in one round trip, plan steps, run them in batches.

Per host, one worker thread and one connector (:mod:`.connector`; SSH unless ``RunOptions.connect``
says otherwise) carry every command. The host's first round trip reads the facts of all its steps
at once; a step that has nothing to do costs nothing more. A step that has work sends all its
commands and uploads in one exec channel; afterwards the facts are stale, so the next step re-reads
(in one round trip) the facts of every step still to come.

A dropped connection mid-step is not fatal: the engine reconnects, re-reads the step's facts and
re-plans it (steps are idempotent, so whatever already happened is simply not repeated). A failed
host stops only itself; ``max_fail_percentage`` stops the whole run (hosts finish the step they
are in, hosts not started are not started). The pool, jump hosts, fan-out and log naming are
:mod:`.sessions`'s, shared with the acceptance probes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metalfleet.providers.errors import MetalfleetError, TransientError

from .connector import Connect, Connector, SshOptions
from .errors import CommandFailed, CommandTimeout, ConnectionLost, HostUnreachable, StepError
from .facts import BootId, Fact, FactValues
from .inventory import Host
from .logs import HostLog
from .profiles import Profile
from .progress import ProgressCallback, ProgressEvent
from .report import HostReport, HostStatus, Report, StepResult, StepStatus
from .script import BatchItem, Script, parse_batch_output, parse_fact_output
from .sessions import FanOut, SessionPool, default_log_dir, host_log_file, select_hosts
from .step import Command, NoOp, RebootAction, Step, StepContext, Upload

__all__ = ["RunOptions", "run", "select_hosts"]


@dataclass(frozen=True)
class RunOptions:
    dry_run: bool = False
    max_workers: int = 64
    #: Stop the run once more than this percentage of hosts failed (None: never stop).
    max_fail_percentage: float | None = None
    log_dir: Path | None = None
    fact_timeout: float = 300.0
    step_timeout: float = 3600.0
    reboot_timeout: float = 900.0
    reboot_poll: float = 1.0
    #: Attempts per step when the connection drops mid-step (reconnect, re-read facts, re-plan).
    step_attempts: int = 3
    ssh: SshOptions = field(default_factory=SshOptions)
    #: How hosts are reached (None: SSH with ``ssh``); e.g. a :class:`~.replay.ReplayFleet` in tests.
    connect: Connect | None = None


def _short(value: Any, limit: int = 400) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"



def read_facts(conn: Any, host: str, facts: Sequence[Fact[Any]], *, timeout: float = 60.0) -> tuple[FactValues, str]:
    """Read ``facts`` on a connected host in one round trip (one script, each fact's output fenced by a token);
    their parsed values, and what the script wrote to stderr. Raises when no fact could be read at all."""
    script = Script.facts([f.command() for f in facts])
    res = conn.run_script(script, timeout=timeout, retry_on_drop=True)
    parsed = parse_fact_output(res.text, script.token, len(facts))
    if all(rc == -1 for _, rc in parsed):
        raise CommandFailed(f"{host}: could not read facts (rc={res.rc}): "
                            f"{(res.stderr or res.stdout).decode(errors='replace').strip()[-500:]}",
                            host=host, argv=["sh", "-c", "<facts>"], rc=res.rc)
    values: dict[Fact[Any], Any] = {}
    for fact, (out, rc) in zip(facts, parsed, strict=True):
        try:
            values[fact] = fact.parse(out, rc)
        except Exception as exc:
            raise StepError(f"{host}: cannot parse fact {fact.label}: {type(exc).__name__}: {exc}") from exc
    return FactValues(values), res.stderr.decode(errors="replace").strip()

class _HostRun:
    def __init__(self, host: Host, steps: list[Step[Any]], conn: Connector, opts: RunOptions, log: HostLog,
                 emit: ProgressCallback, fan: FanOut[Host, HostReport]) -> None:
        self.host = host
        self.steps = steps
        self.conn = conn
        self.opts = opts
        self.log = log
        self._emit = emit
        #: Set when the run is stopped (fail threshold); ``counters``: hosts done and in all, for progress.
        self.stop = fan.stop
        self.counters = fan
        self.cache = FactValues()
        self.changed: set[str] = set()
        self.report = HostReport(host=host.name, address=host.address,
                                 log_path=str(log.path) if log.path else None)
        self.rebooted_in_dry_run = False

    def emit(self, kind: Any, **kw: Any) -> None:
        self._emit(ProgressEvent(kind=kind, host=self.host.name, done=self.counters.done,
                                 total=self.counters.total, **kw))

    def ctx(self) -> StepContext:
        return StepContext(host=self.host, changed=frozenset(self.changed), dry_run=self.opts.dry_run)

    # -- facts --------------------------------------------------------------------------------
    def gather(self, facts: Iterable[Fact[Any]]) -> None:
        todo = [f for f in dict.fromkeys(facts) if f not in self.cache]
        if not todo:
            return
        t0 = time.monotonic()
        values, stderr = read_facts(self.conn, self.host.name, todo, timeout=self.opts.fact_timeout)
        self.report.round_trips += 1
        self.report.fact_seconds += time.monotonic() - t0
        if stderr:
            self.log.write("facts stderr: " + stderr[-4000:])
        for fact in todo:
            if self.opts.dry_run or len(self.report.facts) < 200:
                self.report.facts.setdefault(fact.label, _short(values[fact]))
        self.cache.update(dict(values.items()))
        self.emit("facts", detail=f"{len(todo)} fact(s)", seconds=time.monotonic() - t0)

    def gather_for(self, steps: Sequence[Step[Any]]) -> None:
        ctx = self.ctx()
        self.gather(f for s in steps for f in s.facts(ctx))

    # -- the host -----------------------------------------------------------------------------
    def run(self) -> HostReport:
        t0 = time.monotonic()
        try:
            if self.stop.is_set():
                self.report.status = HostStatus.STOPPED
                self.report.error = "not started: the run was stopped"
                self.report.steps = [StepResult(s.name, StepStatus.SKIPPED) for s in self.steps]
                return self.report
            self.emit("host-start")
            self.log.event(f"connect {self.host.user}@{self.host.address}:{self.host.port}")
            try:
                self.conn.connect()
            except HostUnreachable as exc:
                self.report.status = HostStatus.UNREACHABLE
                self.report.error = str(exc)
                self.report.steps = [StepResult(s.name, StepStatus.SKIPPED) for s in self.steps]
                return self.report
            self.gather_for(self.steps)
            for i, step in enumerate(self.steps):
                if self.stop.is_set():
                    self.report.status = HostStatus.STOPPED
                    self.report.error = "halted between steps: the run was stopped"
                    self.report.steps += [StepResult(s.name, StepStatus.SKIPPED) for s in self.steps[i:]]
                    return self.report
                result = self.run_step(step, self.steps[i:])
                self.report.steps.append(result)
                self.emit("step-done", step=step.name, status=result.status.value, seconds=result.seconds,
                          detail=result.error or "")
                if result.status == StepStatus.FAILED:
                    self.report.status = HostStatus.FAILED
                    self.report.error = f"step {step.name} failed: {result.error}"
                    self.report.steps += [StepResult(s.name, StepStatus.SKIPPED) for s in self.steps[i + 1:]]
                    return self.report
            if self.opts.dry_run:
                self.report.status = HostStatus.WOULD_CHANGE if self.report.changed else HostStatus.UNCHANGED
            else:
                self.report.status = HostStatus.CHANGED if self.report.changed else HostStatus.UNCHANGED
            return self.report
        except MetalfleetError as exc:
            self.report.status = HostStatus.UNREACHABLE if isinstance(exc, HostUnreachable) else HostStatus.FAILED
            self.report.error = str(exc)
            done = {s.name for s in self.report.steps}
            self.report.steps += [StepResult(s.name, StepStatus.SKIPPED) for s in self.steps if s.name not in done]
            return self.report
        finally:
            self.report.seconds = time.monotonic() - t0
            self.report.reconnects = self.conn.reconnects
            err = f" ({self.report.error})" if self.report.error else ""
            self.log.event(f"done: {self.report.status.value}{err}")

    # -- one step -----------------------------------------------------------------------------
    def run_step(self, step: Step[Any], remaining: Sequence[Step[Any]]) -> StepResult:
        t0 = time.monotonic()
        result = StepResult(step.name, StepStatus.UNCHANGED)
        self.emit("step-start", step=step.name)
        attempts = max(1, self.opts.step_attempts)
        for attempt in range(1, attempts + 1):
            try:
                if not self.cache.items():
                    self.gather_for(remaining)  # facts went stale: one round trip for every step left
                ctx = self.ctx()
                self.gather(step.facts(ctx))
                actions = list(step.actions(ctx, self.cache))
                self._record(result, actions)
                reboot = next((a for a in actions if isinstance(a, RebootAction)), None)
                work = [a for a in actions if isinstance(a, (Command, Upload))]
                if reboot is not None:
                    if self.opts.dry_run:
                        result.status = StepStatus.WOULD_CHANGE
                        result.notes.append("steps after this one are planned from facts read before the reboot")
                    else:
                        self._reboot(step, reboot, result)
                        result.status = StepStatus.CHANGED
                    self.changed.add(step.name)
                elif work:
                    if self.opts.dry_run:
                        result.status = StepStatus.WOULD_CHANGE
                    else:
                        self._execute(step, work)
                        result.status = StepStatus.CHANGED
                        self.cache.clear()
                    self.changed.add(step.name)
                break
            except (ConnectionLost, HostUnreachable) as exc:
                self.cache.clear()
                if attempt == attempts:
                    result.status = StepStatus.FAILED
                    result.error = f"connection kept dropping: {exc}"
                    break
                note = f"connection lost ({exc.message}); reconnecting, re-reading facts and re-planning"
                result.notes.append(note)
                self.log.event(note)
                self.emit("reconnect", step=step.name, detail=note)
                try:
                    self.conn.connect()
                except TransientError as exc2:
                    result.status = StepStatus.FAILED
                    result.error = f"could not reconnect: {exc2}"
                    break
            except CommandFailed as exc:
                result.status = StepStatus.FAILED
                result.error = exc.message
                result.output_tail = exc.output[-4000:]
                break
            except MetalfleetError as exc:
                result.status = StepStatus.FAILED
                result.error = str(exc)
                break
        result.seconds = time.monotonic() - t0
        return result

    @staticmethod
    def _record(result: StepResult, actions: Sequence[Any]) -> None:
        result.commands = [a.text for a in actions if isinstance(a, (Command, Upload, RebootAction))]
        result.noops = [a.reason for a in actions if isinstance(a, NoOp)]
        result.notes += [f"reboot because: {a.reason}" for a in actions if isinstance(a, RebootAction)]

    def _execute(self, step: Step[Any], work: Sequence[Command | Upload]) -> None:
        items: list[BatchItem] = []
        stdin: list[bytes] = []
        labels: list[str] = []
        for a in work:
            if isinstance(a, Upload):
                items.append(BatchItem(upload=(a.path, len(a.content), a.sha256, a.mode)))
                stdin.append(a.content)
            else:
                items.append(BatchItem(argv=a.argv, timeout=a.timeout, ok_codes=a.ok_codes))
            labels.append(a.text)
        script = Script.batch(items)
        self.log.event(f"step {step.name}: {len(items)} action(s)")
        res = self.conn.run_script(script, timeout=self.opts.step_timeout, stdin=stdin or None,
                                   on_output=self.log.stream(script.token, labels))
        self.report.round_trips += 1
        results = parse_batch_output(res.text, script.token)
        for r in results:
            if r.index < len(items) and r.rc not in items[r.index].ok_codes:
                what = labels[r.index]
                if r.rc == 124 and items[r.index].timeout:
                    raise CommandTimeout(f"{what} timed out after {items[r.index].timeout:g}s",
                                         host=self.host.name, argv=items[r.index].argv,
                                         timeout=float(items[r.index].timeout or 0))
                raise CommandFailed(f"`{what}` exited {r.rc}", host=self.host.name, argv=list(items[r.index].argv),
                                    rc=r.rc, output=r.output)
        if len(results) < len(items) or res.rc != 0:
            raise CommandFailed(f"batch for step {step.name} ended after {len(results)} of {len(items)} item(s) "
                                f"(rc={res.rc})", host=self.host.name, argv=["sh", "-c", "<batch>"], rc=res.rc,
                                output=res.text[-4000:])

    def _reboot(self, step: Step[Any], action: RebootAction, result: StepResult) -> None:
        boot_fact = BootId(self.host.path("/proc/sys/kernel/random/boot_id"))

        def read_boot_id() -> str | None:
            r = self.conn.run(boot_fact.command(), timeout=30)
            return boot_fact.parse(r.text, r.rc)

        old = read_boot_id()
        self.log.event(f"reboot ({action.reason}); boot id {old}")
        self.emit("reboot-wait", step=step.name, detail=f"rebooting: {action.reason}")
        try:
            r = self.conn.run(action.argv, timeout=60, on_output=self.log.raw(), combine_stderr=True)
            if r.rc not in (0, -1) and self.conn.connected:
                raise CommandFailed(f"{' '.join(action.argv)} exited {r.rc}", host=self.host.name,
                                    argv=list(action.argv), rc=r.rc, output=r.text)
        except ConnectionLost:
            pass  # the expected way for a reboot command to end
        waited = self.conn.wait_for_reboot(read_boot_id=read_boot_id, old_boot_id=old,
                                           timeout=action.timeout if action.timeout else self.opts.reboot_timeout,
                                           poll=self.opts.reboot_poll)
        self.cache.clear()
        note = f"rebooted; SSH back with a new boot id after {waited:.1f}s; facts re-read"
        result.notes.append(note)
        self.log.event(note)
        self.emit("reboot-wait", step=step.name, detail=note, seconds=waited)


def run(
    hosts: Sequence[Host],
    profile: Profile,
    options: RunOptions | None = None,
    *,
    limit: str | Sequence[str] | None = None,
    progress: ProgressCallback | None = None,
) -> Report:
    """Bootstrap ``hosts`` with ``profile``; returns the per-host report. Never raises for a host's failure."""
    opts = options or RunOptions()
    chosen = select_hosts(hosts, limit)
    t0 = time.monotonic()
    log_dir = opts.log_dir or default_log_dir()
    report = Report(profile=profile.name, dry_run=opts.dry_run, log_dir=str(log_dir))
    plans = {h.name: profile.for_host(h) for h in chosen}  # raises InvalidSpecError before any connection
    pool = SessionPool(opts.ssh, opts.connect)
    emit: ProgressCallback = progress or (lambda ev: None)
    fan: FanOut[Host, HostReport] = FanOut(
        chosen, max_workers=opts.max_workers, max_fail_percentage=opts.max_fail_percentage,
        failed=lambda hr: hr.status in (HostStatus.FAILED, HostStatus.UNREACHABLE))

    def one(h: Host) -> HostReport:
        log = HostLog(host_log_file(log_dir, h.name))
        conn = pool.connector(h)
        try:
            return _HostRun(h, plans[h.name], conn, opts, log, emit, fan).run()
        except Exception as exc:  # a bug in one host's run must not hide the others
            return HostReport(h.name, h.address, HostStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()
            log.close()

    def done(h: Host, hr: HostReport) -> None:
        emit(ProgressEvent("host-done", h.name, status=hr.status.value, seconds=hr.seconds,
                           detail=hr.error or "", done=fan.done, total=fan.total))

    def stopped(h: Host, reason: str) -> None:
        report.stopped = True
        report.stop_reason = reason
        emit(ProgressEvent("run-stopped", h.name, detail=reason, done=fan.done, total=fan.total))

    with pool:
        report.hosts = fan.run(one, on_done=done, on_stop=stopped)
    report.seconds = time.monotonic() - t0
    return report
