"""The demo on Huawei Cloud BMS: a monthly Ascend 910B cluster on the local BMS/BSS emulator (``main() -> int``).

1. start the local BMS emulator (metalfleet.testing.huawei) on 127.0.0.1, checking SDK-HMAC-SHA256 signatures and
   serving the billing API (BSS) beside BMS, with a simulated Ascend host behind every server it builds
2. make a throwaway SSH key and register it as the example's key pair (``metalfleet-ascend``)
3. list the Huawei offerings (catalogue facts joined with the BMS flavor list)
4. order examples/huawei-bms/cluster.yaml through the driver: yearly/monthly servers (the only ones BMS creates),
   each BSS order followed until it is paid and its server runs
5. release it: refused without the opt-in (each server's expiry and refund named, nothing ended), then
   ``metalfleet release --unsubscribe``: every server unsubscribed through BSS and deleted
6. the same cluster as a Pulumi stack on the real engine: `metalfleet up` orders, bootstraps (Ascend driver, CANN,
   HCCN) and gates it (npu-smi, HCCS, hccn_tool, hccl_test); print the acceptance table, the accepted nodes as a
   Slurm partition (stack output `slurm`, Gres npu:910b3:8) and a job run through it (hccl_test, its ranks started
   by srun); `metalfleet destroy --unsubscribe`
7. check nothing is left (no server, no term in BSS, no simulated host) and stop everything it started

Nothing in metalfleet knows it talks to an emulator: the demo sets the SDK's credential variables to the
emulator's test keys, the project, account and IAM user ids, METALFLEET_HUAWEI_BMS_ENDPOINT and
METALFLEET_HUAWEI_BSS_ENDPOINT for this process tree, and runs a copy of the example whose ssh paths point into a
temporary folder (never ~/.ssh).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from demo import CLI, DEMO_SCHEDULER, banner, run, run_json  # noqa: E402  (tools/demo.py, beside this file)

EXAMPLE = ROOT / "examples" / "huawei-bms"
KEY_PAIR = "metalfleet-ascend"
PARTITION = "npu"
#: Where bootstrap's CANN step installs CANN's HCCL Performance Tester on every node.
HCCL_TEST = "/usr/local/Ascend/ascend-toolkit/latest/tools/hccl_test/bin/all_reduce_test"


def copy_example(dest: Path, key: Path, known_hosts: Path) -> Path:
    """examples/huawei-bms in ``dest`` with its ssh.private_key and ssh.known_hosts pointing into the temp folder,
    and the demo's scheduler section (tools/demo.py DEMO_SCHEDULER, its partition named for the NPUs)."""
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("venv"))
    spec = dest / "cluster.yaml"
    text = spec.read_text()
    for field, value in (("private_key", str(key)), ("known_hosts", str(known_hosts))):
        text, n = re.subn(rf"^(  {field}: )\S+", rf"\g<1>{value}", text, flags=re.M)
        if n != 1:
            raise SystemExit(f"{EXAMPLE}/cluster.yaml: no {field} line to point into the demo's folder")
    spec.write_text(text + DEMO_SCHEDULER.replace("partition: gpu", f"partition: {PARTITION}"))
    return spec


def refused_release(spec: Path, env: dict[str, str]) -> bool:
    """``metalfleet release`` without the opt-in: it must refuse (exit 2, the subscriptions named) and end nothing."""
    print(f"$ metalfleet release {spec}", flush=True)
    proc = subprocess.run([*CLI, "release", str(spec)], env=env, capture_output=True, text=True, check=False)
    print(proc.stdout + proc.stderr, end="", flush=True)
    return proc.returncode == 2 and "subscription" in proc.stderr and "--unsubscribe" in proc.stderr


def npu_job(spec: Path, controller_ip: str, nodes: int) -> None:
    """A job through the partition, as a user submits it on the controller: CANN's hccl_test all_reduce over every
    node, one rank per NPU (--ntasks-per-node=8 --gres=npu:8, -p 8 NPUs per node). Slurm starts the ranks (PMI-2,
    built into Slurm) where the gate's probe uses mpirun: a job's tasks run with the submitting shell's PATH, and
    mpirun is at no path every node shares."""
    import yaml

    ssh = yaml.safe_load(spec.read_text())["ssh"]
    job = ["srun", "-p", PARTITION, f"-N{nodes}", "--ntasks-per-node=8", "--gres=npu:8", "--mpi=pmi2", HCCL_TEST,
           "-p", "8", "-b", "8K", "-e", "64M", "-f", "2", "-d", "fp32", "-o", "sum"]
    print(f"$ ssh {ssh['user']}@{controller_ip} {' '.join(job)}", flush=True)
    subprocess.run(["ssh", "-i", ssh["private_key"], "-o", f"UserKnownHostsFile={ssh['known_hosts']}",
                    "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", f"{ssh['user']}@{controller_ip}",
                    *job], check=True)


