"""`make demo`: the main job, on the local emulated cloud (`make demo PROVIDER=alibaba|huawei|ipmi`: demo_*.py).

1. start the local EC2 emulator (moto server, extended) on 127.0.0.1, with a simulated GPU host
   behind every instance it launches (extension h: a VM-mode host at the instance's private IP)
2. make a throwaway SSH key and import it as the example's key pair (``metalfleet-p5``), and the
   example's EBS key (``alias/metalfleet-ebs``) in the emulator's KMS
3. list normalised GPU offerings
4. order 2 x p5.48xlarge from examples/aws-p5/cluster.yaml with live progress, print, release
5. the same cluster as a Pulumi stack on the real engine: `metalfleet up` orders the nodes,
   bootstraps them over SSH and runs the acceptance gate; print the acceptance table; destroy
6. stop everything it started

Nothing in metalfleet knows it talks to an emulator: the demo only sets AWS_ENDPOINT_URL and
throwaway credentials for this process tree, and runs a copy of the example whose ssh paths point
at the throwaway key and a known_hosts file in a temporary folder (never ~/.ssh), and whose
``network.ssh_ingress_cidrs`` lets in this controller (127.0.0.1/32): the emulator's security groups
decide who reaches a simulated host's SSH port, as AWS's do.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metalfleet.testing.ec2 import Ec2Emulator, start_ec2_emulator

ROOT = Path(__file__).resolve().parents[1]

EXAMPLE = ROOT / "examples" / "aws-p5"
CLI = [sys.executable, "-m", "metalfleet.stacks.cli"]


def banner(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def run(*args: str, env: dict[str, str]) -> None:
    print("$ metalfleet " + " ".join(args), flush=True)
    subprocess.run([*CLI, *args], env=env, check=True)


def run_json(*args: str, env: dict[str, str]) -> dict[str, Any]:
    """Run a ``--json`` stack command: its engine log is shown as it comes, the JSON it ends with returned."""
    print("$ metalfleet " + " ".join(args), flush=True)
    with subprocess.Popen([*CLI, *args], env=env, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        doc: list[str] = []
        for line in proc.stdout:
            if doc or line == "{\n":  # the document printed after the log, from its first line on
                doc.append(line)
            else:
                print(line, end="", flush=True)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, ["metalfleet", *args])
    result: dict[str, Any] = json.loads("".join(doc))
    return result


#: Where the demo's controller (this process tree) connects from: the simulated hosts see 127.0.0.1.
CONTROLLER_CIDR = "127.0.0.1/32"


def copy_example(dest: Path, key: Path, known_hosts: Path) -> Path:
    """examples/aws-p5 in ``dest`` with its ssh.private_key and ssh.known_hosts pointing into the temp folder,
    and network.ssh_ingress_cidrs letting in this controller."""
    shutil.copytree(EXAMPLE, dest)
    spec = dest / "cluster.yaml"
    text = spec.read_text()
    for field, value in (("private_key", str(key)), ("known_hosts", str(known_hosts)),
                         ("ssh_ingress_cidrs", f"[{CONTROLLER_CIDR}]")):
        text, n = re.subn(rf"^(  {field}: )\S+", rf"\g<1>{value}", text, flags=re.M)
        if n != 1:
            raise SystemExit(f"{EXAMPLE}/cluster.yaml: no {field} line to point at the demo's controller")
    spec.write_text(text + DEMO_SCHEDULER)
    return spec


#: The five lines a user adds for a Slurm partition (README), plus what the simulated hosts need: they share this
#: machine's network (each slurmd on its own port, the controller off Slurm's default port) and have no writable
#: cgroup filesystem, and Debian's real slurmd counts this machine's CPUs, not the simulated ones.
DEMO_SCHEDULER = """
scheduler:                        # the accepted nodes as a Slurm partition, its controller on node 0
  kind: slurm
  partition: gpu
  controller:
    node: 0
  # the demo's simulated hosts only (see tools/demo.py):
  node_port_base: 27101
  settings: {ProctrackType: proctrack/linuxproc, TaskPlugin: task/none, SlurmdParameters: config_overrides,
             SlurmctldPort: "26917"}
