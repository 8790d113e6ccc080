"""Engine pieces without SSH: batch framing (run by a local sh), facts on real captures, inventory,
profiles and overrides, the tuning reference, report and progress output, the public API."""

from __future__ import annotations

import hashlib
import io
import subprocess
from pathlib import Path
from typing import Any

import pytest

import metalfleet.bootstrap as mb
from metalfleet.bootstrap.facts import (
    BlockDevices,
    FiProviders,
    IbStat,
    MdStat,
    NvidiaSmi,
    SystemdUnits,
)
from metalfleet.bootstrap.inventory import hosts_from_spec, parse_inventory
from metalfleet.bootstrap.profiles import get_profile, order_steps, profile_for_spec
from metalfleet.bootstrap.progress import ProgressEvent, TerminalProgress
from metalfleet.bootstrap.report import HostReport, HostStatus, Report, StepResult, StepStatus
from metalfleet.bootstrap.runner import select_hosts
from metalfleet.bootstrap.script import (
    BatchItem,
    batch_script,
    fact_script,
    new_token,
    parse_batch_output,
    parse_fact_output,
)
from metalfleet.bootstrap.steps import nccl_tuning
from metalfleet.providers import InvalidSpecError, Node, NodeState, parse_spec
from metalfleet.providers.models import Fabric
from metalfleet.testing.hosts.harness import FIXTURES

REPO = Path(__file__).resolve().parents[2]


def _sh(script: str, stdin: bytes = b"") -> tuple[int, str]:
    res = subprocess.run(["sh", "-c", script], input=stdin, capture_output=True)
    return res.returncode, res.stdout.decode()


# -- batch framing --------------------------------------------------------------------------


def test_fact_script_returns_each_output_byte_for_byte() -> None:
    token = new_token()
    cmds = [["printf", "%s", "no newline"], ["echo", token + " 5"], ["sh", "-c", "echo x; exit 3"], ["true"],
            ["definitely-not-a-command"], ["printf", "a\\n\\n"]]
    rc, out = _sh(fact_script(cmds, token))
    assert rc == 0
    assert parse_fact_output(out, token, len(cmds)) == [
        ("no newline", 0), (token + " 5\n", 0), ("x\n", 3), ("", 0), ("", 127), ("a\n\n", 0)]


def test_batch_script_stops_at_the_first_failure_and_checks_uploads(tmp_path: Path) -> None:
    token = new_token()
    good, torn = b"hello world\n", b"0123456789"
    target = tmp_path / "deep" / "dir" / "f.txt"
    items = [
        BatchItem(upload=(str(target), len(good), hashlib.sha256(good).hexdigest(), "0640")),
        BatchItem(argv=("sh", "-c", "echo to-stderr >&2; exit 2"), ok_codes=(0, 2)),
        BatchItem(argv=("cat",)),  # reads /dev/null, never the upload stream
        BatchItem(upload=(str(tmp_path / "g"), len(torn), "0" * 64, "0600")),
        BatchItem(argv=("touch", str(tmp_path / "never"))),
    ]
    rc, out = _sh(batch_script(items, token), good + torn)
    results = parse_batch_output(out, token)
    assert rc == 97
    assert [(r.index, r.rc) for r in results] == [(0, 0), (1, 2), (2, 0), (3, 86)]
    assert results[1].output == "to-stderr\n"
    assert "upload torn" in results[3].output
    assert target.read_bytes() == good and oct(target.stat().st_mode & 0o777) == "0o640"
    assert not (tmp_path / "g").exists() and not list(tmp_path.glob("g.mf-tmp*"))
    assert not (tmp_path / "never").exists()


def test_batch_timeout_wraps_only_commands_that_ask() -> None:
    token = new_token()
    script = batch_script([BatchItem(argv=("sleep", "5"), timeout=0.2), BatchItem(argv=("echo", "x"))], token)
    _, out = _sh(script)
    assert [(r.index, r.rc) for r in parse_batch_output(out, token)] == [(0, 124)]


