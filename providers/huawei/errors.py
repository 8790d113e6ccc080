"""Huawei Cloud error codes -> the metalfleet error tree, and the one boundary every BMS and BSS call goes through.

Huawei answers an error as JSON ``{"error_code": "BMS.0001", "error_msg": "..."}`` (the SDK raises
``ClientRequestException`` for 4xx and ``ServerResponseException`` for 5xx, with the code, message and the
``X-Request-Id``). Codes starting ``APIGW.`` come from the API gateway in front of every service (signature,
throttling), ``BMS.`` from the service, ``Ecs.`` / ``EVS.`` / ``VPC.`` from the services BMS orders through.

The BMS error reference (https://support.huaweicloud.com/intl/en-us/api-bms/bms_api_0802.html) says codes and
messages are not one-to-one and that most calls are asynchronous, so a code may only show up in a job. The
tables therefore hold the codes whose meaning the reference pins, and the translation falls back on the HTTP
status and on the message: a 4xx whose message says sold out / insufficient resources is a capacity error
naming the AZ, one naming a quota a quota error (never retried either way).

BSS (the billing API: orders, yearly/monthly resources, unsubscription, the price inquiry) answers ``CBC.*``
codes, each page of the BSS reference (https://support.huaweicloud.com/api-oce/) listing its own: ``CBC.0100`` /
``CBC.0101`` a parameter error, ``CBC.0151`` / ``CBC.0155`` access denied, ``CBC.0250`` flow control (429),
``CBC.0999`` another error (500); ``CBC.30000010`` an invalid (possibly unknown) order, ``CBC.99003012`` an
unknown resource id, ``CBC.30000067`` a resource already deleted (not found, all three); ``CBC.99003651`` a
transaction in progress and ``CBC.99003100`` a resource in an order awaiting payment (conflicts: the driver's
release reads the server again rather than retrying them).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from ..errors import (
    AuthError,
    CapacityError,
    ConflictError,
    InvalidSpecError,
    MetalfleetError,
    NotFoundError,
    ProviderError,
    QuotaError,
    RateLimitedError,
    TransientError,
)

__all__ = ["AUTH", "CONFLICT", "FIELD_OF_CODE", "INVALID", "NOT_FOUND", "PROVIDER", "QUOTA", "SOLD_OUT", "THROTTLE",
           "TRANSIENT", "UNSUBSCRIBED", "boundary", "translate", "translate_sdk_error"]

PROVIDER = "huawei"

#: API gateway (https://support.huaweicloud.com/intl/en-us/devg-apisign/api-sign-errorcode.html): bad signature
#: or credentials (0301), a user or app the API is not open to (0302, 0303); BMS: role check failed (0004), no
#: permission or balance (0005); BSS: access denied (CBC.0151), the request is not allowed (CBC.0155).
AUTH = frozenset({"APIGW.0301", "APIGW.0302", "APIGW.0303", "BMS.0004", "BMS.0005", "CBC.0151", "CBC.0155"})
#: API gateway flow control (HTTP 429); BSS flow control (CBC.0250, "消息流量控制").
THROTTLE = frozenset({"APIGW.0308", "CBC.0250"})
#: The service is not available (yet) in the region: retried like a 5xx; BSS "other error" (CBC.0999, 500).
TRANSIENT = frozenset({"BMS.0002", "CBC.0999"})
#: BSS: an invalid (possibly unknown) order, an unknown resource id, a resource already deleted.
NOT_FOUND = frozenset({"CBC.30000010", "CBC.99003012", "CBC.30000067"})
#: BSS: a transaction on the resource is in progress; the resource is in an order awaiting payment.
CONFLICT = frozenset({"CBC.99003651", "CBC.99003100"})
#: What CancelResourcesSubscription answers for a resource an earlier unsubscription already ended or is ending
#: (in progress, deleted, no longer listed): the release it was part of goes on.
UNSUBSCRIBED = frozenset({"CBC.99003651", "CBC.30000067", "CBC.99003012"})
#: Codes the reference pins to a cluster-spec field -> that field (so the user is told what to fix).
FIELD_OF_CODE: tuple[tuple[str, str], ...] = (
    ("BMS.0008", "offering"),           # Fail to query flavor [%s]
    ("BMS.0009", "offering"),           # Fail to query flavor extra specs [%s]
    ("BMS.0010", "image"),              # Fail to query image [%s]
    ("BMS.0011", "image"),              # The selected images cannot be used to apply for BMSs
    ("BMS.0012", "network.subnet_id"),  # The number of IP addresses in the selected subnet is insufficient
    ("BMS.0013", "network.subnet_id"),  # Port query failed
)
#: The generic request errors (parse error, empty request, "Fail to operate baremetal server"): an invalid
#: request unless the message says it is about stock or a quota (the reference pins no code to either).
INVALID = frozenset({"BMS.0001", "BMS.0003", "BMS.0006"})
#: The message of a stock refusal (no code of its own: see the module docstring).
SOLD_OUT = re.compile(r"sold ?out|insufficient (resource|capacity|stock)|no (available )?(stock|resource)", re.I)
#: The message of a quota refusal.
QUOTA = re.compile(r"\bquota\b", re.I)


def _field_of(code: str) -> str | None:
    return next((f for prefix, f in FIELD_OF_CODE if code == prefix), None)


def translate(code: str, message: str, status: int, action: str, *, request_id: str | None = None,
              zone: str | None = None, flavor: str | None = None,
              retry_after: float | None = None) -> MetalfleetError:
    """The metalfleet error for a Huawei error answer (or a failed job's ``error_code`` / ``fail_reason``);
    ``retry_after``: the answer's ``Retry-After`` in seconds, kept on a throttling error."""
    kw: dict[str, Any] = {"provider": PROVIDER, "code": code, "request_id": request_id}
    text = f"Huawei {_where(action)}: {message} ({code})"
    if code in THROTTLE or status == 429:
        return RateLimitedError(text, retry_after=retry_after, **kw)
    if code in AUTH or (status in (401, 403) and code.startswith("APIGW.")):
        return AuthError(f"{text} (check the access key, secret key and project id, and the IAM permissions)",
                         **kw)
    if 400 <= status < 500 and SOLD_OUT.search(message):
        where = zone or "the requested availability zone"
        return CapacityError(f"Huawei BMS has no {flavor or 'flavor'} capacity in {where} ({code}): {message}",
                             zone=zone, **kw)
    if 400 <= status < 500 and QUOTA.search(message):
        return QuotaError(f"{text} (request a quota increase; retrying will not help)", **kw)
    field = _field_of(code)
    if field:
        return InvalidSpecError(text, field=field, **kw)
    if code in NOT_FOUND:
        return NotFoundError(text, **kw)
    if code in CONFLICT:
        return ConflictError(text, **kw)
    if status == 404:
        return NotFoundError(text, **kw)
    if code in TRANSIENT or status >= 500:
        return TransientError(text, **kw)
    if code in INVALID or (400 <= status < 500 and status != 409):
        return InvalidSpecError(text, **kw)
    return ProviderError(text, **kw)


def translate_sdk_error(exc: Any, action: str, *, zone: str | None = None,
                        flavor: str | None = None) -> MetalfleetError:
    """The metalfleet error for a huaweicloudsdkcore ``ServiceResponseException`` (with the ``retry_after``
    :class:`~.transport.RetryAfterExceptionHandler` keeps on it)."""
    code = str(getattr(exc, "error_code", None) or "Unknown")
    message = str(getattr(exc, "error_msg", None) or exc)
    status = int(getattr(exc, "status_code", 0) or 0)
    return translate(code, message, status, action, request_id=getattr(exc, "request_id", None), zone=zone,
                     flavor=flavor, retry_after=getattr(exc, "retry_after", None))


@contextlib.contextmanager
def boundary(action: str, *, zone: str | None = None, flavor: str | None = None) -> Iterator[None]:
    """The one boundary: every huaweicloudsdkcore exception raised inside leaves as a metalfleet error,
    chained, and so does a requests error the SDK lets through (a read timeout: the answer is lost, transient).
    ``zone`` and ``flavor`` only make capacity errors say where and what."""
    from huaweicloudsdkcore.exceptions import exceptions as hx
    from requests import exceptions as rx

    try:
        yield
    except hx.ServiceResponseException as exc:
        raise translate_sdk_error(exc, action, zone=zone, flavor=flavor) from exc
    except (hx.ConnectionException, hx.RequestTimeoutException) as exc:
        raise TransientError(f"Huawei {_where(action)}: {exc}", provider=PROVIDER, code=type(exc).__name__) from exc
    except hx.ApiValueError as exc:
        raise InvalidSpecError(f"Huawei {_where(action)}: {exc}", provider=PROVIDER,
                               code=type(exc).__name__) from exc
    except hx.SdkException as exc:
        raise ProviderError(f"Huawei {_where(action)}: {exc}", provider=PROVIDER, code=type(exc).__name__) from exc
    except (rx.Timeout, rx.ConnectionError, rx.ChunkedEncodingError) as exc:  # the SDK lets a read timeout through
        raise TransientError(f"Huawei {_where(action)}: no answer ({exc})", provider=PROVIDER,
                             code=type(exc).__name__) from exc
    except ValueError as exc:  # an answer the SDK's models could not parse
        raise TransientError(f"Huawei {_where(action)}: unreadable answer ({exc})", provider=PROVIDER,
                             code="ResponseParseError") from exc


def _where(action: str) -> str:
    """``BSS <op>`` as it is, anything else as a BMS call."""
    return action if action.startswith("BSS ") else f"BMS {action}"
