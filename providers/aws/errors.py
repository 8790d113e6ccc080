"""EC2 error codes -> the metalfleet error tree, and the one boundary every AWS call goes through.

The tables decide what is retried: only throttling and transient faults become retryable errors; auth,
quota, capacity and invalid-spec errors never are. An error code that names a spec field (a bad subnet,
AMI, key pair, KMS key) becomes an InvalidSpecError naming that field, so the user is told what to fix.
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

__all__ = ["PROVIDER", "boundary", "translate_client_error"]

PROVIDER = "aws"

CAPACITY = {"InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
            "InsufficientReservedInstanceCapacity", "ReservationCapacityExceeded", "InsufficientCapacityOnHost",
            "InsufficientAddressCapacity"}
THROTTLE = {"RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled",
            "RequestThrottledException", "TooManyRequestsException", "SlowDown", "PriorRequestNotComplete"}
AUTH = {"AuthFailure", "UnauthorizedOperation", "InvalidClientTokenId", "SignatureDoesNotMatch", "OptInRequired",
        "Blocked", "ExpiredToken", "RequestExpired", "AccessDenied", "AccessDeniedException",
        "IncompleteSignature", "MissingAuthenticationToken", "PendingVerification"}
QUOTA = {"InstanceLimitExceeded", "VcpuLimitExceeded", "MaxSpotInstanceCountExceeded", "ResourceLimitExceeded",
         "AddressLimitExceeded", "SecurityGroupLimitExceeded", "RulesPerSecurityGroupLimitExceeded",
         "PlacementGroupLimitExceeded", "VolumeLimitExceeded", "NetworkInterfaceLimitExceeded"}
TRANSIENT = {"InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable", "ServerInternal",
             "EC2ThrottledException"}
INVALID = {"InvalidParameter", "InvalidParameterValue", "InvalidParameterCombination", "MissingParameter",
           "UnknownParameter", "ValidationError", "InvalidInstanceType", "Unsupported", "UnsupportedOperation",
           "InvalidBlockDeviceMapping", "InvalidUserData.Malformed", "InvalidInput",
           "AttachmentLimitExceeded"}  # more interfaces than the instance type has: a fixed limit, not a quota
#: Error code prefix -> the cluster-spec field it is about (so the user is told what to fix).
FIELD_OF_CODE: tuple[tuple[str, str], ...] = (
    ("InvalidSubnetID", "network.subnet_id"),
    ("InvalidSubnet", "network.subnet_id"),
    ("InvalidAMIID", "image"),
    ("InvalidGroup", "network.security_group_ids"),
    ("InvalidSecurityGroupID", "network.security_group_ids"),
    ("InvalidKeyPair", "key_name"),
    ("InvalidClientToken", "idempotency_key"),
    ("InvalidCapacityReservationId", "capacity.reservation_id"),
    ("InvalidCapacityReservationState", "capacity.reservation_id"),
    ("InvalidPlacementGroup", "placement.group_name"),
    ("InvalidKMSKey", "storage.kms_key_id"),
    ("KMS.", "storage.kms_key_id"),
    ("InvalidBlockDeviceMapping", "storage"),
    ("InvalidInstanceType", "offering"),
)


def _field_of(code: str) -> str | None:
    return next((f for prefix, f in FIELD_OF_CODE if code.startswith(prefix)), None)


def translate_client_error(exc: Any, action: str, *, zone: str | None = None,
                           instance_type: str | None = None) -> MetalfleetError:
    """The metalfleet error for a botocore ``ClientError`` raised by EC2 ``action``."""
    response: Mapping[str, Any] = getattr(exc, "response", None) or {}
    error = response.get("Error") or {}
    meta = response.get("ResponseMetadata") or {}
    code = str(error.get("Code") or "Unknown")
    message = str(error.get("Message") or exc)
    status = int(meta.get("HTTPStatusCode") or 0)
    kw: dict[str, Any] = {"provider": PROVIDER, "code": code, "request_id": meta.get("RequestId")}
    text = f"EC2 {action}: {message}"
    if code in CAPACITY:
        what = instance_type or "instance"
        where = zone or "the requested zone"
        return CapacityError(f"EC2 has no {what} capacity in {where} ({code}): {message}", zone=zone, **kw)
    if code in THROTTLE:
        return RateLimitedError(text, **kw)
    if code in AUTH:
        return AuthError(f"{text} (check the AWS credentials and their IAM permissions)", **kw)
    if code in QUOTA or (code.endswith("LimitExceeded") and code not in INVALID):
        return QuotaError(f"{text} (request a quota increase; retrying will not help)", **kw)
    if code == "IdempotentParameterMismatch":
        return ConflictError(f"{text} (the node's idempotency key was used before with other settings; "
                             "bump its generation to order a replacement)", **kw)
    if code == "IdempotentInstanceTerminated":
        return ConflictError(f"{text} (the instance the node's idempotency key bought is terminated; bump its "
                             "generation to order a replacement)", **kw)
    field = _field_of(code)
    if field and not code.endswith("LimitExceeded"):
        return InvalidSpecError(text, field=field, **kw)
    if code.endswith(".NotFound") or code.endswith(".Unknown"):
        return NotFoundError(text, **kw)
    if code in INVALID or code.startswith("InvalidParameter") or code.endswith(".Malformed"):
        return InvalidSpecError(text, **kw)
    if code in TRANSIENT or status >= 500:
        return TransientError(text, **kw)
    return ProviderError(text, **kw)


@contextlib.contextmanager
def boundary(action: str, *, zone: str | None = None, instance_type: str | None = None) -> Iterator[None]:
    """The one boundary: every botocore exception raised inside leaves as a metalfleet error, chained.
    ``zone`` and ``instance_type`` only make capacity errors say where and what."""
    from botocore import exceptions as bx
    from botocore.parsers import ResponseParserError

    try:
        yield
    except bx.ClientError as exc:
        raise translate_client_error(exc, action, zone=zone, instance_type=instance_type) from exc
    except (bx.NoCredentialsError, bx.PartialCredentialsError, bx.CredentialRetrievalError,
            bx.ProfileNotFound, bx.TokenRetrievalError) as exc:
        raise AuthError(f"EC2 {action}: no usable AWS credentials ({type(exc).__name__})",
                        provider=PROVIDER, code=type(exc).__name__) from exc
    except (bx.ConnectionError, bx.HTTPClientError, ResponseParserError) as exc:
        raise TransientError(f"EC2 {action}: {exc}", provider=PROVIDER, code=type(exc).__name__) from exc
    except bx.BotoCoreError as exc:
        raise ProviderError(f"EC2 {action}: {exc}", provider=PROVIDER, code=type(exc).__name__) from exc
