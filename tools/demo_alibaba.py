"""`make demo PROVIDER=alibaba`: the main job on a local emulated Alibaba Cloud.

1. start the local ECS emulator (tests/support/alibaba.py: V3 and RPC signatures checked, and every request held to
   the ECS reference table, tests/support/reference/alibaba-ecs.yaml: the ERIs' vSwitch and security group in the
   Primary interface only, as the RunInstances reference allows) on 127.0.0.1, with a simulated GPU host (8x H20,
   the eRDMA devices of the ERIs it attached) behind every instance, and the local EC2 emulator beside it for the
   offerings table
2. make a throwaway SSH key and import it as the example's key pair (``metalfleet-h20``), and make the example's
   KMS key known to the emulator
3. list normalised GPU offerings of AWS and Alibaba side by side
4. order 2 x ecs.ebmgn8v.48xlarge from examples/alibaba-ebm/cluster.yaml through the driver, print, release
5. the same cluster as a Pulumi stack on the real engine: `metalfleet up` orders the nodes, bootstraps them over
   SSH (the eRDMA driver among the steps) and runs the acceptance gate; print the acceptance table, the accepted
   nodes as a Slurm partition (stack output `slurm`) and a job run through it (srun all_reduce_perf); destroy
6. stop everything it started

Nothing in metalfleet knows it talks to an emulator: the demo only sets ALIBABA_CLOUD_ECS_ENDPOINT and the
emulator's test AccessKey pair (ALIBABA_CLOUD_ACCESS_KEY_ID / _SECRET) for this process tree, and runs a copy of
the example whose ssh paths point into a temporary folder and whose ``network.ssh_ingress_cidrs`` lets in this
controller (127.0.0.1/32).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from metalfleet.testing.alibaba import ACCESS_KEY_ID, ACCESS_KEY_SECRET, AlibabaEmulator
from metalfleet.testing.ec2 import start_ec2_emulator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from demo import CONTROLLER_CIDR, DEMO_SCHEDULER, banner, order_then_stack, run  # noqa: E402  (tools/demo.py, beside this file)

EXAMPLE = ROOT / "examples" / "alibaba-ebm"
CLUSTER = "llm-h20"
KEY_PAIR = "metalfleet-h20"
KMS_KEY = "key-mfexampleebs00000001"


def copy_example(dest: Path, key: Path, known_hosts: Path) -> Path:
    """examples/alibaba-ebm in ``dest``: ssh paths into the temp folder, network.ssh_ingress_cidrs letting in this
    controller, and the demo's scheduler section (tools/demo.py DEMO_SCHEDULER) so `up` ends with a partition."""
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("venv"))
    spec = dest / "cluster.yaml"
    text = spec.read_text()
    for field, value in (("private_key", str(key)), ("known_hosts", str(known_hosts)),
                         ("ssh_ingress_cidrs", f"[{CONTROLLER_CIDR}]")):
        text, n = re.subn(rf"^(  {field}: )\S+", rf"\g<1>{value}", text, flags=re.M)
        if n != 1:
            raise SystemExit(f"{EXAMPLE}/cluster.yaml: no {field} line to point at the demo's controller")
    spec.write_text(text + DEMO_SCHEDULER)
    return spec


def leftovers(ecs: AlibabaEmulator) -> dict[str, int]:
    """What is left of the cluster: live instances, simulated hosts, its security group and deployment set."""
    from metalfleet.providers.alibaba import AlibabaDriver

    driver = AlibabaDriver(region="cn-wulanchabu", endpoint=ecs.url)
    return {"instance(s)": len(driver.list_nodes(CLUSTER)), "simulated host(s)": len(ecs.sim_hosts()),
            "security group / deployment set(s)": len(driver.cluster_resources(CLUSTER))}


def main() -> int:
    if os.geteuid() != 0:
        print("the demo's simulated GPU hosts need root (namespaces, mounts, sshd): run it as root", file=sys.stderr)
        return 2
    with (tempfile.TemporaryDirectory(prefix="metalfleet-demo-") as tmp,
          AlibabaEmulator.start(sim_hosts=True) as ecs, start_ec2_emulator() as ec2):
        work = Path(tmp)
        env = {**os.environ, "ALIBABA_CLOUD_ECS_ENDPOINT": ecs.url, "ALIBABA_CLOUD_ACCESS_KEY_ID": ACCESS_KEY_ID,
               "ALIBABA_CLOUD_ACCESS_KEY_SECRET": ACCESS_KEY_SECRET, "AWS_ENDPOINT_URL": ec2.url,
               "AWS_ACCESS_KEY_ID": "AKIADEMODEMODEMO0000", "AWS_SECRET_ACCESS_KEY": "demo-secret-not-real",
               "AWS_DEFAULT_REGION": "us-east-1", "PULUMI_CONFIG_PASSPHRASE": "demo",
               "PULUMI_HOME": str(work / "pulumi-home")}
        for var in ("AWS_PROFILE", "ALIBABA_CLOUD_SECURITY_TOKEN"):
            env.pop(var, None)
        os.environ.update({k: env[k] for k in ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET")})
        banner(f"local Alibaba Cloud ECS emulator at {ecs.url} (signatures and requests checked against the ECS "
               "reference): every instance it makes is a simulated 8x H20 host with eRDMA")

        banner(f"a throwaway SSH key, imported as the example's key pair ({KEY_PAIR}); its KMS key made known")
        key = work / "ssh" / KEY_PAIR
        key.parent.mkdir(mode=0o700)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "metalfleet-demo", "-f", str(key)],
                       check=True)
        from metalfleet.providers.alibaba import AlibabaDriver

        AlibabaDriver(region="cn-wulanchabu", endpoint=ecs.url)._call(
            "ImportKeyPair", {"RegionId": "cn-wulanchabu", "KeyPairName": KEY_PAIR,
                              "PublicKeyBody": Path(f"{key}.pub").read_text()})
        print(f"ImportKeyPair {KEY_PAIR} (as: aliyun ecs ImportKeyPair --KeyPairName {KEY_PAIR} "
              f"--PublicKeyBody \"$(cat {key}.pub)\")")
        ecs.add_kms_keys(KMS_KEY)
        spec = copy_example(work / "alibaba-ebm", key, work / "ssh" / "known_hosts")
        print(f"examples/alibaba-ebm copied to {spec.parent}, ssh paths pointing there, "
              f"network.ssh_ingress_cidrs [{CONTROLLER_CIDR}] (this controller)")

        banner("GPU offerings, AWS and Alibaba side by side (DescribeInstanceTypes + the catalogue)")
        run("offerings", "--provider", "aws", "--provider", "alibaba", env=env)

        if order_then_stack("examples/alibaba-ebm/cluster.yaml", spec, work, env, lambda: leftovers(ecs)):
            return 1
        banner("done: no instance, simulated host, security group or deployment set left; emulators stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
