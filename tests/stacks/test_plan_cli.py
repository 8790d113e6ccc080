"""`metalfleet plan` as a user runs it (a subprocess, no credentials): the issue's question, "64 H100s for 3
months with RDMA: where, and what does it cost", answered from the shipped catalogue, the chosen spec accepted
by `metalfleet validate`, the cost chart written; infeasible and bad requirements answered with the reason."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.stacks.test_offerings_cli import bare_env, run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plan" / "requirements.yaml"


def test_plan_answers_64_h100_for_3_months_and_writes_a_valid_spec(tmp_path: Path) -> None:
    env = bare_env(tmp_path)
    spec, svg = tmp_path / "cluster.yaml", tmp_path / "cost.svg"
    out = run("plan", str(EXAMPLE), "--out", str(spec), "--plot", str(svg), env=env)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith("assumptions:\n")
    assert "the run: 64 GPUs for 3 months = 2190 hours" in text
    assert "aws prices (USD) as of 2025-06-01" in text
    assert "exchange rate given: 1 CNY = 0.14 USD (not fetched; as the requirements say)" in text
    assert "1     aws       us-east-1  8 x p5.48xlarge  64 x H100  capacity_block  605,085.70 USD" in text
    assert "compute: 555,780.10 USD = 8 nodes x 31.464 USD/h x 2208 h (2 Capacity Blocks (91 + 1 days))" in text
    assert "shared storage: 44,544.00 USD = 307200 GiB-months x 0.145 USD" in text
    assert "2     aws       us-east-1  8 x p5.48xlarge  64 x H100  on_demand       1,013,606.40 USD" in text
    assert "aws p4d.24xlarge: its GPU is A100, not H100" in text
    assert "  warm:\n    kind: fsx-lustre\n" in spec.read_text()  # the costed shared file system
    policy = tmp_path / "policy.yaml"  # its encryption is unknown to the spec until the policy config names it
    policy.write_text("rules:\n  MF-ENC-003:\n    known_encrypted: ['fill-in:*']\n")
    validate = run("validate", str(spec), "--policy-config", str(policy), env=env)
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert "valid spec — 8 x p5.48xlarge on aws us-east-1" in validate.stdout
    assert "0 mandatory violation(s)" in validate.stdout
    root = ET.parse(svg).getroot()
    assert len(root.findall("{http://www.w3.org/2000/svg}polyline")) == 2
    second = tmp_path / "second.yaml"
    assert run("plan", str(EXAMPLE), "--option", "2", "--out", str(second), env=env).returncode == 0
    assert "billing: on_demand" in second.read_text()


def test_plan_json_lists_options_and_refusals(tmp_path: Path) -> None:
    (tmp_path / "req.yaml").write_text("nodes: 2\ngpu: [A100]\nmin_gpu_memory_gib: 80\nduration: {days: 7}\n")
    out = run("plan", str(tmp_path / "req.yaml"), "--json", env=bare_env(tmp_path))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [(o["offering"], o["billing"], o["total"]) for o in doc["options"]] == [
        ("p4de.24xlarge", "on_demand", round(2 * 27.447 * 168, 2))]
    assert "aws p4d.24xlarge: 40 GiB per GPU, below min_gpu_memory_gib 80" in doc["rejected"]
    out = run("plan", str(tmp_path / "req.yaml"), "--out", str(tmp_path / "c.yaml"), env=bare_env(tmp_path))
    assert "note: the spec has no owner or cost-center tag" in out.stderr


def test_an_infeasible_plan_exits_1_with_the_reasons(tmp_path: Path) -> None:
    (tmp_path / "req.yaml").write_text("gpus: 64\ngpu: H100\nduration: {months: 3}\nbudget: 100000\n")
    out = run("plan", str(tmp_path / "req.yaml"), "--out", str(tmp_path / "c.yaml"), env=bare_env(tmp_path))
    assert out.returncode == 1
    assert "no offering meets the requirements:" in out.stdout
    assert "over the budget of 100,000.00 USD" in out.stdout
    assert not (tmp_path / "c.yaml").exists()


def test_bad_requirements_exit_2_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "req.yaml").write_text("gpus: 64\nduration: {months: 3}\nexchange_rates: {CNY: -1}\n")
    out = run("plan", str(tmp_path / "req.yaml"), env=bare_env(tmp_path))
    assert out.returncode == 2
    assert "invalid plan requirements" in out.stderr and "exchange_rates" in out.stderr
