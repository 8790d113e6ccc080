"""The HTTP layer under every Huawei SDK client metalfleet builds: it retries nothing and keeps ``Retry-After``.

huaweicloudsdkcore's ``HttpClient._init_session`` mounts a requests ``HTTPAdapter`` with a urllib3
``Retry(total=HttpConfig.retry_times, status_forcelist=[429])`` on its session. Even with ``retry_times=0`` that
Retry owns every 429 answered to an idempotent method (GET, DELETE, ...): urllib3 counts it as a retry, finds a
budget of 0 and raises MaxRetryError ("Max retries exceeded ... too many 429 error responses"), which the SDK turns
into a bodiless 429 (error code ``"429"``, no request id: the gateway's ``APIGW.0308`` and its ``X-Request-Id`` are
lost) and logs at ERROR; with any ``retry_times`` above 0 the SDK would retry 429s itself, sleeping their
``Retry-After`` inside one call, behind the back of metalfleet's deadline. :func:`build` therefore replaces those
adapters with ones whose Retry retries nothing (no status is retried, no Retry-After slept, no failure tried
again): every answer comes back as it was sent, is raised by the SDK's exception handler with its code and
request id, and :mod:`metalfleet.providers.retry` alone decides what is retried.

The exception handler (:class:`RetryAfterExceptionHandler`, given through the builder's public
``with_exception_handler``) is the SDK's own, plus the answer's ``Retry-After`` (seconds or an HTTP date) kept on
the exception as ``retry_after``, which :func:`~.errors.translate_sdk_error` hands to
:class:`~metalfleet.providers.errors.RateLimitedError`.
"""

from __future__ import annotations

import email.utils
import math
from datetime import UTC, datetime
from typing import Any

__all__ = ["NO_RETRY", "RetryAfterExceptionHandler", "build", "no_sdk_retries", "retry_after_seconds"]


def _no_retry() -> Any:
    from urllib3.util import Retry

    # The SDK's Retry less its 429 rule: no status is retried, Retry-After is not slept, a failure is not tried
    # again (a connect or read error raises as before: total is 0).
    return Retry(total=0, status_forcelist=None, respect_retry_after_header=False, raise_on_status=False)


#: The urllib3 Retry every Huawei client's adapters get: a 429 (or any answer) is returned, never retried.
NO_RETRY = _no_retry()


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """A ``Retry-After`` value (RFC 9110: delay-seconds or an HTTP-date) as seconds from now; None when absent
    or unreadable."""
    if not value or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def _handler_class() -> type[Any]:
    from huaweicloudsdkcore.exceptions.exception_handler import DefaultExceptionHandler
    from huaweicloudsdkcore.exceptions.exceptions import ServiceResponseException

    class _Handler(DefaultExceptionHandler):  # type: ignore[misc]  # the SDK is untyped
        def handle_exception(self, request: Any, response: Any) -> None:
            try:
                super().handle_exception(request, response)
            except ServiceResponseException as exc:
                exc.retry_after = retry_after_seconds(response.headers.get("Retry-After"))
                raise

    return _Handler


class RetryAfterExceptionHandler:
    """Builds the SDK's DefaultExceptionHandler with ``retry_after`` kept on every error it raises (the class is
    made when first needed: the SDK is imported only when a driver is used)."""

    _cls: type[Any] | None = None

    @classmethod
    def new(cls) -> Any:
        if cls._cls is None:
            cls._cls = _handler_class()
        return cls._cls()


def no_sdk_retries(client: Any, config: Any) -> Any:
    """Mount retry-free adapters (``config``'s pool sizes) on ``client``'s requests session; the client."""
    from requests.adapters import HTTPAdapter

    session = getattr(client.get_http_client(), "_session", None)
    if session is None:  # an SDK whose HTTP layer this does not know: tests/huawei/test_storms.py says so
        return client
    adapter = HTTPAdapter(pool_connections=config.pool_connections, pool_maxsize=config.pool_maxsize,
                          max_retries=NO_RETRY)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return client


def build(builder: Any, config: Any) -> Any:
    """``builder`` (a BmsClient or BssClient builder with credentials and endpoints) with ``config``, the
    ``Retry-After``-keeping exception handler and retry-free adapters: the built client."""
    client = builder.with_http_config(config).with_exception_handler(RetryAfterExceptionHandler.new()).build()
    return no_sdk_retries(client, config)
