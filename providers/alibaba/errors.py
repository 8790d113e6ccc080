"""ECS error codes -> the metalfleet error tree, and the one boundary every Alibaba Cloud call goes through.

The tables decide what is retried: only throttling and transient faults become retryable errors; auth,
quota, capacity and invalid-spec errors never are. Codes are ECS's own (the API's error-code reference:
``OperationDenied.NoStock``, ``Throttling.User``, ``InvalidAccessKeyId.NotFound`` ...); a code that names a
spec field (a bad vSwitch, image, key pair, KMS key) becomes an InvalidSpecError naming that field.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
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

__all__ = ["AUTH", "CAPACITY", "FIELD_OF_CODE", "PROVIDER", "QUOTA", "STATE", "THROTTLE", "TRANSIENT", "boundary",
           "translate_error"]

PROVIDER = "alibaba"

#: No stock of the type where asked (the zone is named by the caller, which knows it).
CAPACITY = frozenset({"OperationDenied.NoStock", "Zone.NotOnSale", "Zone.NotOpen", "ResourceNotAvailable",
                      "InvalidResourceType.NotSupported", "OperationDenied.NoStockOrNoResource",
                      "InvalidInstanceType.ZoneNotSupported", "RecommendEmpty.InstanceTypeSoldOut",
                      "OperationDenied.ZoneSystemCategoryNotMatch"})
#: Throttling: every code that starts with one of these (Throttling, Throttling.User, Throttling.Api ...).
THROTTLE = ("Throttling", "ServiceUnavailableTemporary", "Request.Throttled")
#: 5xx-class faults worth retrying (any status >= 500 is too).
#: IdempotentProcessing / LastTokenProcessing: an earlier request with the same ClientToken is still being worked on
#: (a racer's, or this run's own whose answer was lost): asked again, ECS answers what that request made.
TRANSIENT = frozenset({"ServiceUnavailable", "InternalError", "UnknownError", "ServiceBusy", "InternalError.Timeout",
                       "LastTokenProcessing", "IdempotentProcessing", "OperationConflict"})
#: Credentials missing, wrong, expired or not allowed: prefixes (InvalidAccessKeyId.NotFound, .Inactive, ...).
AUTH = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "IncompleteSignature", "InvalidSecurityToken",
        "SignatureNonceUsed", "InvalidTimeStamp", "Forbidden", "NoPermission", "InvalidCredentials",
        "MissingAuthorization", "InvalidAuthorization")
#: Account quotas: prefixes (QuotaExceed.AfterpayInstance, QuotaExceed.ElasticQuota, QuotaExceeded.*).
QUOTA = ("QuotaExceed", "QuotaExceeded", "InstanceQuotaExceed", "OperationDenied.QuotaExceed",
         "Account.Arrearage", "InvalidAccountStatus.NotEnoughBalance")
#: The resource is in a state the call does not fit (an instance still starting, a group in use).
STATE = frozenset({"IncorrectInstanceStatus", "IncorrectInstanceStatus.Initializing", "IncorrectStatus",
                   "DependencyViolation", "InvalidOperation.InstanceStatus", "OperationDenied.InstanceStatus",
                   "InvalidOperation.ResourceInUse", "DependencyViolation.NotEmpty",
                   "InvalidStatus.ValueNotSupported", "ExpiredInstance", "ChargeTypeViolation",
                   "InvalidInstanceChargeType.ValueNotSupported", "InvalidOperation.DeletionProtection"})
IDEMPOTENT_MISMATCH = frozenset({"IdempotentParameterMismatch", "IdempotenceParamNotMatch"})
#: Error code prefix -> the cluster-spec field it is about (so the user is told what to fix).
FIELD_OF_CODE: tuple[tuple[str, str], ...] = (
    ("InvalidVSwitchId", "network.subnet_id"),
    ("InvalidVSwitch", "network.subnet_id"),
    ("InvalidVpcId", "network.vpc_id"),
    ("InvalidSecurityGroupId", "network.security_group_ids"),
    ("InvalidSecurityGroup", "network.security_group_ids"),
    ("InvalidImageId", "image"),
    ("InvalidImage", "image"),
    ("InvalidKeyPairName", "ssh.key_pair"),
    ("InvalidKeyPair", "ssh.key_pair"),
    ("InvalidKMSKeyId", "storage.kms_key_id"),
    ("InvalidKmsKeyId", "storage.kms_key_id"),
    ("InvalidParameter.KMSKeyId", "storage.kms_key_id"),
    ("InvalidParameter.EncryptedIllegal", "storage.encrypted"),
    ("InvalidDeploymentSetId", "placement.group_name"),
    ("InvalidDeploymentSet", "placement.group_name"),
    ("InvalidParameter.DeploymentSet", "placement.group_name"),
    ("DeploymentSet.NotFound", "placement.group_name"),
    ("InvalidParameter.Mismatch", "network.subnet_id"),
    ("InvalidSystemDiskCategory", "storage.root.type"),
    ("InvalidDataDiskCategory", "storage.data"),
    ("InvalidDataDiskSize", "storage.data"),
    ("InvalidSystemDiskSize", "storage.root.size_gib"),
    ("InvalidInstanceType", "offering"),
    ("InvalidParam.NetworkInterface", "offering"),
    ("InvalidNetworkInterfaceTrafficMode", "offering"),
    ("InvalidZoneId", "zone"),
    ("InvalidUserData", "user_data"),
    ("InvalidHostName", "name"),
    ("InvalidInstanceName", "name"),
    ("InvalidTagKey", "tags"),
    ("InvalidTagValue", "tags"),
    ("InvalidTagCount", "tags"),
    ("Duplicate.TagKey", "tags"),
    ("InstanceDiskNumber", "storage.data"),
    ("InvalidHttpTokens", "metadata"),
    ("InvalidHttpEndpoint", "metadata"),
)
#: Refusals of a request's own form (a value out of range, a parameter missing or in conflict): InvalidSpecError.
_INVALID = ("InvalidParameter", "MissingParameter", "MissingParamter", "InvalidParam", "UnsupportedParameter",
            "InvalidInstanceChargeType", "InvalidSpotStrategy", "InvalidSpotPrepaid", "InvalidPeriod",
            "InvalidClientToken", "InvalidMinAmount", "InvalidInternetChargeType", "InvalidInternetMaxBandwidthOut",
            "InvalidIpProtocol", "InvalidIpPortRange", "InvalidSourceGroupId", "InvalidDescription",
            "InvalidDeploymentSetName", "InvalidPublicKeyBody", "NumberExceed", "InvalidSystemDiskSize",
            "InvalidDataDiskSize", "InvalidPriceUnit", "InvalidVersion")


def _field_of(code: str) -> str | None:
    return next((f for prefix, f in FIELD_OF_CODE if code.startswith(prefix)), None)


def translate_error(code: str, message: str, status: int, request_id: str | None, action: str, *,
                    zone: str | None = None, instance_type: str | None = None,
                    client_token: str | None = None, retry_after: float | None = None) -> MetalfleetError:
    """The metalfleet error for ECS error ``code`` (HTTP ``status``) answered to ``action``; ``retry_after``
    (seconds) goes on a throttling error."""
    kw: dict[str, Any] = {"provider": PROVIDER, "code": code, "request_id": request_id}
    text = f"ECS {action}: {message}"
    if code in CAPACITY:
        what = instance_type or "instance"
        where = zone or "the requested zone"
        return CapacityError(f"Alibaba Cloud has no {what} stock in {where} ({code}): {message}", zone=zone, **kw)
    if code.startswith(THROTTLE) or status == 429:
        return RateLimitedError(text, retry_after=retry_after, **kw)
    if code.startswith(AUTH):
        return AuthError(f"{text} (check the Alibaba Cloud AccessKey pair and its RAM permissions)", **kw)
    if code.startswith(QUOTA):
        return QuotaError(f"{text} (raise the quota in the Quota Center; retrying will not help)", **kw)
    if code in IDEMPOTENT_MISMATCH:
        key = f" {client_token}" if client_token else ""
        return ConflictError(f"{text} (the node's idempotency key (ClientToken){key} was used before with other "
                             "settings; bump its generation to order a replacement)", **kw)
    if code in STATE:
        return ConflictError(f"{text} (the resource is in a state this call does not fit)", **kw)
    field = _field_of(code)
    if field:
        return InvalidSpecError(text, field=field, **kw)
    if code.endswith(".NotFound") or code.startswith("InvalidInstanceId") or code.endswith("NotExist"):
        return NotFoundError(text, **kw)
    if code.startswith(_INVALID) or code.endswith(".Malformed"):
        return InvalidSpecError(text, **kw)
    if code in TRANSIENT or status >= 500:
        return TransientError(text, **kw)
    return ProviderError(text, **kw)


def _retry_after(exc: Any) -> float | None:
    """Seconds to wait before a retry, when ECS said: the SDK reads the ``x-acs-retry-after`` header into the
    exception's ``retry_after``, in milliseconds (tea-openapi ``Utils.get_throttling_time_left``; its own retry
    layer, off here, sleeps that many milliseconds)."""
    raw = getattr(exc, "retry_after", None)
    try:
        value = float(raw) / 1000.0 if raw is not None else None
    except (TypeError, ValueError):
        return None
    return value if value is not None and value > 0 else None


def _sdk_fields(exc: Any) -> tuple[str, str, int, str | None]:
    data: Mapping[str, Any] = getattr(exc, "data", None) or {}
    code = str(getattr(exc, "code", None) or data.get("Code") or "Unknown")
    message = str(data.get("Message") or getattr(exc, "message", None) or exc)
    status = getattr(exc, "status_code", None) or getattr(exc, "statusCode", None) or data.get("statusCode") or 0
    request_id = data.get("RequestId") or getattr(exc, "request_id", None)
    return code, message, int(status), (str(request_id) if request_id and request_id != "None" else None)


@contextlib.contextmanager
def boundary(action: str, *, zone: str | None = None, instance_type: str | None = None,
             client_token: str | None = None) -> Iterator[None]:
    """The one boundary: every SDK (Tea/darabonba) exception raised inside leaves as a metalfleet error,
    chained. ``zone`` and ``instance_type`` make capacity errors say where and what; ``client_token`` makes an
    idempotency mismatch name the key."""
    from Tea.exceptions import TeaException, UnretryableException

    try:
        yield
    except MetalfleetError:
        raise
    except UnretryableException as exc:  # the SDK's wrapper of a connection fault or timeout (its retries are off);
        # a subclass of TeaException, so caught first: read as an error answer it was an untyped ProviderError
        inner = getattr(exc, "inner_exception", None) or exc
        raise TransientError(f"ECS {action}: {type(inner).__name__}: {inner}", provider=PROVIDER,
                             code=type(inner).__name__) from exc
    except TeaException as exc:
        code, message, status, request_id = _sdk_fields(exc)
        if code == "InvalidCredentials" and not status:
            raise AuthError(f"ECS {action}: no usable Alibaba Cloud credentials ({message})", provider=PROVIDER,
                            code=code) from exc
        raise translate_error(code, message, status, request_id, action, zone=zone, instance_type=instance_type,
                              client_token=client_token, retry_after=_retry_after(exc)) from exc
    except OSError as exc:
        raise TransientError(f"ECS {action}: {type(exc).__name__}: {exc}", provider=PROVIDER,
                             code=type(exc).__name__) from exc
    except Exception as exc:
        if type(exc).__module__.startswith("alibabacloud_credentials"):
            raise AuthError(f"ECS {action}: no usable Alibaba Cloud credentials ({exc})", provider=PROVIDER,
                            code=type(exc).__name__) from exc
        if type(exc).__module__.startswith(("requests", "urllib3", "aiohttp", "json")):
            raise TransientError(f"ECS {action}: {type(exc).__name__}: {exc}", provider=PROVIDER,
                                 code=type(exc).__name__) from exc
        raise