# -- facts on real captures -----------------------------------------------------------------


def _fx(rel: str) -> str:
    return (FIXTURES / rel).read_text()


def test_ibstat_parser_on_real_captures() -> None:
    ports = IbStat().parse(_fx("infiniband/ibstat-h100-8x-cx7-ib400-plus-bf3-eth.txt"), 0)
    assert len(ports) == 9
    assert {(p.link_layer, p.rate) for p in ports} == {("InfiniBand", 400), ("Ethernet", 200)}
    assert all(p.state == "Active" for p in ports)
    dual = IbStat().parse(_fx("infiniband/ibstat-connectx3-mlx4-dualport-fdr56.txt"), 0)
    assert [(p.ca, p.port, p.rate) for p in dual] == [("mlx4_0", 1, 56), ("mlx4_0", 2, 56)]


def test_other_parsers_on_real_captures() -> None:
    md = MdStat().parse(_fx("storage/mdstat-raid0-2x-sata-md1-netdata-4010.txt"), 0)
    assert [(a.name, a.level, a.state, a.members) for a in md] == [("md1", "raid0", "active", ("sdd", "sdb"))]
    devs = BlockDevices().parse(_fx("storage/lsblk-json-8x-nvme-7t-md0-raid0.json"), 0)
    md0 = [d for d in devs if d.name == "md0"]
    assert len(md0) == 8 and md0[0].mountpoint == "/raid" and md0[0].type == "raid0"
    assert next(d for d in devs if d.name == "nvme0n1").size == 7 * 2**40
    domains = FiProviders().parse(_fx("efa/fi_info-efa-multi-rdmap-head-n20-truncated.txt"), 0)
    assert domains == ("rdmap79s0-rdm", "rdmap80s0-rdm", "rdmap81s0-rdm")
    assert FiProviders().parse("", 127) == ()


def test_small_parsers() -> None:
    smi = NvidiaSmi().parse("0, NVIDIA H100 80GB HBM3, 550.90.07\n1, NVIDIA H100 80GB HBM3, 550.90.07\n", 0)
    assert (smi.driver, smi.count) == ("550.90.07", 2)
    down = NvidiaSmi().parse("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", 9)
    assert down.driver is None and "couldn't communicate" in down.error
    units = SystemdUnits(("a", "b")).parse("Id=a.service\nLoadState=loaded\nUnitFileState=enabled\n"
                                           "ActiveState=active\n\nId=b.service\nLoadState=not-found\n"
                                           "UnitFileState=\nActiveState=inactive\n", 0)
    assert units["a"].is_enabled and units["a"].is_active and not units["b"].exists


# -- inventory, spec, profiles ----------------------------------------------------------------


INVENTORY = """
defaults: {user: ubuntu, key: ~/.ssh/id_ed25519, provider: aws, offering: p5.48xlarge}
hosts:
  - {name: node-0, address: 10.0.1.10, labels: {rack: r1}}
  - {name: node-1, address: 10.0.1.11, port: 2222, labels: {rack: r2}}
  - {name: ib-0, address: 10.0.2.5, provider: own, offering: hgx, fabric: infiniband, gpu_count: 8,
     interconnect: nvswitch,
     host_keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG5Q2f6W0xkQ0Z4B5o2rY2F2bLxq0+oQ9dY6L8p3Jm7C"]}
pin_on_first_contact: true
"""


