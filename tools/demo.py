"""`make demo`: the main job, on the local emulated cloud.

1. start the local EC2 emulator (moto server, extended) on 127.0.0.1
2. list normalised GPU offerings
3. order 2 x p5.48xlarge from examples/aws-p5/cluster.yaml with live progress, print, release
4. the same cluster as a Pulumi stack on the real engine: up, show outputs, destroy
5. stop everything it started

Nothing in metalfleet knows it talks to an emulator: the demo only sets AWS_ENDPOINT_URL and
throwaway credentials for this process tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.emulators.ec2_server import start_ec2_emulator  # noqa: E402

SPEC = ROOT / "examples" / "aws-p5" / "cluster.yaml"
CLI = [sys.executable, "-m", "metalfleet.stacks.cli"]


def banner(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def run(*args: str, env: dict[str, str]) -> None:
    print("$ metalfleet " + " ".join(args), flush=True)
    subprocess.run([*CLI, *args], env=env, check=True)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="metalfleet-demo-") as tmp, start_ec2_emulator() as ec2:
        env = {
            **os.environ,
            "AWS_ENDPOINT_URL": ec2.url,
            "AWS_ACCESS_KEY_ID": "AKIADEMODEMODEMO0000",
            "AWS_SECRET_ACCESS_KEY": "demo-secret-not-real",
            "AWS_DEFAULT_REGION": "us-east-1",
            "PULUMI_CONFIG_PASSPHRASE": "demo",
            "PULUMI_HOME": str(Path(tmp) / "pulumi-home"),
        }
        env.pop("AWS_PROFILE", None)
        banner(f"local EC2 emulator at {ec2.url}")
        banner("GPU offerings (describe_instance_types + dated price table)")
        run("offerings", "--provider", "aws", "--region", "us-east-1", env=env)
        banner(f"order {SPEC.relative_to(ROOT)} directly through the driver")
        run("order", str(SPEC), env=env)
        run("release", str(SPEC), env=env)
        banner("the same cluster as a Pulumi stack (real engine, local file backend)")
        backend = f"file://{Path(tmp) / 'state'}"
        run("up", str(SPEC), "--backend", backend, env=env)
        run("destroy", str(SPEC), "--backend", backend, env=env)
        banner("done: emulator stopped, no node left behind")
    return 0


if __name__ == "__main__":
    sys.exit(main())
