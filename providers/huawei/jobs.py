"""BMS's asynchronous jobs: CreateBareMetalServers answers a job id (beside its order id), and ShowJobInfos says
how the job goes (INIT, RUNNING, SUCCESS, FAIL; PENDING_PAYMENT while a yearly/monthly order awaits payment) with
one sub-job per server naming its ``server_id``.

A job that fails carries ``error_code`` / ``fail_reason`` (per sub-job too); they are translated like any
error answer (:func:`~metalfleet.providers.huawei.errors.translate`), so a job failing for stock is a
CapacityError naming the AZ.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import MetalfleetError, OperationTimeout
from .errors import PROVIDER, boundary, translate

__all__ = ["Job", "follow_job", "job_from_answer", "show_job"]

DONE = ("SUCCESS", "FAIL")


@dataclass(frozen=True)
class Job:
    """One ShowJobInfos answer, as plain data."""

    job_id: str
    status: str
    job_type: str
    server_ids: tuple[str, ...]
    error_code: str | None = None
    fail_reason: str | None = None

    @property
    def done(self) -> bool:
        return self.status in DONE


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def job_from_answer(resp: Any) -> Job:
    """A :class:`Job` from a ShowJobInfosResponse (or its dict form): the servers its sub-jobs name."""
    entities = _get(resp, "entities")
    ids: list[str] = []
    first_error: tuple[str | None, str | None] = (None, None)
    for sub in _get(entities, "sub_jobs") or [] if entities is not None else []:
        sub_entities = _get(sub, "entities")
        server_id = _get(sub_entities, "server_id") if sub_entities is not None else None
        if server_id:
            ids.append(str(server_id))
        if _get(sub, "status") == "FAIL" and first_error == (None, None):
            first_error = (_get(sub, "error_code"), _get(sub, "fail_reason")
                           or (_get(sub_entities, "errorcode_message") if sub_entities is not None else None))
    if entities is not None and _get(entities, "server_id"):
        ids.append(str(_get(entities, "server_id")))
    code = _get(resp, "error_code") or first_error[0]
    reason = _get(resp, "fail_reason") or first_error[1]
    return Job(job_id=str(_get(resp, "job_id") or ""), status=str(_get(resp, "status") or "UNKNOWN"),
               job_type=str(_get(resp, "job_type") or ""), server_ids=tuple(dict.fromkeys(ids)),
               error_code=str(code) if code else None, fail_reason=str(reason) if reason else None)


def show_job(client: Any, job_id: str) -> Job:
    """One ShowJobInfos call."""
    from huaweicloudsdkbms.v1 import ShowJobInfosRequest

    with boundary("ShowJobInfos"):
        resp = client.show_job_infos(ShowJobInfosRequest(job_id=job_id))
    return job_from_answer(resp)


def follow_job(client: Callable[[], Any], job_id: str, *, timeout: float, poll: float,
               zone: str | None = None, flavor: str | None = None,
               until: Callable[[Job], bool] | None = None) -> Job:
    """Poll ShowJobInfos until the job is done (or ``until(job)`` holds); a FAIL is raised as its error
    (CapacityError naming ``zone`` and ``flavor`` for stock), a job past ``timeout`` as OperationTimeout.
    A poll that is throttled (or fails transiently) is no news: the job runs on whatever the poll answers, and
    the next poll asks again, never past ``timeout`` (then OperationTimeout names the last such error)."""
    deadline = time.monotonic() + timeout
    status, last = "unknown", None
    while True:
        try:
            job = show_job(client(), job_id)
        except MetalfleetError as exc:
            if not exc.retryable:
                raise
            last = exc
        else:
            if job.status == "FAIL":
                raise translate(job.error_code or "BMS.0006", job.fail_reason or f"job {job_id} failed", 400,
                                f"job {job_id} ({job.job_type})", zone=zone, flavor=flavor)
            if job.done or (until is not None and until(job)):
                return job
            status, last = f"{job.status} ({job.job_type})", None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            why = f"; its last poll failed: {last.message}" if last is not None else ""
            raise OperationTimeout(f"BMS job {job_id} is still {status} after {timeout:.0f}s{why}",
                                   provider=PROVIDER, code=status.split(" ")[0])
        time.sleep(min(poll, remaining))
