"""The `metalfleet` command line, run as a user runs it (a subprocess of the installed entry point)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "metalfleet.stacks.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, check=False)


def test_offerings_filters_and_prints_json() -> None:
    out = run("offerings", "--provider", "fake", "--gpu", "H100", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["name"] for r in rows] == ["fake.8xh100"]
    assert rows[0]["prices"][0]["currency"] == "USD" and rows[0]["prices"][0]["as_of"]
    roce = json.loads(run("offerings", "--provider", "fake", "--fabric", "roce", "--json").stdout)
    assert [r["fabric"] for r in roce] == ["roce"]
    assert json.loads(run("offerings", "--provider", "fake", "--min-gpus", "9", "--json").stdout) == []


def test_offerings_table_has_a_header_and_a_row_per_offering() -> None:
    out = run("offerings", "--provider", "fake")
    lines = out.stdout.splitlines()
    assert lines[0].split()[:2] == ["provider", "name"]
    assert sum("fake.8x" in line for line in lines) == 2


def test_bad_spec_exits_2_naming_the_field(tmp_path: Path) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text("name: demo\nprovider: fake\nregion: r\noffering: fake.8xh100\ncount: 2\nimage: i\ncuont: 3\n")
    out = run("validate", str(spec))
    assert out.returncode == 2
    assert "cuont" in out.stderr and "unknown key" in out.stderr


def test_order_then_release_on_the_fake_cloud(tmp_path: Path) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text("name: clidemo\nprovider: fake\nregion: local-1\noffering: fake.8xa100\ncount: 3\nimage: i\n")
    state = f"state_path={tmp_path / 'fake.json'}"
    out = run("order", str(spec), "--driver-config", state, "--json")
    assert out.returncode == 0, out.stderr
    nodes = json.loads(out.stdout)
    assert len(nodes) == 3 and {n["state"] for n in nodes} == {"running"}
    again = json.loads(run("order", str(spec), "--driver-config", state, "--json").stdout)
    assert sorted(n["id"] for n in again) == sorted(n["id"] for n in nodes), "re-run must buy nothing new"
    rel = run("release", str(spec), "--driver-config", state)
    assert rel.returncode == 0 and "released 3 node(s)" in rel.stdout
    assert "released 0 node(s)" in run("release", str(spec), "--driver-config", state).stdout


def test_release_of_subscriptions_needs_unsubscribe(tmp_path: Path) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text("name: clisub\nprovider: fake\nregion: local-1\noffering: fake.8xa100\ncount: 2\nimage: i\n"
                    "capacity:\n  billing: monthly\n")
    state = f"state_path={tmp_path / 'fake.json'}"
    ids = [n["id"] for n in json.loads(run("order", str(spec), "--driver-config", state, "--json").stdout)]
    refused = run("release", str(spec), "--driver-config", state)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "capacity.release_subscriptions" in refused.stderr and all(i in refused.stderr for i in ids)
    assert "expires 20" in refused.stderr and "--unsubscribe" in refused.stderr
    done = run("release", str(spec), "--driver-config", state, "--unsubscribe")
    assert done.returncode == 0 and "released 2 node(s)" in done.stdout, done.stderr


def test_unknown_provider_is_refused() -> None:
    out = run("offerings", "--provider", "nimbus")
    assert out.returncode == 2 and "nimbus" in out.stderr


def test_two_orders_of_one_spec_at_once_buy_it_once(tmp_path: Path) -> None:
    """Two `metalfleet order` of the same spec at the same time (the cluster lock: the second waits, then finds the
    first's nodes by their keys)."""
    spec = tmp_path / "c.yaml"
    spec.write_text("name: clirace\nprovider: fake\nregion: local-1\noffering: fake.8xa100\ncount: 4\nimage: i\n")
    args = [*CLI, "order", str(spec), "--driver-config", f"state_path={tmp_path / 'fake.json'}",
            "--driver-config", "boot_seconds=0.5", "--json"]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    a, b = (sorted(n["id"] for n in json.loads(out)) for out, _ in outs)
    assert a == b and len(a) == 4
    rel = run("release", str(spec), "--driver-config", f"state_path={tmp_path / 'fake.json'}")
    assert "released 4 node(s)" in rel.stdout


def test_a_failed_order_says_what_it_released_in_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text("name: clifail\nprovider: fake\nregion: local-1\noffering: fake.8xa100\ncount: 3\nimage: i\n")
    out = run("order", str(spec), "--driver-config", f"state_path={tmp_path / 'fake.json'}",
              "--driver-config", "capacity=1")
    assert out.returncode == 1
    [line] = out.stderr.strip().splitlines()[-1:]
    assert line.startswith("error: 2 of 3 node(s) failed") and "released 1 node(s) this order made" in line
    assert "Traceback" not in out.stderr
    gone = run("release", str(spec), "--driver-config", f"state_path={tmp_path / 'fake.json'}")
    assert "released 0 node(s)" in gone.stdout


def test_a_bad_retry_deadline_is_refused_naming_the_flag(tmp_path: Path) -> None:
    for bad in ("-1", "0", "inf", "nan", "1x"):
        out = run("order", str(tmp_path / "missing.yaml"), "--retry-deadline", bad)
        assert out.returncode == 2 and "--retry-deadline" in out.stderr and repr(bad) in out.stderr, out.stderr


def test_a_bad_flag_is_one_line_pointing_at_help() -> None:
    for args in (["order", "x.yaml", "--retry-deadline", "soon"], ["plan", "--top", "-2", "x.yaml"], ["frob"],
                 ["policy", "check"]):
        out = run(*args)
        assert out.returncode == 2, out
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "error:" in lines[0] and "--help" in lines[0], out.stderr
