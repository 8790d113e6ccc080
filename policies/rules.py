"""The rule set: pure functions over the neutral view (:mod:`metalfleet.policies.model`).

A rule is data (id, title, severity, rationale, remediation, framework mapping, parameters with their
defaults) plus a ``check(resource, ctx)`` that yields :class:`Violation`\\ s. Checks never read provider
attribute names and never decide enforcement: the engine applies enforcement levels, the ``unknown``
setting and suppressions, so the CLI and the CrossGuard pack judge alike.

Framework references: ISO/IEC 27001:2022 Annex A controls; AICPA SOC 2 Trust Services Criteria (2017,
points of focus revised 2022); China MLPS 2.0 level 3, GB/T 22239-2019 clause 8.1 (general requirements
for level 3); CIS Amazon Web Services Foundations Benchmark v3.0.0 where an AWS recommendation exists.
The mapping says which control a rule gives evidence for; it is no certification.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

import msgspec

from .model import (
    UNKNOWN,
    Address,
    BmcEndpoint,
    ComputeNode,
    Location,
    Reservation,
    Resource,
    SecurityRule,
    Storage,
    Volume,
)

__all__ = ["FRAMEWORKS", "RULES", "SEVERITY_SCORE", "Param", "Rule", "RuleContext", "Severity", "Violation", "rule"]

Severity = Literal["critical", "high", "medium", "low"]
Enforcement = Literal["mandatory", "advisory", "disabled"]

#: SARIF ``security-severity`` per severity (GitHub code scanning: >= 9.0 critical, 7.0-8.9 high, 4.0-6.9
#: medium, 0.1-3.9 low).
SEVERITY_SCORE: Mapping[str, str] = {"critical": "9.5", "high": "8.0", "medium": "5.5", "low": "3.0"}

FRAMEWORKS: Mapping[str, str] = {
    "iso27001": "ISO/IEC 27001:2022 Annex A",
    "soc2": "SOC 2 (TSC 2017, rev. 2022)",
    "mlps": "MLPS 2.0 level 3 (GB/T 22239-2019)",
    "cis_aws": "CIS AWS Foundations Benchmark v3.0.0",
}


class Violation(msgspec.Struct, frozen=True, gc=False):
    """One thing wrong with one resource. ``unknown``: the deciding value is unknown, not known bad."""

    message: str
    location: Location | None = None
    unknown: bool = False


@dataclass(frozen=True)
class Param:
    type: Literal["boolean", "integer", "string", "array", "object", "date"]
    default: Any
    description: str


@dataclass(frozen=True)
class RuleContext:
    params: Mapping[str, Any]
    today: date
    #: What a check derives from its parameters once per run (compiled patterns), not once per resource.
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __getitem__(self, key: str) -> Any:
        return self.params[key]


Check = Callable[[Any, RuleContext], Iterator[Violation]]


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    title: str
    severity: Severity
    kinds: tuple[str, ...]
    rationale: str
    remediation: str
    frameworks: Mapping[str, tuple[str, ...]]
    check: Check
    enforcement: Enforcement = "mandatory"
    params: Mapping[str, Param] = field(default_factory=dict)

    def defaults(self) -> dict[str, Any]:
        return {k: p.default for k, p in self.params.items()}


RULES: dict[str, Rule] = {}


def rule(**meta: Any) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        r = Rule(check=fn, **meta)
        if r.id in RULES:
            raise ValueError(f"rule {r.id} defined twice")
        RULES[r.id] = r
        return fn

    return register


# ------------------------------------------------------------------------------------------ helpers


def _unknown(what: str, res: Resource, attribute: str) -> Violation:
    return Violation(f"{what} of {res.name} is unknown{res.note(attribute)}; it cannot be shown to comply",
                     res.where(attribute), unknown=True)


#: Address space that is never reachable from the internet. Everything else counts as public (documentation
#: ranges too: a rule that has to guess fails closed).
_INTERNAL = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
    "fc00::/7", "fe80::/10", "::1/128"))


def is_public_address(text: str) -> bool | None:
    """False for an internal (RFC 1918, CGNAT, ULA, loopback, link-local) address or network, True for any other
    address, None for a host name (which cannot be judged without DNS)."""
    try:
        net = ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        return None
    return not any(net.version == n.version and net.subnet_of(n) for n in _INTERNAL)  # type: ignore[arg-type]


def _world(cidr: str) -> bool:
    """0.0.0.0/0, ::/0 or any prefix that wide (a /0 under another spelling)."""
    try:
        net = ipaddress.ip_network(cidr.strip(), strict=False)
    except ValueError:
        return cidr.strip() in ("*", "any", "Any", "ANY")
    return net.prefixlen == 0


def _covers(rule_: SecurityRule, port: int) -> bool | None:
    if rule_.protocol is UNKNOWN or rule_.port_from is UNKNOWN or rule_.port_to is UNKNOWN:
        return None
    proto = str(rule_.protocol).lower()
    if proto not in ("all", "tcp", "-1", "6"):
        return False
    return int(rule_.port_from) <= port <= int(rule_.port_to)


def _ports(r: SecurityRule) -> str:
    if r.protocol is UNKNOWN or r.port_from is UNKNOWN or r.port_to is UNKNOWN:
        return "unknown ports"
    if str(r.protocol).lower() in ("all", "-1"):
        return "all protocols and ports"
    if (r.port_from == 0 and r.port_to == 65535) or (r.port_from == 1 and r.port_to == 65535):
        return f"all {r.protocol} ports"
    if r.port_from == r.port_to:
        return f"{r.protocol} port {r.port_from}"
    return f"{r.protocol} ports {r.port_from}-{r.port_to}"


ISO_CRYPTO = ("A.8.24 Use of cryptography",)
ISO_NET = ("A.8.20 Networks security", "A.8.22 Segregation of networks")


# ------------------------------------------------------------------------------------------ encryption at rest


@rule(id="MF-ENC-001", name="volume-encrypted", title="Block volumes are encrypted at rest", severity="high",
      kinds=("volume",),
      rationale="GPU nodes hold model weights, checkpoints and training data on their root and data volumes; an "
                "unencrypted volume, or a snapshot of it, exposes them to anyone who obtains the storage. Provider "
                "defaults differ and are often 'off' (an AWS root block device without `encrypted` is "
                "unencrypted unless the account turned on EBS encryption by default).",
      remediation="Set encryption on every root, data and launch-template volume (spec: storage.*.encrypted: true; "
                  "AWS: encrypted = true; Alibaba: system_disk_encrypted / data_disks.encrypted; Huawei: a KMS key "
                  "(kms_id / kms_key_id)), or turn on account-level default encryption and say so in the policy "
                  "config (aws.ebs_encryption_by_default: true).",
      frameworks={"iso27001": ISO_CRYPTO, "soc2": ("CC6.1",),
                  "mlps": ("8.1.4.8 Data confidentiality (数据保密性) b",),
                  "cis_aws": ("2.2.1 Ensure EBS volume encryption is enabled in all regions",)})
def _volume_encrypted(v: Volume, ctx: RuleContext) -> Iterator[Violation]:
    if v.encrypted is UNKNOWN:
        yield _unknown("encryption", v, "encrypted")
    elif not v.encrypted:
        yield Violation(f"{v.name} is not encrypted{v.note('encrypted')}", v.where("encrypted"))


@rule(id="MF-ENC-002", name="volume-customer-key", title="Encrypted volumes use a customer-managed key",
      severity="medium", kinds=("volume",), enforcement="advisory",
      rationale="With the provider-managed default key anyone allowed to use the service in the account can read a "
                "copy of the volume; a customer-managed key adds a key policy, rotation and revocation you control. "
                "Many regulated workloads require it, so the rule is advisory by default and made mandatory where "
                "required.",
      remediation="Name a KMS key: spec storage.kms_key_id (or a volume's kms_key_id); AWS kms_key_id; Alibaba "
                  "system_disk_kms_key_id / data_disks.kms_key_id; Huawei kms_id / system_disk_kms_key_id.",
      frameworks={"iso27001": ("A.8.24 Use of cryptography",), "soc2": ("CC6.1",),
                  "mlps": ("8.1.4.8 Data confidentiality (数据保密性) b",)})
def _customer_key(v: Volume, ctx: RuleContext) -> Iterator[Violation]:
    if v.encrypted is UNKNOWN or v.encrypted is False:
        return  # MF-ENC-001 reports it
    if v.kms_key is UNKNOWN:
        yield _unknown("the encryption key", v, "kms_key")
    elif v.kms_key is None or v.provider_managed_key:
        key = "the provider-managed default key" if v.kms_key is None else f"the provider-managed key {v.kms_key}"
        yield Violation(f"{v.name} is encrypted with {key}, not a customer-managed key"
                        f"{v.note('kms_key')}", v.where("kms_key"))


@rule(id="MF-ENC-003", name="storage-encrypted", title="Storage tiers (buckets, parallel file systems) are encrypted",
      severity="high", kinds=("storage",),
      rationale="Datasets and checkpoints live in the warm and cold tiers longer than on any node. metalfleet only "
                "mounts them, so a spec cannot show their encryption: it is unknown until the policy config "
                "declares where it is known (a store made and checked elsewhere).",
      remediation="Encrypt the bucket or file system where it is made (S3/OSS/OBS server-side encryption, FSx for "
                  "Lustre / CPFS / SFS Turbo with a KMS key) and list it under the rule's known_encrypted "
                  "(globs such as 's3://datasets-*').",
      frameworks={"iso27001": ISO_CRYPTO, "soc2": ("CC6.1",), "mlps": ("8.1.4.8 Data confidentiality (数据保密性) b",)},
      params={"known_encrypted": Param("array", [], "globs of storage targets known to be encrypted, e.g. "
                                       "'s3://datasets-*' or 'fs-0123*'")})
def _storage_encrypted(s: Storage, ctx: RuleContext) -> Iterator[Violation]:
    if any(fnmatch.fnmatchcase(s.target, str(g)) for g in ctx["known_encrypted"]):
        return
    if s.encrypted is UNKNOWN:
        yield _unknown(f"encryption of {s.storage_kind} {s.target}", s, "encrypted")
    elif not s.encrypted:
        yield Violation(f"{s.storage_kind} {s.target} ({s.name}) is not encrypted{s.note('encrypted')}",
                        s.where("encrypted"))


# ------------------------------------------------------------------------------------------ transit and access


@rule(id="MF-TRN-001", name="bmc-secure-transport", title="BMC access is encrypted: IPMI lanplus with a strong "
      "cipher suite, or Redfish over verified TLS", severity="high", kinds=("bmc",),
      rationale="The BMC can power, re-image and read the console of a server. IPMI 1.5 ('lan') and RMCP+ cipher "
                "suites 0-2 send commands without confidentiality (suite 0 without authentication); Redfish over "
                "plain HTTP or with certificate checks off gives the BMC password to anyone on the path.",
      remediation="IPMI: use lanplus with cipher suite 17 (or 3); Redfish: an https:// address with verify_tls left "
                  "on (give ca_bundle for a private CA).",
      frameworks={"iso27001": ("A.5.14 Information transfer", "A.8.20 Networks security", "A.8.5 Secure "
                               "authentication"),
                  "soc2": ("CC6.7", "CC6.1"),
                  "mlps": ("8.1.2.2 Communication transmission (通信传输)", "8.1.4.1 Identification and "
                           "authentication (身份鉴别) c")},
      params={"ipmi_cipher_suites": Param("array", [3, 17], "RMCP+ cipher suites allowed (3: SHA1 + AES-128, "
                                          "17: SHA256 + AES-128)")})
def _bmc_transport(b: BmcEndpoint, ctx: RuleContext) -> Iterator[Violation]:
    if b.protocol is UNKNOWN:
        yield _unknown("the BMC protocol", b, "protocol")
        return
    if b.protocol == "ipmi":
        if b.lanplus is UNKNOWN:
            yield _unknown("the IPMI interface", b, "lanplus")
        elif b.lanplus is False:
            yield Violation(f"BMC of {b.host} uses IPMI 1.5 'lan' (no encryption){b.note('lanplus')}",
                            b.where("lanplus"))
        allowed = {int(x) for x in ctx["ipmi_cipher_suites"]}
        if b.cipher_suite is UNKNOWN:
            yield _unknown("the IPMI cipher suite", b, "cipher_suite")
        elif b.cipher_suite is not None and int(b.cipher_suite) not in allowed:
            yield Violation(f"BMC of {b.host} uses IPMI cipher suite {b.cipher_suite}{b.note('cipher_suite')}; "
                            f"allowed: {', '.join(str(s) for s in sorted(allowed))}", b.where("cipher_suite"))
    elif b.protocol == "redfish":
        if b.tls is UNKNOWN:
            yield _unknown("whether Redfish uses TLS", b, "tls")
        elif b.tls is False:
            yield Violation(f"BMC of {b.host} speaks Redfish over plain HTTP", b.where("tls"))
        if b.verify_tls is UNKNOWN:
            yield _unknown("certificate verification", b, "verify_tls")
        elif b.verify_tls is False:
            yield Violation(f"BMC of {b.host}: Redfish TLS certificate verification is off", b.where("verify_tls"))
    else:
        yield Violation(f"BMC of {b.host} uses protocol {b.protocol!r}, neither ipmi nor redfish", b.where("protocol"))


@rule(id="MF-TRN-002", name="ssh-host-key-verification", title="SSH verifies host keys",
      severity="high", kinds=("compute",),
      rationale="Bootstrap and acceptance log in to every node as a privileged user. Accepting an unseen host key "
                "(trust on first use) or turning verification off lets a machine in the path impersonate the node "
                "and receive the keys, data and commands meant for it.",
      remediation="Leave ssh.pin_on_first_contact off: on AWS host keys are pinned from the console; elsewhere list "
                  "them in known_hosts (or host_keys in an inventory) before the first contact.",
      frameworks={"iso27001": ("A.8.5 Secure authentication", "A.8.20 Networks security"), "soc2": ("CC6.1", "CC6.7"),
                  "mlps": ("8.1.4.1 Identification and authentication (身份鉴别) c",
                           "8.1.2.2 Communication transmission (通信传输)")})
def _ssh_host_keys(n: ComputeNode, ctx: RuleContext) -> Iterator[Violation]:
    v = n.ssh_host_key_verification
    if v is None:
        return
    if v is UNKNOWN:
        yield _unknown("SSH host-key verification", n, "ssh_host_key_verification")
    elif not v:
        yield Violation(f"SSH to {n.name} accepts host keys it has never seen{n.note('ssh_host_key_verification')}",
                        n.where("ssh_host_key_verification"))


# ------------------------------------------------------------------------------------------ network isolation


@rule(id="MF-NET-001", name="no-public-address", title="GPU nodes have no public address", severity="high",
      kinds=("compute", "address"),
      rationale="A GPU node with a public address is one security-group mistake away from the internet, and its "
                "NCCL, SSH and metadata services were not built for that. Training nodes are reached through a "
                "bastion, a VPN or a private link.",
      remediation="Spec: network.public_ip: false. AWS: associate_public_ip_address = false and no aws_eip on the "
                  "node; Alibaba: internet_max_bandwidth_out = 0 and no EIP association; Huawei: no eip_id / "
                  "iptype / bandwidth on the BMS and no EIP association. Set the rule's allow: true only for a "
                  "stack that must be public, with a suppression's reason where it is one node.",
      frameworks={"iso27001": ISO_NET, "soc2": ("CC6.6",),
                  "mlps": ("8.1.3.1 Boundary protection (边界防护)", "8.1.2.1 Network architecture (网络架构)")},
      params={"allow": Param("boolean", False, "allow public addresses on GPU nodes"),
              "gpu_only": Param("boolean", True, "judge only nodes that are (or may be) GPU nodes: a type known not "
                                "to be one (t3.micro, ecs.g7) is left alone; a type metalfleet does not know, or "
                                "one unknown at plan time, is judged, and the finding says so")})
def _no_public(r: ComputeNode | Address, ctx: RuleContext) -> Iterator[Violation]:
    if ctx["allow"]:
        return
    if isinstance(r, Address):
        if r.attached_to is UNKNOWN:
            yield _unknown("what public address " + r.name + " is bound to", r, "attached_to")
        elif r.attached_to is not None:
            yield Violation(f"public address {r.name} is bound to {r.attached_to}{r.note('attached_to')}",
                            r.where("attached_to"))
        return
    if r.public_ip is None or (ctx["gpu_only"] and r.gpu is False):
        return
    why = _judged_as_gpu(r) if ctx["gpu_only"] and r.gpu is UNKNOWN else ""
    if r.public_ip is UNKNOWN:
        v = _unknown("whether it gets a public address", r, "public_ip")
        yield Violation(v.message + why, v.location, unknown=True) if why else v
    elif r.public_ip:
        yield Violation(f"{r.name} gets a public address{r.note('public_ip')}{why}", r.where("public_ip"))


def _judged_as_gpu(n: ComputeNode) -> str:
    """Why gpu_only did not skip a node: its type is not one metalfleet knows (fail closed: it may be a GPU node).
    Adapters know a type from the offering catalogue's GPU types and the providers' instance families; only a
    type known not to carry accelerators is skipped."""
    t = n.instance_type
    if t is UNKNOWN:
        return "; judged as a possible GPU node: its instance type is unknown at plan time"
    if not t:
        return "; judged as a possible GPU node: it names no instance type"
    return (f"; judged as a possible GPU node: instance type {t} is unknown to metalfleet's offering catalogue and "
            "instance families (neither GPU nor known non-GPU)")


def _world_sources(r: SecurityRule) -> list[str] | None:
    if r.sources is UNKNOWN:
        return None
    return [s for s in r.sources if _world(s)]


@rule(id="MF-NET-002", name="no-world-ssh", title="No SSH ingress from 0.0.0.0/0 or ::/0", severity="critical",
      kinds=("security_rule",),
      rationale="SSH open to the internet is scanned within minutes of launch; a leaked or weak key then gives a "
                "privileged shell on a GPU node.",
      remediation="Allow SSH only from the controller's or bastion's network (spec: network.ssh_ingress_cidrs), "
                  "never 0.0.0.0/0 or ::/0. On Huawei an empty remote_ip_prefix means every address.",
      frameworks={"iso27001": ISO_NET, "soc2": ("CC6.6",),
                  "mlps": ("8.1.3.2 Access control (访问控制)", "8.1.3.1 Boundary protection (边界防护)"),
                  "cis_aws": ("5.2 No security groups allow ingress from 0.0.0.0/0 to remote server administration "
                              "ports", "5.3 No security groups allow ingress from ::/0 to remote server "
                              "administration ports")})
def _world_ssh(r: SecurityRule, ctx: RuleContext) -> Iterator[Violation]:
    if r.direction != "ingress" or r.action != "allow":
        return
    world = _world_sources(r)
    covers = _covers(r, r.ssh_port)
    if world is None:
        if covers is not False:
            yield _unknown("the source of ingress rule", r, "sources")
        return
    if not world:
        return
    if covers is None:
        yield _unknown(f"the ports of ingress rule open to {', '.join(world)}", r, "ports")
    elif covers:
        yield Violation(f"{r.name} lets {', '.join(world)} reach SSH (port {r.ssh_port}) with {_ports(r)}"
                        f"{r.note('sources')}", r.where("sources"))


@rule(id="MF-NET-003", name="no-world-ingress", title="No ingress from 0.0.0.0/0 or ::/0 to any port",
      severity="high", kinds=("security_rule",),
      rationale="GPU nodes run services (NCCL, metrics exporters, Jupyter, Ray) that assume a trusted network; any "
                "port open to the world exposes them.",
      remediation="Restrict the rule's source to known networks, or put public endpoints behind a load balancer; "
                  "list a port that must be public (e.g. 443 on an inference gateway) under allowed_ports.",
      frameworks={"iso27001": ISO_NET, "soc2": ("CC6.6",),
                  "mlps": ("8.1.3.2 Access control (访问控制)", "8.1.3.1 Boundary protection (边界防护)")},
      params={"allowed_ports": Param("array", [], "ports that may be open to the world")})
def _world_ingress(r: SecurityRule, ctx: RuleContext) -> Iterator[Violation]:
    if r.direction != "ingress" or r.action != "allow" or r.load_balancer is not None:
        return  # a load balancer's own group is the remediation's public endpoint, not a node's exposure
    world = _world_sources(r)
    if world is None:
        yield _unknown("the source of ingress rule", r, "sources")
        return
    if not world:
        return
    if r.protocol is UNKNOWN or r.port_from is UNKNOWN or r.port_to is UNKNOWN:
        yield _unknown(f"the ports of ingress rule open to {', '.join(world)}", r, "ports")
        return
    only_ssh = (str(r.protocol).lower() in ("tcp", "6") and r.port_from == r.port_to == r.ssh_port)
    allowed = {int(p) for p in ctx["allowed_ports"]}
    if only_ssh or (r.port_from == r.port_to and int(r.port_from) in allowed
                    and str(r.protocol).lower() not in ("all", "-1")):
        return
    yield Violation(f"{r.name} lets {', '.join(world)} reach {_ports(r)}{r.note('sources')}", r.where("sources"))


@rule(id="MF-NET-004", name="bmc-management-network", title="BMC addresses are on a management network, never "
      "public", severity="critical", kinds=("bmc",),
      rationale="A BMC on a routable address is a full remote takeover path (power, virtual media, console) guarded "
                "only by its own, rarely patched, web and IPMI stacks.",
      remediation="Put BMCs on a separate management network (RFC 1918 / ULA) reached through a jump host; list its "
                  "CIDRs under management_cidrs to pin them.",
      frameworks={"iso27001": ("A.8.22 Segregation of networks", "A.8.20 Networks security"), "soc2": ("CC6.6",),
                  "mlps": ("8.1.2.1 Network architecture (网络架构)", "8.1.3.1 Boundary protection (边界防护)")},
      params={"management_cidrs": Param("array", [], "CIDRs of the management network (empty: any private "
                                        "address)")})
def _bmc_network(b: BmcEndpoint, ctx: RuleContext) -> Iterator[Violation]:
    if b.address is UNKNOWN:
        yield _unknown("the BMC address", b, "address")
        return
    address = str(b.address)
    nets = [ipaddress.ip_network(str(c), strict=False) for c in ctx["management_cidrs"]]
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        yield Violation(f"BMC of {b.host} is named by host name {address!r}: whether it is on the management "
                        "network cannot be judged; give its address", b.where("address"), unknown=True)
        return
    if is_public_address(address):
        yield Violation(f"BMC of {b.host} has the public address {address}", b.where("address"))
    elif nets and not any(ip in n for n in nets if n.version == ip.version):
        yield Violation(f"BMC of {b.host} ({address}) is outside the management network "
                        f"{', '.join(str(n) for n in nets)}", b.where("address"))


@rule(id="MF-NET-005", name="imds-tokens-required", title="Instance metadata requires session tokens (IMDSv2 / "
      "http_tokens = required)", severity="high", kinds=("compute",),
      rationale="With tokens optional, a server-side request forgery in any service on the node (a notebook, a "
                "model server) reads the instance's credentials from the metadata service.",
      remediation="AWS: metadata_options { http_tokens = \"required\" } (instance, launch template and launch "
                  "configuration), or http_endpoint = \"disabled\" where nothing on the node needs metadata (no "
                  "service to reach: the rule passes); Alibaba: "
                  "http_tokens = \"required\"; Huawei: the BMS metadata options API (http_tokens=required) where the "
                  "region offers it. metalfleet's AWS driver always requires tokens.",
      frameworks={"iso27001": ("A.8.9 Configuration management", "A.8.5 Secure authentication"),
                  "soc2": ("CC6.1", "CC6.6"), "mlps": ("8.1.4.4 Intrusion prevention (入侵防范)",),
                  "cis_aws": ("5.6 Ensure that EC2 Metadata Service only allows IMDSv2",)})
def _imds(n: ComputeNode, ctx: RuleContext) -> Iterator[Violation]:
    v = n.metadata_tokens_required
    if v is None:
        return
    if v is UNKNOWN:
        yield _unknown("whether instance metadata requires tokens", n, "metadata_tokens_required")
    elif not v:
        yield Violation(f"{n.name} serves instance metadata without session tokens (IMDSv1)"
                        f"{n.note('metadata_tokens_required')}", n.where("metadata_tokens_required"))


# ------------------------------------------------------------------------------------------ tags


_DEFAULT_TAGS = {"owner": ".+", "cost-center": ".+"}


def _tag_checks(ctx: RuleContext) -> list[tuple[str, Callable[[str], Any], str]]:
    """Per required key: a test of its value (a list of allowed values or a regular expression that must match
    the whole value) and how to show what is allowed; compiled once per run."""
    found = ctx.memo.get("required")
    if found is None:
        found = ctx.memo["required"] = []
        for key, allowed in dict(ctx["required"]).items():
            if isinstance(allowed, list | tuple):
                found.append((key, frozenset(str(a) for a in allowed).__contains__,
                              ", ".join(str(a) for a in allowed)))
            else:
                found.append((key, re.compile(str(allowed)).fullmatch, str(allowed)))
    return found


@rule(id="MF-TAG-001", name="required-tags", title="Compliance tags are set on nodes and their volumes",
      severity="medium", kinds=("compute", "volume"),
      rationale="GPU capacity is the largest line on the bill; without an owner and a cost centre on every node "
                "and volume, spend cannot be charged back and an abandoned node has nobody to ask.",
      remediation="Add the required tags (default: owner, cost-center) to the spec's tags (metalfleet copies them "
                  "to volumes) or to the instance and its volume_tags / root_block_device.tags. The rule's "
                  "required maps each key to a regular expression the value must match, or to a list of allowed "
                  "values.",
      frameworks={"iso27001": ("A.5.9 Inventory of information and other associated assets",),
                  "soc2": ("CC6.1",), "mlps": ("8.1.10.2 Asset management (资产管理)",)},
      params={"required": Param("object", _DEFAULT_TAGS, "tag key -> regular expression or list of allowed "
                                "values")})
def _tags(r: ComputeNode | Volume, ctx: RuleContext) -> Iterator[Violation]:
    if r.tags is None:
        return
    if r.tags is UNKNOWN:
        yield _unknown("the tags", r, "tags")
        return
    tags = r.tags
    checks = _tag_checks(ctx)
    missing = [k for k, _, _ in checks if k not in tags]
    if missing:
        yield Violation(f"{r.name} lacks required tag(s) {', '.join(missing)}{r.note('tags')}", r.where("tags"))
    for key, ok, shown in checks:
        if key in tags and not ok(str(tags[key])):
            yield Violation(f"{r.name}: tag {key}={tags[key]!r} is not allowed ({shown})", r.where("tags"))


# ------------------------------------------------------------------------------------------ advisory


@rule(id="MF-ADV-001", name="placement-group", title="Multi-node training runs in a cluster placement group / "
      "deployment set", severity="low", kinds=("compute",), enforcement="advisory",
      rationale="NCCL all-reduce across nodes loses much of its bandwidth when nodes land on distant racks; a "
                "cluster placement group (AWS), deployment set (Alibaba) or server group keeps them close.",
      remediation="Spec: placement.strategy: cluster (the default). AWS: placement_group on each instance; Alibaba: "
                  "deployment_set_id; Huawei: scheduler_hints.group.",
      frameworks={"iso27001": ("A.8.6 Capacity management",), "soc2": ("A1.1",)},
      params={"min_nodes": Param("integer", 2, "node count from which a placement group is advised")})
def _placement(n: ComputeNode, ctx: RuleContext) -> Iterator[Violation]:
    if n.placement_group is None or n.count < int(ctx["min_nodes"]) or n.gpu is False:
        return
    if n.placement_group is UNKNOWN:
        yield _unknown("the placement group", n, "placement_group")
    elif n.placement_group == "":
        yield Violation(f"{n.name}: {n.count} nodes without a placement group or deployment set"
                        f"{n.note('placement_group')}", n.where("placement_group"))


@rule(id="MF-ADV-002", name="capacity-outlasts-run", title="Capacity reservations and blocks last until the "
      "planned run ends", severity="low", kinds=("reservation",), enforcement="advisory",
      rationale="A Capacity Block or time-bound reservation that ends before the training run does stops the "
                "nodes mid-run (AWS terminates instances in a Capacity Block at its end).",
      remediation="Extend or buy a longer block, or move the planned end (the rule's planned_run_end).",
      frameworks={"iso27001": ("A.8.6 Capacity management",), "soc2": ("A1.1",)},
      params={"planned_run_end": Param("date", None, "the date the planned run ends (YYYY-MM-DD); unset: the rule "
                                       "only reports reservations that already ended")})
def _capacity(r: Reservation, ctx: RuleContext) -> Iterator[Violation]:
    end: Any = ctx["planned_run_end"]
    run_end = date.fromisoformat(str(end)) if end else ctx.today
    if r.ends is UNKNOWN:
        if end:
            yield _unknown("the end of capacity reservation", r, "ends")
        return
    if r.ends is not None and r.ends < run_end:
        yield Violation(f"{r.name} ends {r.ends.isoformat()}, before the planned run ends {run_end.isoformat()}",
                        r.where("ends"))


# ------------------------------------------------------------------------------------------ suppressions


@rule(id="MF-SUP-001", name="suppression-has-reason", title="Every suppression names its rule and a reason",
      severity="medium", kinds=(),
      rationale="A suppression without a reason cannot be reviewed or expired, and hides a finding from every later "
                "reader; it is treated as no suppression at all.",
      remediation="Give each suppression a rule id, a reason and (advised) an expiry date.",
      frameworks={"iso27001": ("A.5.36 Compliance with policies, rules and standards for information security",),
                  "soc2": ("CC8.1",)})
def _suppression_reason(_: Resource, ctx: RuleContext) -> Iterator[Violation]:  # judged by the engine
    return iter(())


@rule(id="MF-SUP-002", name="suppressed-findings-listed", title="Suppressed findings stay visible",
      severity="low", kinds=(), enforcement="advisory",
      rationale="A suppression accepts a risk; it must stay in view of every reviewer. Reports list suppressions in "
                "their own section; in a Pulumi preview the CrossGuard pack reports each suppressed finding (and each "
                "expired suppression) as an advisory violation of this rule.",
      remediation="Nothing to fix: review the listed suppressions and their expiry dates.",
      frameworks={"iso27001": ("A.5.36 Compliance with policies, rules and standards for information security",),
                  "soc2": ("CC8.1",)})
def _suppressions_listed(_: Resource, ctx: RuleContext) -> Iterator[Violation]:  # the pack's report, not a check
    return iter(())


def ordered(rules: Sequence[Rule] | None = None) -> list[Rule]:
    return sorted(rules if rules is not None else RULES.values(), key=lambda r: r.id)
