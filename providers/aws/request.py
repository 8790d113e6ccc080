"""What RunInstances sends for a NodeSpec, and the one check made online before sending it (KMS keys).

The request is deterministic: the same spec gives byte-identical arguments, so a replay with the node's
ClientToken (its idempotency key) matches the first request and EC2 returns the instance that one bought.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import AuthError, InvalidSpecError, MetalfleetError
from ..models import NodeSpec, VolumeSpec
from ..tags import TAG_CLUSTER, TAG_INDEX, TAG_KEY, TAG_NAME, TAG_PUBLIC_IP
from .errors import PROVIDER, boundary

__all__ = ["CLIENT_TOKEN_MAX", "DATA_DEVICES", "USER_DATA_MAX", "KmsKeys", "client_token", "network_interfaces",
           "node_tags", "run_instances_request"]

#: Device names given to data volumes that name none, in order.
DATA_DEVICES = [f"/dev/sd{c}" for c in "fghijklmnopqrstuvwxyz"]
#: EC2's limit on user data, in bytes.
USER_DATA_MAX = 16 * 1024
#: RunInstances ClientToken: "Constraints: Maximum 64 ASCII characters".
CLIENT_TOKEN_MAX = 64


def client_token(key: str) -> str:
    """The RunInstances ClientToken for idempotency key ``key``: the key itself when EC2 takes it (64 characters
    at most), else its first 39 characters and a digest of all of it (64, deterministic): a 30-character cluster
    prefix with a node index of 100 or more and a generation of 10 or more makes a 65-character key."""
    if len(key) <= CLIENT_TOKEN_MAX:  # keys are ASCII: cluster names are [a-z0-9-]
        return key
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return f"{key[:CLIENT_TOKEN_MAX - 25]}-{digest}"


def node_tags(spec: NodeSpec) -> dict[str, str]:
    """The node's tags, sorted: the same spec must give byte-identical requests (ClientToken replays),
    whatever order its tags arrived in (a Pulumi round trip reorders them)."""
    tags = {TAG_NAME: spec.name, **spec.tags}
    tags.update({TAG_CLUSTER: spec.cluster, TAG_INDEX: str(spec.index), TAG_KEY: spec.idempotency_key})
    if spec.public_ip:
        tags[TAG_PUBLIC_IP] = "eip"
    return dict(sorted(tags.items()))


def network_interfaces(spec: NodeSpec, security_group_ids: Sequence[str], fabric_cards: int) -> list[dict[str, Any]]:
    """One EFA interface per network card: card 0 carries the primary interface (DeviceIndex 0), every
    other card one at DeviceIndex 1 (the layout AWS documents for P5/P4d)."""
    return [{"NetworkCardIndex": card, "DeviceIndex": 0 if card == 0 else 1, "InterfaceType": "efa",
             "SubnetId": spec.subnet_id, "Groups": list(security_group_ids), "DeleteOnTermination": True,
             "Description": f"{spec.name} EFA card {card}"}
            for card in range(max(fabric_cards, 1))]


def _ebs(v: VolumeSpec) -> dict[str, Any]:
    ebs: dict[str, Any] = {"VolumeSize": v.size_gib, "VolumeType": v.volume_type, "Encrypted": v.encrypted,
                           "DeleteOnTermination": True}
    if v.kms_key_id:
        ebs["KmsKeyId"] = v.kms_key_id
    return ebs


def run_instances_request(spec: NodeSpec, *, security_group_ids: Sequence[str], root_device: str,
                          fabric_cards: int) -> dict[str, Any]:
    """The RunInstances arguments for ``spec``: IMDSv2 only, encrypted volumes, tags on the instance, its
    volumes and interfaces, ClientToken from the idempotency key (:func:`client_token`)."""
    tags = [{"Key": k, "Value": v} for k, v in node_tags(spec).items()]
    bdm = [{"DeviceName": root_device, "Ebs": _ebs(spec.root_volume)}]
    bdm += [{"DeviceName": v.device_name or DATA_DEVICES[i], "Ebs": _ebs(v)} for i, v in enumerate(spec.data_volumes)]
    req: dict[str, Any] = {
        "ImageId": spec.image,
        "InstanceType": spec.offering,
        "MinCount": 1,
        "MaxCount": 1,
        "ClientToken": client_token(spec.idempotency_key),
        "NetworkInterfaces": network_interfaces(spec, security_group_ids, fabric_cards),
        "BlockDeviceMappings": bdm,
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 2},
        "TagSpecifications": [{"ResourceType": kind, "Tags": tags}
                              for kind in ("instance", "volume", "network-interface")],
    }
    if spec.placement_group:
        req["Placement"] = {"GroupName": spec.placement_group}
    if spec.capacity_reservation_id:
        req["CapacityReservationSpecification"] = {
            "CapacityReservationTarget": {"CapacityReservationId": spec.capacity_reservation_id}}
    if spec.capacity_block:
        req["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
    if spec.key_name:
        req["KeyName"] = spec.key_name
    if spec.user_data:
        req["UserData"] = spec.user_data
    return req


class KmsKeys:
    """The spec's volume KMS keys, looked up with KMS DescribeKey before a launch: a key that does not exist
    or is not enabled is an InvalidSpecError naming the volume's ``kms_key_id``, where EC2 would accept the
    launch and then terminate the instance (``Client.InvalidKMSKey.InvalidState``)."""

    def __init__(self, client: Callable[[], Any], region: str) -> None:
        self._client = client
        self._region = region
        self._usable: set[str] = set()  # keys DescribeKey found enabled
        self._lock = threading.Lock()

    def problem(self, spec: NodeSpec, *, fresh: bool = False, strict: bool = False) -> InvalidSpecError | None:
        """The error for the first of the spec's volume KMS keys that does not exist or is not enabled
        (a key found enabled is not looked up again unless ``fresh``); None when all are usable, or when
        this principal may not describe a key (EC2 then decides at launch) unless ``strict``. With
        ``strict``, a launch EC2 already refused for its key is an error even when no key is named (the
        account's default EBS key)."""
        volumes = [("storage.root", spec.root_volume)] + [(f"storage.data.{i}", v)
                                                          for i, v in enumerate(spec.data_volumes)]
        named = [(path, v.kms_key_id) for path, v in volumes if v.kms_key_id and v.encrypted]
        if strict and not named:
            return InvalidSpecError("EC2 terminated the instance at launch for its EBS encryption key "
                                    "(Client.InvalidKMSKey.InvalidState): the account's default EBS key is not "
                                    "usable; name a key in storage.kms_key_id", field="storage.kms_key_id",
                                    value=None, provider=PROVIDER, code="Client.InvalidKMSKey.InvalidState")
        for path, key in named:
            if key in self._usable and not fresh:
                continue
            try:
                with boundary("DescribeKey"):
                    meta = self._client().describe_key(KeyId=key)["KeyMetadata"]
            except MetalfleetError as exc:
                if exc.code == "NotFoundException":
                    return InvalidSpecError(f"KMS key {key} does not exist in {self._region}: EC2 would launch the "
                                            "instance and terminate it at once (Client.InvalidKMSKey.InvalidState)",
                                            field=f"{path}.kms_key_id", value=key, provider=PROVIDER, code=exc.code)
                if not isinstance(exc, AuthError):
                    raise
                if strict:
                    return InvalidSpecError(f"EC2 terminated the instance at launch for KMS key {key} "
                                            "(Client.InvalidKMSKey.InvalidState), and this principal may not "
                                            "describe the key", field=f"{path}.kms_key_id", value=key,
                                            provider=PROVIDER, code=exc.code)
                continue  # may not describe it: EC2 decides at launch
            state = str(meta.get("KeyState") or ("Enabled" if meta.get("Enabled") else "Disabled"))
            if state != "Enabled":
                return InvalidSpecError(f"KMS key {key} is {state}, not Enabled: EC2 would terminate the instance "
                                        "at launch (Client.InvalidKMSKey.InvalidState)", field=f"{path}.kms_key_id",
                                        value=key, provider=PROVIDER, code=f"KMS.{state}")
            with self._lock:
                self._usable.add(key)
        return None