def test_inventory_yaml() -> None:
    import yaml

    inv = parse_inventory(yaml.safe_load(INVENTORY), "hosts.yaml")
    a, b, c = inv.hosts
    assert (a.user, a.port, a.index, a.traits.fabric, a.traits.nvswitch) == ("ubuntu", 22, 0, Fabric.EFA, True)
    assert (b.port, b.labels, b.endpoint().host_id) == (2222, {"rack": "r2"}, "[10.0.1.11]:2222")
    assert c.traits.fabric == Fabric.INFINIBAND and c.traits.gpu_count == 8
    assert inv.ssh.trust_on_first_use and inv.ssh.pinned_keys == {"ib-0": list(c.host_keys)}
    assert [h.name for h in select_hosts(inv.hosts, "rack=r1")] == ["node-0"]
    assert [h.name for h in select_hosts(inv.hosts, ["node-*"])] == ["node-0", "node-1"]
    assert [h.name for h in select_hosts(inv.hosts, "10.0.2.*,node-1")] == ["node-1", "ib-0"]


@pytest.mark.parametrize(("doc", "field"), [
    ({"hosts": [{"name": "x", "adress": "1.2.3.4"}]}, "hosts.list[_HostEntry].0.adress"),
    ({"hosts": [{"name": "x", "offering": "mystery", "provider": "aws"}]}, "hosts.0.offering"),
    ({"hosts": [{"name": "x"}, {"name": "x"}]}, "hosts"),
])
def test_inventory_errors_name_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidSpecError) as exc:
        parse_inventory(doc, "bad.yaml")
    assert exc.value.field == field


SPEC = {
    "name": "train", "provider": "aws", "region": "us-east-1", "offering": "p5.48xlarge", "count": 2,
    "image": "ami-1", "ssh": {"user": "ubuntu", "private_key": "~/.ssh/k", "bastion": "ec2-user@bastion:2222"},
    "storage": {"hot": {"mount": "/scratch"}, "warm": {"kind": "fsx-lustre", "source": "fs@tcp:/x"}},
    "bootstrap": {"overrides": {"nvidia-driver": {"version": "550.127.05-0ubuntu1"},
                                "nccl-config": {"env": {"NCCL_DEBUG": "INFO"}}}},
}


KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG5Q2f6W0xkQ0Z4B5o2rY2F2bLxq0+oQ9dY6L8p3Jm7C"


def test_hosts_and_profile_from_a_cluster_spec() -> None:
    spec = parse_spec(SPEC)
    nodes = [Node(id=f"i-{i}", provider="aws", region="us-east-1", state=NodeState.RUNNING, offering="p5.48xlarge",
                  private_ip=f"10.0.0.{i + 10}", name=f"train-{i}", tags={"metalfleet:index": str(i)},
                  extra={"host_keys": [KEY]})
             for i in (1, 0)]
    inv = hosts_from_spec(spec, nodes)
    assert [(h.name, h.address, h.index) for h in inv.hosts] == [("train-0", "10.0.0.10", 0),
                                                                  ("train-1", "10.0.0.11", 1)]
    assert inv.hosts[0].bastion == "ec2-user@bastion:2222" and inv.hosts[0].traits.fabric == Fabric.EFA
    assert set(inv.ssh.pinned_keys) == {"10.0.0.10", "10.0.0.11"}
    profile = profile_for_spec(spec)
    steps = {s.name: s for s in profile.for_host(inv.hosts[0])}
    assert steps["nvidia-driver"].settings.version == "550.127.05-0ubuntu1"
    assert steps["storage-hot"].settings.mount == "/scratch"
    assert steps["storage-warm"].settings.kind == "fsx-lustre"
    assert "storage-cold" not in steps and "doca-ofed" not in steps and "efa" in steps
    names = [s.name for s in profile.for_host(inv.hosts[0])]
    assert names.index("nvidia-driver") < names.index("reboot") < names.index("nvidia-persistenced")
    assert names.index("efa") < names.index("aws-ofi-nccl")


