"""Check one large input with several processes (``metalfleet policy check --jobs``).

A plan of 10,000 instances spends most of its time turning each resource change into views and judging them,
one change at a time and independently of the rest: work that divides. The caller reads the input and what
holds for all of it (:func:`..adapters.open_input`), then forks; each process builds the views of one share of
the resources (:meth:`..adapters.OpenedInput.views`) and evaluates them with every suppression; the children
send their reports back through a pipe and the caller merges them into the report one process would have
written, finding for finding.

Rules and suppressions travel as references (pickle persistent ids), so a merged finding points at the caller's
own rule and suppression objects. A child that fails sends nothing usable and its share is done again in the
caller, so an error surfaces once, with the message the single-process check gives. POSIX only (``os.fork``);
elsewhere, or for a small input, the check runs in one process.
"""

from __future__ import annotations

import io
import os
import pickle
import signal
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any, NoReturn

from .adapters import OpenedInput, open_input
from .config import PolicyConfig, Suppression
from .engine import InputSummary, Report, SuppressionStatus, evaluate, finding_order
from .rules import RULES, Rule

__all__ = ["BYTES_PER_JOB", "MAX_JOBS", "auto_jobs", "check_divided"]

#: An input gets one process per this many bytes (a 10,000-instance plan is ~45 MiB): below it, starting and
#: merging a process costs more than it saves.
BYTES_PER_JOB = 8 << 20
MAX_JOBS = 8


def auto_jobs(paths: list[str]) -> int:
    """How many processes ``policy check`` uses without ``--jobs``: one input only, one per
    :data:`BYTES_PER_JOB`, at most the CPUs this process may run on."""
    if len(paths) != 1 or not hasattr(os, "fork"):
        return 1
    try:
        size = os.stat(paths[0]).st_size
    except OSError:
        return 1  # the loader reports it
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cpus, MAX_JOBS, size // BYTES_PER_JOB))


class _Out(pickle.Pickler):
    def __init__(self, fh: io.BytesIO, sups: dict[int, int]) -> None:
        super().__init__(fh, protocol=pickle.HIGHEST_PROTOCOL)
        self._sups = sups

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, Rule):
            return ("rule", obj.id)
        if isinstance(obj, Suppression):
            return ("suppression", self._sups[id(obj)])
        return None


class _In(pickle.Unpickler):
    def __init__(self, data: bytes, rules: Mapping[str, Rule], sups: list[Suppression]) -> None:
        super().__init__(io.BytesIO(data))
        self._rules, self._sups = rules, sups

    def persistent_load(self, pid: Any) -> Any:
        kind, key = pid
        return self._rules[key] if kind == "rule" else self._sups[key]


def _part(opened: OpenedInput, config: PolicyConfig, today: date | None, part: tuple[int, int]) -> tuple[int, Report]:
    resources = opened.views(part)
    return len(resources), evaluate(resources, config, suppressions=opened.suppressions, today=today)


def _child(fd: int, opened: OpenedInput, config: PolicyConfig, today: date | None, part: tuple[int, int]) -> NoReturn:
    """Runs in a forked child: never returns (``os._exit``), never flushes the parent's buffers."""
    try:
        try:
            count, report = _part(opened, config, today, part)
            buf = io.BytesIO()
            _Out(buf, {id(s.suppression): i for i, s in enumerate(report.suppressions)}).dump((count, report))
            payload = buf.getvalue()
        except BaseException:  # the parent redoes this share and raises its error
            payload = b""
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
    finally:
        os._exit(0)


def _share(data: bytes, opened: OpenedInput, config: PolicyConfig, today: date | None, part: tuple[int, int],
           sups: list[Suppression]) -> tuple[int, Report]:
    """A child's share of the report from what it sent; when it sent nothing (it failed or was killed), the share
    is done here, so its error, if it has one, is raised as the single-process check raises it (its findings point
    at this process's suppressions already: ``opened`` was read before the fork)."""
    if data:
        count, report = _In(data, RULES, sups).load()
        return count, report
    return _part(opened, config, today, part)


def check_divided(path: str, config: PolicyConfig, jobs: int, *, tf_dir: str | Path | None = None,
                  today: date | None = None) -> Report:
    """The report :func:`.check.check_paths` gives for ``[path]``, from ``jobs`` processes."""
    opened = open_input(path, config, tf_dir)  # an unreadable input fails here, once, before any fork
    today = today or date.today()  # every share judges expiry dates on the same day
    children: list[tuple[int, int, int]] = []
    try:
        for i in range(1, jobs):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                _child(w, opened, config, today, (i, jobs))
            os.close(w)
            children.append((pid, r, i))
        total, report = _part(opened, config, today, (0, jobs))
        sups = [s.suppression for s in report.suppressions]
        counts = [s.count for s in report.suppressions]
        while children:
            pid, r, i = children.pop(0)
            with os.fdopen(r, "rb") as fh:
                data = fh.read()
            os.waitpid(pid, 0)
            count, part = _share(data, opened, config, today, (i, jobs), sups)
            total += count
            # a suppression without a reason is a finding of every share: the first share's is kept
            report.findings.extend(f for f in part.findings if f.rule.id != "MF-SUP-001")
            report.suppressed.extend(part.suppressed)
            for j, s in enumerate(part.suppressions):
                counts[j] += s.count
        report.findings.sort(key=finding_order)
        report.suppressed.sort(key=finding_order)
        report.suppressions = [
            SuppressionStatus(s.suppression, s.status if s.status in ("expired", "invalid") else
                              ("applied" if n else "unused"), n)
            for s, n in zip(report.suppressions, counts, strict=True)]
        report.resources = total
        report.inputs = [InputSummary(path, opened.kind, total, tuple(opened.notices))]
        return report
    finally:
        for pid, r, _ in children:  # left only when this process failed: stop the rest
            try:
                os.close(r)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass

