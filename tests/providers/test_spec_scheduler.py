"""The spec's ``scheduler`` section (issue 24): a good section of either mode parses, and every bad one is refused
before any call with the field path named and the bad value shown (a literal munge key never shown)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from metalfleet.providers import InvalidSpecError, parse_spec
from metalfleet.providers.spec import ClusterSpec, SchedulerSpec, load_spec
from metalfleet.stacks.cli import main
from tests.specs import cluster_spec_data

KEY_ENV = "MF_TEST_MUNGE_KEY_B64"
JOIN = {"address": "slurmctl.example.com:6817", "munge_key": f"env:{KEY_ENV}"}


@pytest.fixture(autouse=True)
def _munge_key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "c2VjcmV0LWtleS1tYXRlcmlhbC1mb3ItdGVzdHM=")


def _data(scheduler: Any, count: int = 3) -> dict[str, Any]:
    return cluster_spec_data("fake", "slurmy", count, scheduler=scheduler)


def _spec(scheduler: Any, count: int = 3) -> ClusterSpec:
    return parse_spec(_data(scheduler, count))


def _sched(scheduler: Any, count: int = 3) -> SchedulerSpec:
    spec = _spec(scheduler, count)
    assert spec.scheduler is not None
    return spec.scheduler


def _err(scheduler: Any, count: int = 3) -> InvalidSpecError:
    with pytest.raises(InvalidSpecError) as exc:
        _spec(scheduler, count)
    return exc.value


def test_no_section_means_no_scheduler() -> None:
    assert parse_spec(cluster_spec_data("fake", "plain", 2)).scheduler is None


def test_join_mode_parses_with_its_endpoint_and_key_reference() -> None:
    s = _sched({"kind": "slurm", "partition": "gpu", "join": JOIN, "features": ["ib", "a100-pool"],
                "health_check": {"enabled": False, "interval_s": 300}})
    assert s.join_endpoint() == ("slurmctl.example.com", 6817)
    assert s.controller_node_index() is None
    assert s.munge_key_source() == ("env", KEY_ENV) and s.munge_key_problem() is None
    assert s.partition_name("slurmy") == "gpu" and s.features == ["ib", "a100-pool"]
    assert s.health_check is not None and (s.health_check.enabled, s.health_check.interval_s) == (False, 300)


@pytest.mark.parametrize(("address", "endpoint"), [
    ("10.0.0.5", ("10.0.0.5", 6817)), ("ctl:7000", ("ctl", 7000)), ("[fd00::5]:6900", ("fd00::5", 6900)),
    ("fd00::5", ("fd00::5", 6817)), ("ctl.example.com.", ("ctl.example.com.", 6817)),
])
def test_join_addresses_give_host_and_port(address: str, endpoint: tuple[str, int]) -> None:
    assert _sched({"kind": "slurm", "join": {**JOIN, "address": address}}).join_endpoint() == endpoint


@pytest.mark.parametrize("controller", [{"node": 2}, {"host": "10.0.0.5"}, {"host": "slurmctl.example.com"}])
def test_controller_mode_parses_and_needs_no_munge_key(controller: dict[str, Any]) -> None:
    s = _sched({"kind": "slurm", "controller": controller})
    assert s.controller_node_index() == controller.get("node") and s.join_endpoint() is None
    assert s.munge_key_source() is None and s.munge_key_problem() is None
    assert s.partition_name("slurmy") == "slurmy", "no partition named: the cluster's name"
    assert s.health_check is None


def test_controller_mode_takes_a_munge_key_reference_too() -> None:
    s = _sched({"kind": "slurm", "controller": {"node": 0, "munge_key": "config:mungeKey"}})
    assert s.munge_key_source() == ("config", "mungeKey")
    assert s.munge_key_problem() is None, "config: only the stack can read"


def test_a_given_health_check_section_is_on() -> None:
    s = _sched({"kind": "slurm", "controller": {"node": 0}, "health_check": {"interval_s": 3600}})
    assert s.health_check is not None and s.health_check.enabled and s.health_check.interval_s == 3600


@pytest.mark.parametrize(("scheduler", "field", "value", "says"), [
    ({"kind": "pbs", "controller": {"node": 0}}, "scheduler.kind", "pbs", "known: slurm"),
    ({"kind": "slurm"}, "scheduler", "neither controller nor join", "exactly one of controller"),
    ({"kind": "slurm", "controller": {"node": 0}, "join": JOIN}, "scheduler", "controller and join",
     "exactly one of controller"),
    ({"kind": "slurm", "controller": {}}, "scheduler.controller", "neither node nor host", "exactly one of node"),
    ({"kind": "slurm", "controller": {"node": 0, "host": "h1"}}, "scheduler.controller", "node=0, host='h1'",
     "exactly one of node"),
    ({"kind": "slurm", "controller": {"node": 3}}, "scheduler.controller.node", 3, "0..2, count 3"),
    ({"kind": "slurm", "controller": {"node": -1}}, "scheduler.controller.node", -1, "0 or more"),
    ({"kind": "slurm", "controller": {"host": ""}}, "scheduler.controller.host", "", "empty host"),
    ({"kind": "slurm", "controller": {"host": "ctl host"}}, "scheduler.controller.host", "ctl host",
     "neither an IP address nor a DNS name"),
    ({"kind": "slurm", "controller": {"host": "10.0.0.300"}}, "scheduler.controller.host", "10.0.0.300",
     "not a valid IP address"),
    ({"kind": "slurm", "join": {**JOIN, "address": "ctl:0"}}, "scheduler.join.address", "ctl:0",
     "unknown controller"),
    ({"kind": "slurm", "join": {**JOIN, "address": "ctl:65536"}}, "scheduler.join.address", "ctl:65536",
     "unknown controller"),
    ({"kind": "slurm", "join": {**JOIN, "address": "ctl:http"}}, "scheduler.join.address", "ctl:http",
     "unknown controller"),
    ({"kind": "slurm", "join": {**JOIN, "address": ":6817"}}, "scheduler.join.address", ":6817",
     "unknown controller"),
    ({"kind": "slurm", "join": {**JOIN, "address": "[ctl]:6817"}}, "scheduler.join.address", "[ctl]:6817",
     "unknown controller"),
    ({"kind": "slurm", "join": {**JOIN, "address": "a_b.example.com"}}, "scheduler.join.address",
     "a_b.example.com", "unknown controller"),
    ({"kind": "slurm", "join": {"address": "ctl"}}, "scheduler.join.munge_key", None, "missing munge key"),
    ({"kind": "slurm", "join": {**JOIN, "munge_key": "env:"}}, "scheduler.join.munge_key", "env:",
     "names no environment variable"),
    ({"kind": "slurm", "join": {**JOIN, "munge_key": "file:"}}, "scheduler.join.munge_key", "file:",
     "names no file"),
    ({"kind": "slurm", "join": {**JOIN, "munge_key": "vault:kv/munge"}}, "scheduler.join.munge_key",
     "<14 characters, not shown>", "use env:NAME, file:PATH or config:NAME"),
    ({"kind": "slurm", "partition": "gpu pool", "controller": {"node": 0}}, "scheduler.partition", "gpu pool",
     "partition name"),
    ({"kind": "slurm", "partition": "p" * 41, "controller": {"node": 0}}, "scheduler.partition", "p" * 41,
     "partition name"),
    ({"kind": "slurm", "controller": {"node": 0}, "features": ["ib", "a&b"]}, "scheduler.features[1]", "a&b",
     "feature name"),
    ({"kind": "slurm", "controller": {"node": 0}, "features": ["ib", "ib"]}, "scheduler.features[1]", "ib",
     "listed twice"),
    ({"kind": "slurm", "controller": {"node": 0}, "health_check": {"interval_s": 30}},
     "scheduler.health_check.interval_s", 30, "greater than or equal to 60"),
    ({"kind": "slurm", "controller": {"node": 0}, "health_check": {"interval_s": 86401}},
     "scheduler.health_check.interval_s", 86401, "less than or equal to 86400"),
    ({"kind": "slurm", "join": {**JOIN, "port": 6817}}, "scheduler.join.port", 6817, "unknown key"),
    ({"kind": "slurm", "join": JOIN, "settings": {"TaskPlugin": "task/none"}}, "scheduler.settings", "settings",
     "its slurm.conf is the site's"),
    ({"kind": "slurm", "join": JOIN, "health_check": {}}, "scheduler.health_check", "health_check",
     "its slurm.conf is the site's"),
    ({"kind": "slurm", "join": JOIN, "node_port_base": 20000}, "scheduler.node_port_base", "node_port_base",
     "its SlurmdPort"),
])
def test_a_bad_section_names_the_field_and_shows_the_value(scheduler: dict[str, Any], field: str, value: Any,
                                                           says: str) -> None:
    e = _err(scheduler)
    assert (e.field, e.value) == (field, value), str(e)
    assert says in str(e)


@pytest.mark.parametrize("key", ["c2VjcmV0LWtleS1tYXRlcmlhbC1mb3ItdGVzdHM=", "0123456789abcdef" * 4,
                                 "hunter2:not-a-scheme"])
def test_key_material_in_the_spec_is_refused_and_never_shown(key: str) -> None:
    e = _err({"kind": "slurm", "join": {**JOIN, "munge_key": key}})
    assert e.field == "scheduler.join.munge_key" and e.value == f"<{len(key)} characters, not shown>"
    assert "never put the munge key itself in the spec" in str(e) and "env:NAME" in str(e)
    assert key not in str(e)
    e = _err({"kind": "slurm", "controller": {"node": 0, "munge_key": key}})
    assert e.field == "scheduler.controller.munge_key" and key not in str(e)


def test_an_unset_or_empty_env_reference_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV)
    e = _err({"kind": "slurm", "join": JOIN})
    assert (e.field, e.value) == ("scheduler.join.munge_key", f"env:{KEY_ENV}")
    assert f"environment variable {KEY_ENV} is not set" in str(e)
    monkeypatch.setenv(KEY_ENV, "")
    assert f"{KEY_ENV} is empty" in str(_err({"kind": "slurm", "join": JOIN}))


def test_a_file_reference_must_name_a_non_empty_file(tmp_path: Path) -> None:
    key = tmp_path / "munge.key"
    join = {**JOIN, "munge_key": f"file:{key}"}
    e = _err({"kind": "slurm", "join": join})
    assert (e.field, e.value) == ("scheduler.join.munge_key", f"file:{key}") and "No such file" in str(e)
    key.write_bytes(b"")
    assert "is empty" in str(_err({"kind": "slurm", "join": join}))
    e = _err({"kind": "slurm", "join": {**JOIN, "munge_key": f"file:{tmp_path}"}})
    assert "is not a file" in str(e)
    key.write_bytes(bytes(range(256)) * 4)  # a munge key is binary
    s = _sched({"kind": "slurm", "join": join})
    assert s.munge_key_source() == ("file", str(key)) and s.munge_key_problem() is None


def test_munge_key_problem_reads_the_environment_when_called(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _sched({"kind": "slurm", "join": JOIN})
    monkeypatch.delenv(KEY_ENV)
    assert s.munge_key_problem() == f"environment variable {KEY_ENV} is not set"


def test_references_unchecked_when_the_command_does_not_use_them(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    monkeypatch.delenv(KEY_ENV)
    spec = parse_spec(_data({"kind": "slurm", "join": JOIN}), check_references=False)
    assert spec.scheduler is not None and spec.scheduler.munge_key_problem() is not None
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(_data({"kind": "slurm", "join": JOIN})))
    assert load_spec(path, check_references=False).scheduler is not None
    with pytest.raises(InvalidSpecError):
        load_spec(path)
    e = _err_data(_data({"kind": "slurm", "join": {**JOIN, "munge_key": "plainkey"}}))
    assert e.field == "scheduler.join.munge_key", "the shape of a reference is checked either way"


def _err_data(data: dict[str, Any]) -> InvalidSpecError:
    with pytest.raises(InvalidSpecError) as exc:
        parse_spec(data, check_references=False)
    return exc.value


@pytest.mark.parametrize(("scheduler", "field", "says"), [
    ({"kind": "lsf", "controller": {"node": 0}}, "scheduler.kind", "unknown scheduler kind 'lsf'"),
    ({"kind": "slurm", "join": {"address": "ctl:99999", "munge_key": f"env:{KEY_ENV}"}}, "scheduler.join.address",
     "unknown controller"),
    ({"kind": "slurm", "join": {"address": "ctl"}}, "scheduler.join.munge_key", "missing munge key"),
])
def test_metalfleet_validate_refuses_a_bad_section_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], scheduler: dict[str, Any], field: str, says: str) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(_data(scheduler)))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{field}: " in err and says in err and str(path) in err


def test_metalfleet_validate_takes_a_good_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cluster.yaml"
    data = {**_data({"kind": "slurm", "join": JOIN}), "tags": {"owner": "ml", "cost-center": "4711"}}
    path.write_text(yaml.safe_dump(data))
    assert main(["validate", str(path)]) == 0
    assert "valid spec" in capsys.readouterr().out


def test_release_needs_no_munge_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Validating a spec whose key variable is unset fails; releasing its nodes does not need the key."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(_data({"kind": "slurm", "join": JOIN})))
    monkeypatch.delenv(KEY_ENV)
    monkeypatch.setenv("METALFLEET_STATE_DIR", str(tmp_path / "state"))
    assert main(["validate", str(path)]) == 2
    assert "scheduler.join.munge_key" in capsys.readouterr().err
    assert main(["release", str(path)]) == 0
    assert "released 0 node(s) of cluster slurmy" in capsys.readouterr().out


def test_a_scheduler_needs_the_acceptance_gate() -> None:
    data = {**_data({"kind": "slurm", "controller": {"node": 0}}), "acceptance": {"enabled": False}}
    with pytest.raises(InvalidSpecError) as exc:
        parse_spec(data)
    assert exc.value.field == "scheduler" and "acceptance.enabled must be true" in str(exc.value)