@pytest.mark.parametrize(("overrides", "field"), [
    ({"nvidia-driver": {"verison": "1"}}, "bootstrap.overrides.nvidia-driver.verison"),
    ({"no-such-step": {}}, "bootstrap.overrides.no-such-step"),
    ({"storage-hot": {"filesystem": "zfs", "mount": "/x"}}, "bootstrap.overrides.storage-hot.filesystem"),
])
def test_override_errors_name_the_field(overrides: dict[str, Any], field: str) -> None:
    host = mb.Host("n", "10.0.0.1", provider="aws", offering="p5.48xlarge",
                   traits=mb.inventory.traits_for("aws", "p5.48xlarge") or mb.NodeTraits())
    with pytest.raises(InvalidSpecError) as exc:
        get_profile("gpu-node").with_overrides(overrides).for_host(host)
    assert exc.value.field == field


def test_enabled_override_adds_or_removes_a_step() -> None:
    host = mb.Host("n", "10.0.0.1", provider="aws", offering="p5.48xlarge",
                   traits=mb.inventory.traits_for("aws", "p5.48xlarge") or mb.NodeTraits())
    base = [s.name for s in get_profile("gpu-node").for_host(host)]
    assert "nvidia-peermem" not in base
    more = get_profile("gpu-node").with_overrides({"nvidia-peermem": {"enabled": True}, "efa": {"enabled": False}})
    names = [s.name for s in more.for_host(host)]
    assert "nvidia-peermem" in names and "efa" not in names


def test_step_order_respects_after_and_detects_cycles() -> None:
    from metalfleet.bootstrap.steps import NvidiaDriver, NvidiaPersistenced, RebootIfNeeded

    assert [s.name for s in order_steps([NvidiaPersistenced, RebootIfNeeded, NvidiaDriver])] == [
        "nvidia-driver", "reboot", "nvidia-persistenced"]

    class A(NvidiaDriver):
        name = "a"
        after = ("b",)

    class B(NvidiaDriver):
        name = "b"
        after = ("a",)

    with pytest.raises(InvalidSpecError, match="cycle"):
        order_steps([A, B])


def test_nccl_tuning_reference_is_generated_from_the_table() -> None:
    assert (REPO / "bootstrap" / "NCCL_TUNING.md").read_text() == nccl_tuning.render_markdown()
    for t in nccl_tuning.TUNING:
        assert t.why and len(t.why.splitlines()) == 1


# -- report, progress, API ------------------------------------------------------------------


def test_report_text_and_progress_lines() -> None:
    rep = Report("gpu-node", dry_run=True, hosts=[HostReport("n0", "10.0.0.1", HostStatus.WOULD_CHANGE, steps=[
        StepResult("nvidia-driver", StepStatus.WOULD_CHANGE, commands=["apt-get install x"]),
        StepResult("nccl", StepStatus.UNCHANGED, noops=["NCCL: libnccl2 2.21 installed"])],
        facts={"OsRelease(/etc/os-release)": "{'ID': 'ubuntu'}"})])
    text = rep.format_text()
    assert "(dry run)" in text and "$ apt-get install x" in text and "facts read:" in text
    assert rep.to_dict()["hosts"][0]["steps"][0]["status"] == "would-change"
    buf = io.StringIO()
    show = TerminalProgress(buf)
    show(ProgressEvent("step-done", "n0", step="nvidia-driver", status="changed", seconds=1.5, done=0, total=2))
    show(ProgressEvent("step-done", "n0", step="nccl", status="unchanged", done=0, total=2))
    show(ProgressEvent("host-done", "n0", status="changed", seconds=3.0, done=1, total=2))
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2 and "nvidia-driver" in lines[0] and "changed" in lines[0] and "[1/2]" in lines[1]


def test_public_api_is_complete() -> None:
    exported = set(mb.__all__)
    assert {"run_bootstrap", "load_inventory", "hosts_from_spec", "TerminalProgress", "Report", "Profile", "Step",
            "HostKeyChanged", "SshConnection"} <= exported
    assert all(hasattr(mb, name) for name in exported)


def test_only_the_ssh_module_imports_paramiko() -> None:
    offenders = [p.relative_to(REPO) for p in (REPO / "bootstrap").rglob("*.py")
                 if p.name != "ssh.py" and "import paramiko" in p.read_text()]
    assert offenders == []