def main() -> int:
    from metalfleet.providers.huawei import HuaweiDriver
    from metalfleet.providers.huawei.billing import BSS_ENDPOINT_ENV
    from metalfleet.providers.huawei.driver import ENDPOINT_ENV, USER_ID_ENV
    from metalfleet.testing.huawei import DOMAIN_ID, PROJECT_ID, REGION, TEST_AK, TEST_SK, USER_ID, HuaweiEmulator

    if os.geteuid() != 0:
        print("the demo's simulated Ascend hosts need root (namespaces, mounts, sshd): run it as root", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="metalfleet-demo-huawei-") as tmp, \
            HuaweiEmulator.start(sim_hosts=True) as bms:
        work = Path(tmp)
        creds = {"HUAWEICLOUD_SDK_AK": TEST_AK, "HUAWEICLOUD_SDK_SK": TEST_SK,
                 "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT_ID, "HUAWEICLOUD_SDK_DOMAIN_ID": DOMAIN_ID,
                 USER_ID_ENV: USER_ID, ENDPOINT_ENV: bms.url, BSS_ENDPOINT_ENV: bms.url}
        env = {**os.environ, **creds, "PULUMI_CONFIG_PASSPHRASE": "demo", "PULUMI_HOME": str(work / "pulumi-home")}
        banner(f"local Huawei BMS + BSS emulator at {bms.url} (signatures checked): every server is a simulated "
               "Ascend host, bought monthly")

        banner(f"a throwaway SSH key, registered as the example's key pair ({KEY_PAIR})")
        key = work / "ssh" / KEY_PAIR
        key.parent.mkdir(mode=0o700)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "metalfleet-demo", "-f", str(key)],
                       check=True)
        bms.add_keypair(KEY_PAIR, Path(f"{key}.pub").read_text().strip())
        spec = copy_example(work / "huawei-bms", key, work / "ssh" / "known_hosts")
        print(f"examples/huawei-bms copied to {spec.parent}, ssh.private_key and ssh.known_hosts pointing there")

        banner("Huawei offerings (catalogue facts + ListBaremetalFlavorDetailExtends)")
        run("offerings", "--provider", "huawei", "--region", REGION, env=env)

        banner("order examples/huawei-bms/cluster.yaml through the driver (CreateBareMetalServers prePaid, the BSS "
               "order and the BMS job followed until each server runs)")
        run("order", str(spec), env=env)

        banner("release without opting in: refused, each server's expiry and refund named, nothing ended")
        if not refused_release(spec, env):
            print("a release without --unsubscribe did not refuse the subscriptions", file=sys.stderr)
            return 1
        banner("release --unsubscribe: each server unsubscribed through BSS (CancelResourcesSubscription), then "
               "deleted by BMS")
        run("release", str(spec), "--unsubscribe", env=env)

        banner("the same cluster as a Pulumi stack (real engine, local file backend): order, bootstrap, gate")
        backend = f"file://{work / 'state'}"
        outputs = run_json("up", str(spec), "--backend", backend, "--json", env=env)["outputs"]
        banner("acceptance (stack output `acceptance`)")
        print(outputs["acceptance"])
        print(f"\naccepted: {', '.join(outputs['accepted_ids'])}", flush=True)
        banner("the accepted nodes as a Slurm partition (stack output `slurm`), and a job run through it")
        print(outputs["slurm"], flush=True)
        npu_job(spec, outputs["private_ips"][0], len(outputs["accepted_ids"]))
        banner("destroy --unsubscribe: the stack's servers unsubscribed and deleted")
        run("destroy", str(spec), "--backend", backend, "--unsubscribe", env=env)

        driver = HuaweiDriver(region=REGION, project_id=PROJECT_ID, endpoint=bms.url, bss_endpoint=bms.url,
                              ak=TEST_AK, sk=TEST_SK, domain_id=DOMAIN_ID, user_id=USER_ID)
        left = driver.list_nodes("ascend-910b")
        terms = bms.billing()["resources"]
        if left or terms or bms.sim_hosts():
            print(f"left behind: servers {[n.id for n in left]}, BSS terms {sorted(terms)}, "
                  f"{len(bms.sim_hosts())} simulated host(s)", file=sys.stderr)
            return 1
        calls = bms.stats()["by_action"]
        banner(f"done: no server, no yearly/monthly term, no simulated host left; BMS/BSS calls: {calls}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
