"""The demo on your own GPU servers: a pool of hosts behind IPMI and Redfish BMCs (``make demo PROVIDER=ipmi``).

1. start a simulated pool on this machine: four GPU hosts (VM-mode simulated hosts, SSH on 127.x), two behind
   OpenIPMI's ``ipmi_sim`` (IPMI 2.0 on 127.0.0.1 UDP ports), two behind the sushy-tools Redfish emulator; each
   host's machine runs only while its BMC says power is on, and all start powered off
2. write the pool's inventory into a copy of examples/onprem-ipmi (credentials by reference: the BMC password is in
   an environment variable of this process tree only) and list the offerings the pool has
3. order examples/onprem-ipmi/cluster.yaml directly through the driver (hosts claimed, powered on through their
   BMCs, SSH answering), show what the BMC simulators hold, release (powered off, returned to the pool)
4. the same cluster as a Pulumi stack on the real engine: claim, power on, bootstrap over SSH, acceptance gate;
   print the acceptance table, the accepted hosts as a Slurm partition (stack output `slurm`) and a job run through
   it (srun all_reduce_perf); destroy
5. stop everything it started

    .venv/bin/python tools/demo_pool.py
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from demo import DEMO_SCHEDULER, banner, run, run_json, slurm_job  # noqa: E402  (tools/demo.py, beside this file)

EXAMPLE = ROOT / "examples" / "onprem-ipmi"
PASSWORD_ENV = "COLO_A_BMC_PASSWORD"  # the example pool.yaml's credentials reference


def copy_example(dest: Path, pool: Any, key: Path, known_hosts: Path) -> tuple[Path, Path]:
    """examples/onprem-ipmi in ``dest``: pool.yaml describing the simulated pool, ssh paths into the temp folder,
    and the demo's scheduler section (tools/demo.py DEMO_SCHEDULER) so `up` ends with a partition."""
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("venv", "*.claims.json*"))
    name = yaml.safe_load((EXAMPLE / "pool.yaml").read_text())["pool"]
    inventory = pool.inventory(pool=name)
    for host in inventory["hosts"]:
        host["bmc"]["credentials"] = {"user": "admin", "env": PASSWORD_ENV}
    (dest / "pool.yaml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    spec = dest / "cluster.yaml"
    text = spec.read_text()
    for field, value in (("private_key", str(key)), ("known_hosts", str(known_hosts))):
        text, n = re.subn(rf"^(  {field}: )\S+", rf"\g<1>{value}", text, flags=re.M)
        if n != 1:
            raise SystemExit(f"{EXAMPLE}/cluster.yaml: no {field} line to point at the demo's key")
    spec.write_text(text + DEMO_SCHEDULER)
    return spec, dest / "pool.yaml"


def power_line(pool: Any) -> str:
    return ", ".join(f"{h.name} ({h.protocol}) {pool.power(h.name)}" for h in pool.hosts)


def main() -> int:
    if os.geteuid() != 0:
        print("the demo's simulated GPU hosts need root (namespaces, mounts, sshd): run it as root", file=sys.stderr)
        return 2
    missing = [t for t in ("ipmi_sim", "ipmitool") if shutil.which(t) is None]
    if missing:
        print(f"missing: {', '.join(missing)} (Debian: apt-get install openipmi ipmitool, or `make bmc-tools`)",
              file=sys.stderr)
        return 2
    from metalfleet.providers.ipmi import IpmiDriver
    from metalfleet.testing.bmc import start_bmc_pool

    with tempfile.TemporaryDirectory(prefix="metalfleet-demo-pool-") as tmp:
        work = Path(tmp)
        key = work / "ssh" / "colo-a"
        key.parent.mkdir(mode=0o700)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "metalfleet-demo", "-f", str(key)],
                       check=True)
        with start_bmc_pool(("ipmi", "redfish", "ipmi", "redfish"),
                            authorized_keys=[Path(f"{key}.pub").read_text()]) as pool:
            banner("a simulated pool: 4 GPU hosts, each powered by its own BMC")
            for h in pool.hosts:
                where = f"udp 127.0.0.1:{h.port}" if h.protocol == "ipmi" else f"{pool.redfish.url}{h.system}"
                print(f"  {h.name}: ssh {h.address}:22, BMC {h.protocol} at {where}")
            print(f"power: {power_line(pool)}")
            env = {**os.environ, PASSWORD_ENV: pool.password, "PULUMI_CONFIG_PASSPHRASE": "demo",
                   "PULUMI_HOME": str(work / "pulumi-home")}
            spec, inventory = copy_example(work / "onprem-ipmi", pool, key, work / "ssh" / "known_hosts")
            os.environ[PASSWORD_ENV] = pool.password
            print(f"examples/onprem-ipmi copied to {spec.parent}: pool.yaml lists the simulated hosts (BMC password "
                  f"by reference: ${PASSWORD_ENV}), ssh paths point at a throwaway key")

            banner("offerings of the pool (its hosts' hardware, through the offering catalogue)")
            driver = IpmiDriver(inventory)
            for o in driver.offerings():
                print(f"  {o.name}: {o.gpu_count}x {o.gpu_model} {o.gpu_memory_gib} GiB, {o.interconnect.value}, "
                      f"{o.fabric.value} {o.fabric_cards}x, {o.extra['hosts']} host(s) in pool {o.extra['pool']}")

            banner("order the cluster directly through the driver: claim, power on through the BMCs, SSH up")
            cfg = f"inventory={inventory}"
            run("order", str(spec), "--driver-config", cfg, env=env)
            print(f"power: {power_line(pool)}")
            run("release", str(spec), "--driver-config", cfg, env=env)
            print(f"power: {power_line(pool)}")
            if any(pool.power(h.name) == "on" for h in pool.hosts) or driver.list_nodes("llm-colo"):
                print("release left a host claimed or powered on", file=sys.stderr)
                return 1

            banner("the same cluster as a Pulumi stack (real engine, local file backend): claim, bootstrap, gate")
            backend = f"file://{work / 'state'}"
            outputs = run_json("up", str(spec), "--backend", backend, "--driver-config", cfg, "--json",
                               env=env)["outputs"]
            banner("acceptance (stack output `acceptance`)")
            print(outputs["acceptance"])
            print(f"\naccepted: {', '.join(outputs['accepted_ids'])}\nhostfile:\n{outputs['hostfile']}")
            print(f"power: {power_line(pool)}", flush=True)
            banner("the accepted hosts as a Slurm partition (stack output `slurm`), and a job run through it")
            print(outputs["slurm"], flush=True)
            slurm_job(spec, outputs["private_ips"][0], len(outputs["accepted_ids"]))
            run("destroy", str(spec), "--backend", backend, "--driver-config", cfg, env=env)
            print(f"power: {power_line(pool)}")
            if any(pool.power(h.name) == "on" for h in pool.hosts) or driver.list_nodes("llm-colo"):
                print("destroy left a host claimed or powered on", file=sys.stderr)
                return 1
            banner("done: every host powered off and back in the pool; BMC simulators and hosts stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
