"""The demo on Huawei Cloud BMS: an Ascend 910B cluster on the local BMS emulator (``main() -> int``).

1. start the local BMS emulator (metalfleet.testing.huawei) on 127.0.0.1, checking SDK-HMAC-SHA256 signatures,
   with a simulated Ascend host behind every server it builds
2. make a throwaway SSH key and register it as the example's key pair (``metalfleet-ascend``)
3. list the Huawei offerings (catalogue facts joined with the BMS flavor list)
4. order examples/huawei-bms/cluster.yaml through the driver (jobs followed to server ids), print, release
5. the same cluster as a Pulumi stack on the real engine: `metalfleet up` orders, bootstraps (Ascend driver, CANN,
   HCCN) and gates it (npu-smi, HCCS, hccn_tool, hccl_test); print the acceptance table; destroy
6. stop everything it started

Nothing in metalfleet knows it talks to an emulator: the demo sets the SDK's credential variables to the
emulator's test keys, the project id, and METALFLEET_HUAWEI_BMS_ENDPOINT for this process tree, and runs a copy of
the example whose ssh paths point into a temporary folder (never ~/.ssh).
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

from demo import banner, run  # noqa: E402  (tools/demo.py, beside this file)

EXAMPLE = ROOT / "examples" / "huawei-bms"
KEY_PAIR = "metalfleet-ascend"


def copy_example(dest: Path, key: Path, known_hosts: Path) -> Path:
    """examples/huawei-bms in ``dest`` with its ssh.private_key and ssh.known_hosts pointing into the temp folder."""
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("venv"))
    spec = dest / "cluster.yaml"
    text = spec.read_text()
    for field, value in (("private_key", str(key)), ("known_hosts", str(known_hosts))):
        text, n = re.subn(rf"^(  {field}: )\S+", rf"\g<1>{value}", text, flags=re.M)
        if n != 1:
            raise SystemExit(f"{EXAMPLE}/cluster.yaml: no {field} line to point into the demo's folder")
    spec.write_text(text)
    return spec


def main() -> int:
    from metalfleet.providers.huawei import HuaweiDriver
    from metalfleet.providers.huawei.driver import ENDPOINT_ENV
    from metalfleet.testing.huawei import PROJECT_ID, REGION, TEST_AK, TEST_SK, HuaweiEmulator

    if os.geteuid() != 0:
        print("the demo's simulated Ascend hosts need root (namespaces, mounts, sshd): run it as root", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="metalfleet-demo-huawei-") as tmp, \
            HuaweiEmulator.start(sim_hosts=True) as bms:
        work = Path(tmp)
        creds = {"HUAWEICLOUD_SDK_AK": TEST_AK, "HUAWEICLOUD_SDK_SK": TEST_SK,
                 "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT_ID, ENDPOINT_ENV: bms.url}
        env = {**os.environ, **creds, "PULUMI_CONFIG_PASSPHRASE": "demo", "PULUMI_HOME": str(work / "pulumi-home")}
        banner(f"local Huawei BMS emulator at {bms.url} (signatures checked): every server is a simulated Ascend host")

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

        banner("order examples/huawei-bms/cluster.yaml through the driver (CreateBareMetalServers, ShowJobInfos)")
        run("order", str(spec), env=env)
        run("release", str(spec), env=env)

        banner("the same cluster as a Pulumi stack (real engine, local file backend): order, bootstrap, gate")
        backend = f"file://{work / 'state'}"
        run("up", str(spec), "--backend", backend, env=env)
        run("destroy", str(spec), "--backend", backend, env=env)

        driver = HuaweiDriver(region=REGION, project_id=PROJECT_ID, endpoint=bms.url, ak=TEST_AK, sk=TEST_SK)
        left = driver.list_nodes("ascend-910b")
        if left or bms.sim_hosts():
            print(f"destroy left behind: {[n.id for n in left]}, {len(bms.sim_hosts())} simulated host(s)",
                  file=sys.stderr)
            return 1
        calls = bms.stats()["by_action"]
        banner(f"done: no server or simulated host left; BMS calls: {calls}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
