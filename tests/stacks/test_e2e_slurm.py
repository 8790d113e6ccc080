"""`pulumi up` of examples/aws-p5 with a scheduler section: one up from nothing to a Slurm partition a job runs on.

The real engine and our language host, the EC2 emulator with VM-mode simulated hosts (as test_e2e_aws.py); the
example gets the five lines of the README plus what the simulated hosts need (tools/demo.py says why). The
partition's daemons are Debian's munged, slurmctld and slurmd, inside the simulated hosts: either a controller
metalfleet stands up on node 0, or a site's own controller (a simulated host of its own, set up as its admins
would) that the nodes join with the munge key from `pulumi config set --secret`.
"""

from __future__ import annotations

import base64
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from metalfleet.testing.ec2 import Ec2Emulator

from .test_e2e_aws import _groups, _live, _project, _resources, ec2, key  # noqa: F401  (its module fixtures, shared: one emulator per module)

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("engine-aws"),
              pytest.mark.requires_root("the emulator's simulated hosts running Slurm")]

CLUSTER = "llm-p5-slurm"
def _scheduler() -> str:
    """The README's five lines, and the simulated hosts' settings (tools/demo.py says why), on free ports."""
    from metalfleet.testing.slurm import free_port_block

    base = free_port_block(3)
    return f"""
scheduler:
  kind: slurm
  partition: gpu
  controller:
    node: 0
  node_port_base: {base + 1}
  settings: {{ProctrackType: proctrack/linuxproc, TaskPlugin: task/none, SlurmdParameters: config_overrides,
             SlurmctldPort: "{base}"}}
"""


def _ssh(identity: Path, known_hosts: Path, ip: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``argv`` on the host as a user types it (ssh hands the remote shell one command line)."""
    return subprocess.run(["ssh", "-i", str(identity), "-o", f"UserKnownHostsFile={known_hosts}", "-o",
                           "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", f"ubuntu@{ip}", shlex.join(argv)],
                          capture_output=True, text=True, timeout=120)


def test_one_up_ends_with_a_partition_a_job_runs_on_and_destroy_takes_it_down(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from tests.slurm.test_real_slurm import require_slurm

    require_slurm()
    emulator: Ec2Emulator = request.getfixturevalue("ec2")
    operator: Path = request.getfixturevalue("key")
    project = _project(tmp_path, emulator, operator, name=CLUSTER)
    spec = project.path / "cluster.yaml"
    spec.write_text(spec.read_text() + _scheduler())
    try:
        project.pulumi("up", "--yes", "--skip-preview")
        out = project.outputs()
        slurm = str(out["slurm"])
        assert "slurm: partition gpu: 2 node(s)" in slurm
        for i in range(2):
            assert f"{CLUSTER}-{i}: IDLE Gres=gpu:h100:8 Feature=p5.48xlarge,efa,aws,h100" in slurm, slurm
        job = _ssh(operator, project.known_hosts, out["private_ips"][0], "srun", "-p", "gpu", "-N2",
                   "--ntasks-per-node=1", "--gres=gpu:8", "sh", "-c", "echo $SLURMD_NODENAME")
        assert job.returncode == 0, job.stderr
        assert sorted(job.stdout.split()) == [f"{CLUSTER}-0", f"{CLUSTER}-1"]
        # the munge key metalfleet made is in the state encrypted, never in plain text
        part = _resources(project)[f"{CLUSTER}-slurm"]
        assert part["outputs"]["munge_key_b64"]["4dabf18193072939515e22adb298388d"] == \
            "1b47061264138c4ac30d75fd1eb44270"  # Pulumi's secret signature
        # a second up changes nothing: not the partition, not a config file, not a daemon
        project.pulumi("preview", "--expect-no-changes")
    finally:
        down = project.pulumi("destroy", "--yes", "--skip-preview")
    text = down.stdout + down.stderr
    assert "could not take the nodes out of service" not in text, text
    assert _live(emulator, CLUSTER) == [] and _groups(emulator, CLUSTER) == []


def test_one_up_joins_a_sites_controller_with_a_secret_key_and_destroy_deletes_the_nodes(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from metalfleet.bootstrap.ssh import SshConnection, SshOptions
    from metalfleet.testing.hosts.vm import boot_vm_host
    from metalfleet.testing.slurm import free_port_block, site_controller_conf, site_controller_script
    from tests.slurm.test_real_slurm import require_slurm

    require_slurm()
    emulator: Ec2Emulator = request.getfixturevalue("ec2")
    operator: Path = request.getfixturevalue("key")
    cluster = "llm-p5-join"
    (tmp_path / "site").mkdir()
    site = boot_vm_host("site", base_dir=tmp_path / "site")
    try:
        port = free_port_block(2)
        key = os.urandom(1024)
        conf = site_controller_conf(hostname="site", address=site.address, port=port, partition="gpu",
                                    feature=f"metalfleet-{cluster}")
        opts = SshOptions(pinned_keys={site.address: [site.host_key]}, use_agent=False)

        def on_site(*argv: str) -> tuple[int, str]:
            with SshConnection(site.host().endpoint(), opts) as conn:
                res = conn.run(list(argv), timeout=120)
            return res.rc, res.stdout.decode() + res.stderr.decode()

        rc, text = on_site("sh", "-c", site_controller_script(
            conf=conf, munge_key=key, gres="Name=gpu Type=h100 File=/dev/nvidia[0-7]", submit_host="site"))
        assert rc == 0, text
        project = _project(tmp_path, emulator, operator, name=cluster)
        spec = project.path / "cluster.yaml"
        spec.write_text(spec.read_text() + f"""
scheduler:
  kind: slurm
  partition: gpu
  join:
    address: {site.address}:{port}
    munge_key: config:slurmMungeKey
""")
        b64 = base64.b64encode(key).decode()
        project.pulumi("config", "set", "--secret", "slurmMungeKey", b64)
        try:
            project.pulumi("up", "--yes", "--skip-preview")
            slurm = str(project.outputs()["slurm"])
            assert "slurm: partition gpu: 2 node(s)" in slurm, slurm
            rc, nodes = on_site("scontrol", "show", "nodes", "--oneliner")
            assert rc == 0 and sorted(ln.split()[0] for ln in nodes.splitlines()) == [
                f"NodeName={cluster}-0", f"NodeName={cluster}-1"], nodes
            assert all("State=IDLE+DYNAMIC_NORM" in ln and "Partitions=gpu" in ln for ln in nodes.splitlines())
            rc, job = on_site("srun", "-p", "gpu", "-N2", "sh", "-c", "echo $SLURMD_NODENAME")
            assert rc == 0 and sorted(job.split()) == [f"{cluster}-0", f"{cluster}-1"], job
            # the site's key is in the stack's config and state only encrypted
            exported = project.pulumi("stack", "export").stdout
            assert b64 not in exported and b64 not in (project.path / "Pulumi.e2e.yaml").read_text()
            project.pulumi("preview", "--expect-no-changes")
        finally:
            down = project.pulumi("destroy", "--yes", "--skip-preview")
        text = down.stdout + down.stderr
        assert "could not take the nodes out of service" not in text, text
        rc, nodes = on_site("scontrol", "show", "nodes", "--oneliner")
        assert "No nodes in the system" in nodes, nodes
        assert _live(emulator, cluster) == []
    finally:
        site.stop()
