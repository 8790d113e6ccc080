"""The AWS driver class: the contract's methods, each a few lines over the package's modules.

boto3 is imported only when a driver is built or used. botocore's own retries are off:
:mod:`metalfleet.providers.retry` alone decides what to retry, and every botocore exception leaves through
:func:`~metalfleet.providers.aws.errors.boundary` as a :mod:`metalfleet.providers.errors` error.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any, Literal

from ..base import Lazy, PlainConfig, PolledWait
from ..catalog import load_catalog
from ..errors import CapacityError, ConflictError, InvalidSpecError, MetalfleetError, NotFoundError
from ..models import Node, NodeSpec, NodeState, Offering
from ..retry import step
from .errors import PROVIDER, boundary
from .network import (
    ClusterNetwork,
    Net,
    cluster_resources,
    delete_cluster_resources,
    ensure_public_ip,
    release_public_ip,
)
from .observe import STATE_TABLE, Observer
from .offerings import InstanceTypes, fabric_cards
from .request import KmsKeys, run_instances_request
from .validation import check_tags, validate_node_spec

__all__ = ["AwsDriver"]

#: What EC2 answers a launch into a Capacity Block that has not started (RunInstances; EC2 Fleet answers a
#: capacity error).
BLOCK_NOT_STARTED = frozenset({"InvalidCapacityReservationState.PendingActivation", "ReservationCapacityExceeded"})


class AwsDriver(PlainConfig, PolledWait):
    """Order GPU nodes on EC2. Credentials come from the standard AWS chain (env, config, profile, role).

    ``endpoint_url`` (or the standard ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_EC2``) points it at another
    EC2 API, such as the test emulator. The driver holds only plain configuration; its boto3 client is
    built on first use and is not pickled.

    Beyond the contract: ``set_tags`` (:class:`~metalfleet.providers.contract.TaggingDriver`), the cluster
    resources of :class:`~metalfleet.providers.contract.ClusterResourcesDriver` and ``host_keys``.
    """

    name = PROVIDER

    def __init__(
        self,
        region: str = "us-east-1",
        endpoint_url: str | None = None,
        profile: str | None = None,
        *,
        poll: float = 5.0,
        max_pool_connections: int = 64,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
    ) -> None:
        import boto3  # noqa: F401  (fail at construction when the aws extra is missing)

        self.region = region
        self.endpoint_url = endpoint_url
        self.profile = profile
        self.poll = float(poll)
        self.max_pool_connections = int(max_pool_connections)
        self.connect_timeout = float(connect_timeout)
        self.read_timeout = float(read_timeout)
        self._init_runtime()

    CONFIG = ("region", "endpoint_url", "profile", "poll", "max_pool_connections", "connect_timeout", "read_timeout")

    def _init_runtime(self) -> None:
        self._ec2 = Lazy(lambda: self._client("ec2"))
        # KMS, for DescribeKey on the spec's volume keys; endpoint_url (a local emulator) serves both
        self._kms = Lazy(lambda: self._client("kms"))
        self._root_lock = threading.Lock()
        self._root_devices: dict[str, str] = {}
        self._types = InstanceTypes(self._ec2, self.region, load_catalog())
        self._nets = ClusterNetwork(self._ec2)
        self._observer = Observer(self._ec2, self.region)
        self._wait = self._observer.wait
        self._kms_keys = KmsKeys(self._kms, self.region)

    def __repr__(self) -> str:
        where = f", endpoint_url={self.endpoint_url!r}" if self.endpoint_url else ""
        return f"AwsDriver(region={self.region!r}{where})"

    # -- plumbing --------------------------------------------------------------------------
    def _client(self, service: Literal["ec2", "kms"]) -> Any:
        with boundary("CreateClient"):
            import boto3
            from botocore.config import Config

            session = boto3.session.Session(profile_name=self.profile, region_name=self.region)
            config = Config(
                region_name=self.region,
                retries={"total_max_attempts": 1, "mode": "standard"},
                max_pool_connections=self.max_pool_connections,
                connect_timeout=self.connect_timeout,
                read_timeout=self.read_timeout,
                user_agent_extra="metalfleet",
            )
            return session.client(service, endpoint_url=self.endpoint_url, config=config)

    # -- offerings and offline validation ----------------------------------------------------
    def offerings(self) -> list[Offering]:
        """The catalogue's orderable AWS offerings this region sells, merged with DescribeInstanceTypes."""
        return self._types.offerings()

    def validate(self, spec: NodeSpec) -> None:
        """Check ``spec`` offline (:func:`~metalfleet.providers.aws.validation.validate_node_spec`)."""
        validate_node_spec(spec, self.region, self._types.names)

    # -- order -----------------------------------------------------------------------------
    def _root_device(self, spec: NodeSpec) -> str:
        if spec.root_volume.device_name:
            return spec.root_volume.device_name
        with self._root_lock:
            if spec.image not in self._root_devices:
                with boundary("DescribeImages"):
                    images = self._ec2().describe_images(ImageIds=[spec.image]).get("Images", [])
                if not images:
                    raise InvalidSpecError(f"image {spec.image} does not exist in {self.region}", field="image",
                                           value=spec.image, provider=PROVIDER, code="InvalidAMIID.NotFound")
                self._root_devices[spec.image] = str(images[0].get("RootDeviceName") or "/dev/sda1")
            return self._root_devices[spec.image]

    def run_instances_request(self, spec: NodeSpec, net: Net) -> dict[str, Any]:
        """The RunInstances arguments for ``spec``: deterministic, so a replay matches its ClientToken."""
        return run_instances_request(spec, security_group_ids=net.security_group_ids,
                                     root_device=self._root_device(spec),
                                     fabric_cards=fabric_cards(self._types.info(spec.offering)))

    def order(self, spec: NodeSpec) -> Node:
        """Order one node: validate, check its KMS keys, make the cluster's network, RunInstances with the
        node's idempotency key as ClientToken (a repeat returns the same instance), then its Elastic IP."""
        self.validate(spec)
        problem = self._kms_keys.problem(spec)
        if problem:
            raise problem
        net = self._nets.network(spec)
        request = self.run_instances_request(spec, net)
        try:
            with boundary("RunInstances", zone=net.zone, instance_type=spec.offering):
                resp = self._ec2().run_instances(**request)
        except (CapacityError, InvalidSpecError) as exc:
            if exc.code in BLOCK_NOT_STARTED and spec.capacity_block and spec.capacity_reservation_id:
                self._explain_capacity_block(spec.capacity_reservation_id, exc)
            raise
        except ConflictError as exc:
            # IdempotentInstanceTerminated: what the key bought is terminated (EC2 no longer answers a repeated
            # ClientToken with a terminated instance). IdempotentParameterMismatch: the key's first request
            # differs from this one (e.g. the cluster's security group was released and made again, so its id
            # changed). Either way, if what the key bought is gone, say so: the caller steps to the next
            # generation. A live one is a real conflict.
            gone = self._observer.gone_by_key(spec.idempotency_key)
            if gone is None and exc.code == "IdempotentInstanceTerminated":
                gone = self._gone_unlisted(spec, exc)
            if gone is None:
                raise
            return self._gone(spec, gone) if exc.code == "IdempotentInstanceTerminated" else gone
        instance = resp["Instances"][0]
        node = self._observer.node(instance)
        # A repeated ClientToken is answered with the instance that token first bought; a RunInstances answer
        # need not say that it has terminated since (the emulator's always says pending): read the state, with
        # the small DescribeInstanceStatus, so callers see a gone node.
        state = step(self._observer.states, [node.id]).get(node.id)
        if state:
            node = dataclasses.replace(node, state=NodeState.map(STATE_TABLE, state))
            self._observer.remember(node)
        if node.state.is_gone:
            return self._gone(spec, node)
        if spec.public_ip:
            ensure_public_ip(self._ec2(), spec, instance)
            return self.get(node.id)
        return node

    def _gone(self, spec: NodeSpec, node: Node) -> Node:
        """``node``, the key's instance, is gone. One EC2 terminated at launch for its KMS key is an error while
        the key is still unusable; one that died otherwise (or an earlier launch's) is returned as gone."""
        reason = str(node.extra.get("state_reason") or (self.get(node.id).extra.get("state_reason")
                                                        if node.id.startswith("i-") else "") or "")
        if "InvalidKMSKey" in reason:
            # EC2 took the launch and terminated it at once. A key that is usable now means the gone
            # instance is an earlier launch's (this key's replay): the caller steps to a new generation.
            problem = self._kms_keys.problem(spec, fresh=True, strict=True)
            if problem is not None:
                raise problem
        return node

    def _gone_unlisted(self, spec: NodeSpec, exc: ConflictError) -> Node:
        """The key bought an instance EC2 says is terminated but no longer lists (terminated instances stay
        visible for about an hour): a gone node standing for it, so the caller steps to the next generation."""
        return Node(id=f"terminated:{spec.idempotency_key}", provider=PROVIDER, region=self.region,
                    state=NodeState.TERMINATED, offering=spec.offering, zone=spec.zone, name=spec.name,
                    extra={"idempotency_key": spec.idempotency_key, "state_reason": f"{exc.code}: {exc}"})

    def _explain_capacity_block(self, reservation_id: str, exc: MetalfleetError) -> None:
        """A Capacity Block takes no launch until it starts: say so, naming its start and end."""
        try:
            with boundary("DescribeCapacityReservations"):
                found = self._ec2().describe_capacity_reservations(CapacityReservationIds=[reservation_id])
        except MetalfleetError:
            return
        for cr in found.get("CapacityReservations", []):
            if cr.get("State") == "scheduled":
                raise InvalidSpecError(
                    f"Capacity Block {reservation_id} is scheduled: it starts at {cr.get('StartDate')} and ends at "
                    f"{cr.get('EndDate')}; instances can be launched into it from its start",
                    field="capacity.reservation_id", value=reservation_id, provider=PROVIDER, code=exc.code,
                    request_id=exc.request_id) from exc

    # -- observe ---------------------------------------------------------------------------
    def get(self, node_id: str, *, host_keys: bool = False) -> Node:
        """The instance as EC2 describes it now. ``host_keys``: also read its console for the SSH host keys
        when it runs and this driver has not read them yet (one GetConsoleOutput call)."""
        return self._observer.get(node_id, host_keys=host_keys)

    def host_keys(self, node_id: str) -> tuple[str, ...]:
        """The SSH host keys the instance printed to its console at boot (cloud-init's
        ``-----BEGIN SSH HOST KEY KEYS-----`` block); () while the console has none: on AWS the console
        output lags the boot by minutes, and bootstrap then verifies hosts by known_hosts instead."""
        return self._observer.host_keys(node_id)

    def list_nodes(self, cluster: str) -> list[Node]:
        return self._observer.list_nodes(cluster)

    # -- tags ------------------------------------------------------------------------------
    def set_tags(self, node_id: str, tags: Mapping[str, str]) -> None:
        """Add or overwrite ``tags`` on the instance (its other tags are kept); NotFoundError for an
        unknown instance. Only the instance is tagged, not its volumes or interfaces."""
        pairs = {str(k): str(v) for k, v in tags.items()}
        # EC2's own rules (CreateTags takes any character): the gate's reason tag is free text
        check_tags(pairs, portable=False, count=False)
        if not pairs:
            self.get(node_id)  # nothing to write, but an unknown instance is still an error
            return
        with boundary("CreateTags"):
            self._ec2().create_tags(Resources=[node_id], Tags=[{"Key": k, "Value": v} for k, v in pairs.items()])
        self._observer.retag(node_id, pairs)

    # -- release ---------------------------------------------------------------------------
    def release(self, node_id: str, *, wait: bool = True, timeout: float = 1800.0, unsubscribe: bool = False) -> None:
        try:
            node = step(self.get, node_id)
        except NotFoundError:
            return  # EC2 forgets terminated instances after a while: gone is gone
        if node.state != NodeState.TERMINATED:
            try:
                with boundary("TerminateInstances"):
                    step(self._ec2().terminate_instances, InstanceIds=[node_id])
            except NotFoundError:
                return
            if wait:
                self.wait([node_id], NodeState.TERMINATED, timeout=timeout)
        release_public_ip(self._ec2(), node)

    # -- cluster resources (ClusterResourcesDriver) ----------------------------------------
    def prepare_cluster(self, spec: NodeSpec) -> list[str]:
        """Make (or find, and bring in line with the spec) what the cluster's nodes share: its placement
        group and, unless the spec names its own groups, its security group with the spec's SSH rules.
        Returns :meth:`cluster_resources`. Ordering a node does the same on its own; this lets a stack
        make them first, as a resource its nodes depend on (so they are deleted after the nodes)."""
        self.validate(spec)
        self._nets.network(spec)
        return self.cluster_resources(spec.cluster)

    def cluster_resources(self, cluster: str) -> list[str]:
        """What metalfleet made for ``cluster`` and is still there, as ``security-group:<id>`` and
        ``placement-group:<name>``: the groups tagged ``metalfleet:cluster=<cluster>`` (only groups this
        driver created carry that tag; a group the spec names is never tagged, so never listed)."""
        return cluster_resources(self._ec2(), cluster)

    def release_cluster_resources(self, cluster: str, *, timeout: float = 600.0) -> list[str]:
        """Delete what :meth:`cluster_resources` lists, once ``cluster`` has no live node (while it has one,
        they are in use: nothing is deleted and [] returned). Returns what was deleted.

        Right after its instances terminate, EC2 may still hold their interfaces for a while: a group still
        in use (DependencyViolation, InvalidPlacementGroup.InUse) is retried until ``timeout``."""
        if step(self.list_nodes, cluster):
            return []
        self._nets.forget(cluster)  # made again if ordered again
        return delete_cluster_resources(self._ec2(), cluster, timeout=timeout, poll=self.poll)