"""


#: Where bootstrap's nccl-tests step builds it on every node.
NCCL_TESTS = "/opt/nccl-tests/build/all_reduce_perf"


def slurm_job(spec: Path, controller_ip: str, nodes: int) -> None:
    """A job through the partition, as a user submits it on the controller: the simulated hosts' all_reduce_perf,
    one task per node with 8 GPUs each."""
    import yaml

    ssh = yaml.safe_load(spec.read_text())["ssh"]
    job = ["srun", "-p", "gpu", f"-N{nodes}", "--ntasks-per-node=1", "--gres=gpu:8", NCCL_TESTS,
           "-b", "1G", "-e", "4G", "-f", "2", "-g", "8"]
    print(f"$ ssh {ssh['user']}@{controller_ip} {' '.join(job)}", flush=True)
    subprocess.run(["ssh", "-i", ssh["private_key"], "-o", f"UserKnownHostsFile={ssh['known_hosts']}",
                    "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", f"{ssh['user']}@{controller_ip}",
                    *job], check=True)


def leftovers(ec2: Ec2Emulator, cluster: str) -> dict[str, int]:
    """What is left of ``cluster`` in the emulator: live instances, simulated hosts, and the security and
    placement groups metalfleet made for it (tagged metalfleet:cluster)."""
    import boto3

    from metalfleet.providers.tags import TAG_CLUSTER

    client = boto3.client("ec2", endpoint_url=ec2.url, region_name="us-east-1")
    mine = [{"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]}]
    res = client.describe_instances(Filters=[*mine, {"Name": "instance-state-name",
                                                     "Values": ["pending", "running", "stopping", "stopped"]}])
    return {"instance(s)": sum(len(r["Instances"]) for r in res["Reservations"]),
            "simulated host(s)": len(ec2.sim_hosts()),
            "security group(s)": len(client.describe_security_groups(Filters=mine)["SecurityGroups"]),
            "placement group(s)": len(client.describe_placement_groups(Filters=mine)["PlacementGroups"])}


def order_then_stack(example: str, spec: Path, work: Path, env: dict[str, str],
                     leftovers: Callable[[], dict[str, int]]) -> int:
    """Order ``spec`` (a copy of ``example``) directly through the driver and release it, then the same cluster
    as a Pulumi stack: up (order, bootstrap, gate), its acceptance, destroy. 1 when ``leftovers()`` (what the
    cloud still holds for the cluster, by kind) is not empty after the release or the destroy; 0 otherwise."""
    banner(f"order {example} directly through the driver")
    run("order", str(spec), env=env)
    run("release", str(spec), env=env)
    left = {k: v for k, v in leftovers().items() if v}
    if left:
        print(f"release left behind: {left}", file=sys.stderr)
        return 1

    banner("the same cluster as a Pulumi stack (real engine, local file backend): order, bootstrap, gate")
    backend = f"file://{work / 'state'}"
    outputs = run_json("up", str(spec), "--backend", backend, "--json", env=env)["outputs"]
    banner("acceptance (stack output `acceptance`)")
    print(outputs["acceptance"])
    print(f"\naccepted: {', '.join(outputs['accepted_ids'])}\nhostfile:\n{outputs['hostfile']}", flush=True)
    if "slurm" in outputs:
        banner("the accepted nodes as a Slurm partition (stack output `slurm`), and a job run through it")
        print(outputs["slurm"], flush=True)
        slurm_job(spec, outputs["private_ips"][0], len(outputs["accepted_ids"]))

    run("destroy", str(spec), "--backend", backend, env=env)
    left = {k: v for k, v in leftovers().items() if v}
    if left:
        print(f"destroy left behind: {left}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    if "--provider" in sys.argv[1:]:  # make demo PROVIDER=...; aws (the default) is this file's flow
        provider = sys.argv[sys.argv.index("--provider") + 1] if sys.argv[-1] != "--provider" else ""
        demos = {"alibaba": "demo_alibaba", "huawei": "demo_huawei", "ipmi": "demo_pool"}
        if provider in demos:
            module = __import__(demos[provider])
            return int(module.main())
        if provider != "aws":
            print(f"make demo: PROVIDER must be aws, alibaba, huawei or ipmi, not {provider!r}", file=sys.stderr)
            return 2
    if os.geteuid() != 0:
        print("the demo's simulated GPU hosts need root (namespaces, mounts, sshd): run it as root",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="metalfleet-demo-") as tmp, start_ec2_emulator(sim_hosts=True) as ec2:
        work = Path(tmp)
        env = {
            **os.environ,
            "AWS_ENDPOINT_URL": ec2.url,
            "AWS_ACCESS_KEY_ID": "AKIADEMODEMODEMO0000",
            "AWS_SECRET_ACCESS_KEY": "demo-secret-not-real",
            "AWS_DEFAULT_REGION": "us-east-1",
            "PULUMI_CONFIG_PASSPHRASE": "demo",
            "PULUMI_HOME": str(work / "pulumi-home"),
        }
        env.pop("AWS_PROFILE", None)
        os.environ.update({k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")})
        banner(f"local EC2 emulator at {ec2.url}: every instance it launches is a simulated GPU host")

        banner("a throwaway SSH key, imported as the example's key pair (metalfleet-p5)")
        key = work / "ssh" / "metalfleet-p5"
        key.parent.mkdir(mode=0o700)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "metalfleet-demo", "-f", str(key)],
                       check=True)
        print(f"ImportKeyPair metalfleet-p5 (as: aws ec2 import-key-pair --key-name metalfleet-p5 "
              f"--public-key-material fileb://{key}.pub)")
        import boto3

        boto3.client("ec2", endpoint_url=ec2.url, region_name="us-east-1").import_key_pair(
            KeyName="metalfleet-p5", PublicKeyMaterial=Path(f"{key}.pub").read_bytes())
        kms = boto3.client("kms", endpoint_url=ec2.url, region_name="us-east-1")
        key_id = kms.create_key(Description="metalfleet demo: EBS volumes")["KeyMetadata"]["KeyId"]
        kms.create_alias(AliasName="alias/metalfleet-ebs", TargetKeyId=key_id)
        print("CreateKey + CreateAlias alias/metalfleet-ebs (the example's storage.kms_key_id; as: aws kms "
              "create-key, aws kms create-alias)")
        spec = copy_example(work / "aws-p5", key, work / "ssh" / "known_hosts")
        print(f"examples/aws-p5 copied to {spec.parent}, ssh.private_key and ssh.known_hosts pointing there, "
              f"network.ssh_ingress_cidrs [{CONTROLLER_CIDR}] (this controller)")

        banner("GPU offerings: the shipped catalogue (offline, dated prices), then --live (DescribeInstanceTypes)")
        run("offerings", "--provider", "aws", "--region", "us-east-1", "--orderable", env=env)
        run("offerings", "--provider", "aws", "--region", "us-east-1", "--live", env=env)

        if order_then_stack("examples/aws-p5/cluster.yaml", spec, work, env, lambda: leftovers(ec2, "llm-p5")):
            return 1
        banner("done: no instance, simulated host, security group or placement group left; emulator stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
