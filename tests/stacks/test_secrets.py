"""The secret guard (stacks/secrets.py): its rule on values, the split into plain and secret inputs, and
how the dynamic providers put secrets back in memory only. Providers run against the file-backed fake
cloud; the component runs under the Pulumi mocks of test_components (one set of mocks per process)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi.runtime import config as runtime_config

from metalfleet.providers import InvalidSpecError, MetalfleetError, parse_spec
from metalfleet.providers.fake import FakeDriver
from metalfleet.providers.models import node_spec_to_dict
from metalfleet.stacks.node import NodeProvider
from metalfleet.stacks.secrets import (
    MARK,
    check_driver_config,
    credential_kind,
    guarded,
    marked_values,
    private_key_file,
    reveal,
    scrub_outputs,
    split,
)
from tests.stacks.test_components import _SECRET_SIG, _SIG_KEY, MOCKS, _spec

AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example values
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n" \
      "-----END OPENSSH PRIVATE KEY-----\n"


@pytest.fixture
def stack_config() -> Iterator[Any]:
    """Set the engine's config (and which keys are secret) as a language host does; restored after."""
    saved = (runtime_config.CONFIG.get(), runtime_config._SECRET_KEYS.get())

    def set_config(values: dict[str, str], secret_keys: list[str]) -> None:
        pulumi.runtime.set_all_config(values, secret_keys)

    yield set_config
    runtime_config.CONFIG.set(saved[0])
    runtime_config._SECRET_KEYS.set(saved[1])


# -- the rule on values ------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "kind"), [
    (AWS_KEY_ID, "an AWS access key id"),
    (f"https://{AWS_KEY_ID}@example.com", "an AWS access key id"),
    (AWS_SECRET, "an AWS secret access key"),
    (f"secret={AWS_SECRET};", "an AWS secret access key"),
    ("IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD", "an AWS session token"),
    (PEM, "a private key"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIE...", "a private key"),
    ("PuTTY-User-Key-File-3: ssh-ed25519", "a private key"),
])
def test_credential_shapes_are_recognised_whatever_they_sit_in(value: str, kind: str) -> None:
    assert credential_kind(value) == kind


@pytest.mark.parametrize("value", [
    "/Users/Alice/Projects/Metalfleet/Keys/a1",  # 40 characters of the alphabet, but few distinct ones
    "0123456789abcdef0123456789abcdef01234567",  # a git sha: no upper case
    "ami-0123456789abcdef0", "subnet-54ebca3a3af69685d", "~/.ssh/metalfleet-p5", "us-east-1",
    "resolve:ssm:/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPinnedAtCreate host", "AKIA-not-a-key",
])
def test_ordinary_values_are_not_mistaken_for_credentials(value: str) -> None:
    assert credential_kind(value) is None


def test_driver_config_credentials_are_refused_by_key_name_and_by_value() -> None:
    with pytest.raises(InvalidSpecError) as exc:
        check_driver_config({"region": "us-east-1"}, {"secret_key": "x"})
    assert exc.value.field == "driver_config.secret_key"
    with pytest.raises(InvalidSpecError) as exc:
        check_driver_config({"endpoint_url": f"https://{AWS_KEY_ID}:x@ec2.example.com"})
    assert exc.value.field == "driver_config.endpoint_url"
    assert AWS_KEY_ID not in str(exc.value) and exc.value.value == "***"
    with pytest.raises(InvalidSpecError, match="AWS secret access key"):
        check_driver_config({}, {"profile": AWS_SECRET})  # marked secret or not: credentials are never inputs
    check_driver_config({"region": "us-east-1"}, {"profile": "prod-admin"})


def test_split_moves_marked_values_whole_and_refuses_credentials_left_in_plain() -> None:
    data = {"ssh": {"private_key": "/keys/team-prod", "bastion": "ops@jump.team-prod.internal", "port": 22},
            "tags": {"env": "a", "team": "a-team"}, "count": 2}
    plain, entries = split("spec", data, frozenset({"/keys/team-prod", "team-prod", "a", "2"}))
    assert plain == {"ssh": {"private_key": MARK, "bastion": MARK, "port": 22},
                     "tags": {"env": MARK, "team": "a-team"}, "count": 2}, "short marks match whole strings only"
    assert sorted((w, p, v) for w, p, v in entries) == [
        ("spec", ("ssh", "bastion"), "ops@jump.team-prod.internal"),
        ("spec", ("ssh", "private_key"), "/keys/team-prod"),
        ("spec", ("tags", "env"), "a")]
    assert data["ssh"]["private_key"] == "/keys/team-prod", "the caller's data is not modified"

    with pytest.raises(InvalidSpecError) as exc:
        split("spec", {"ssh": {"private_key": PEM}}, frozenset())
    assert exc.value.field == "spec.ssh.private_key" and "--secret" in str(exc.value)
    assert "OPENSSH" not in str(exc.value)
    plain, entries = split("spec", {"ssh": {"private_key": PEM}}, frozenset({PEM}))
    assert plain["ssh"]["private_key"] == MARK and entries == [("spec", ("ssh", "private_key"), PEM)]
    with pytest.raises(InvalidSpecError, match="AWS secret access key"):
        split("spec", {"tags": {"note": AWS_SECRET}}, frozenset({AWS_SECRET}))


def test_marked_values_are_the_leaves_of_config_set_with_secret(stack_config: Any) -> None:
    stack_config({"proj:plain": "visible", "proj:token": "s3cr3t-value", "metalfleet:driverConfig":
                  '{"profile": "prod-admin", "poll": 2, "nested": {"x": "deep-one"}}'},
                 ["proj:token", "metalfleet:driverConfig"])
    marked = marked_values(["explicit-one"])
    assert {"s3cr3t-value", "prod-admin", "deep-one", "explicit-one"} <= marked
    assert "visible" not in marked and "2" not in marked


# -- providers put secrets back in memory only --------------------------------------------------------

@pytest.fixture
def node_props(tmp_path: Path) -> dict[str, Any]:
    """A node whose driver setting and one tag are secret, as GpuCluster declares them."""
    spec = parse_spec({"name": "sec", "provider": "fake", "region": "local-1", "offering": "fake.8xh100",
                       "count": 1, "image": "img-1", "tags": {"cost-center": "cc-hidden-4711"}})
    state = str(tmp_path / "hidden-state-dir" / "fake.json")
    node_spec, entries = split("spec", node_spec_to_dict(spec.node_spec(0, "fake.8xh100")),
                               frozenset({"cc-hidden-4711"}))
    return {"provider": "fake", "driver_config": {"region": "local-1", "state_path": MARK}, "spec": node_spec,
            "secrets": [[w, list(p), v] for w, p, v in entries] + [["driver_config", ["state_path"], state]]}


def test_node_provider_uses_secrets_but_returns_them_only_in_secrets(node_props: dict[str, Any]) -> None:
    p = NodeProvider()
    created = p.create(node_props)
    state_path = node_props["secrets"][-1][2]
    fake = FakeDriver(state_path=state_path)
    assert fake.get(created.id).tags["cost-center"] == "cc-hidden-4711", "the cloud gets the real tag"
    plain = {k: v for k, v in created.outs.items() if k != "secrets"}
    assert "cc-hidden-4711" not in str(plain) and "hidden-state-dir" not in str(plain)
    assert plain["tags"]["cost-center"] == MARK and plain["driver_config"]["state_path"] == MARK
    assert created.outs["secrets"] == node_props["secrets"]
    assert p.read(created.id, created.outs).id == created.id
    # a change of a secret setting alone is a change (here: replace, as for any driver setting)
    moved = {**node_props, "secrets": [*node_props["secrets"][:-1], ["driver_config", ["state_path"], "/other"]]}
    assert p.diff(created.id, created.outs, moved).replaces == ["driver_config"]
    assert not p.diff(created.id, created.outs, node_props).changes
    p.delete(created.id, created.outs)
    assert fake.get(created.id).state.value == "terminated"


def test_errors_that_carry_a_secret_are_scrubbed_and_unchained() -> None:
    props = {"secrets": [["spec", ["ssh", "private_key"], "/keys/hidden-one"], ["spec", ["x"], PEM]]}
    with pytest.raises(MetalfleetError) as exc, guarded(props):
        try:
            raise OSError("cannot open /keys/hidden-one")
        except OSError as inner:
            raise RuntimeError("connect failed") from inner  # the secret is only in the cause
    assert "hidden-one" not in str(exc.value) and exc.value.__cause__ is None and exc.value.__suppress_context__
    with pytest.raises(MetalfleetError) as exc, guarded(props):
        raise ValueError(f"bad key line {PEM.splitlines()[1]}")
    assert PEM.splitlines()[1] not in str(exc.value) and MARK in str(exc.value)
    original = KeyError("plain")
    with pytest.raises(KeyError) as raised, guarded(props):
        raise original
    assert raised.value is original, "an error without secrets passes unchanged"
    assert scrub_outputs({"table": "key /keys/hidden-one", "secrets": props["secrets"]}, props) == {
        "table": f"key {MARK}", "secrets": props["secrets"]}
    short = {"secrets": [["spec", ["tags", "env"], "1"]]}
    assert scrub_outputs({"hostfile": "10.0.0.1 slots=8\n", "env": "1"}, short) == {
        "hostfile": "10.0.0.1 slots=8\n", "env": MARK}, "a short secret is scrubbed whole, never inside text"


def test_reveal_puts_secrets_back_without_touching_the_stored_props() -> None:
    props = {"spec": {"ssh": {"private_key": MARK, "port": 22}, "requirements": None},
             "secrets": [["spec", ["ssh", "private_key"], "/k"], ["spec", ["requirements", "gpu"], "H100"]]}
    full = reveal(props)
    assert full["spec"] == {"ssh": {"private_key": "/k", "port": 22}, "requirements": {"gpu": "H100"}}
    assert props["spec"]["ssh"]["private_key"] == MARK


def test_key_material_becomes_a_private_file_for_the_run_only() -> None:
    with private_key_file({"ssh": {"private_key": PEM, "user": "u"}}) as spec:
        path = spec["ssh"]["private_key"]
        assert Path(path).read_text() == PEM and stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert spec["ssh"]["user"] == "u"
    assert not Path(path).exists() and not Path(path).parent.exists()
    with private_key_file({"ssh": {"private_key": "~/.ssh/id"}}) as spec:
        assert spec["ssh"]["private_key"] == "~/.ssh/id"


# -- the component declares plain inputs and one secret input per resource ---------------------------

def _secret_value(wire: Any) -> Any:
    assert isinstance(wire, dict) and wire.get(_SIG_KEY) == _SECRET_SIG, f"not sent as a secret: {wire!r}"
    return wire["value"]


@pulumi.runtime.test
def test_cluster_keeps_config_secrets_and_secret_outputs_out_of_plain_inputs(tmp_path: Path,
                                                                             stack_config: Any) -> Any:
    from metalfleet.stacks.cluster import GpuCluster

    stack_config({"proj:team": "team-hidden-77"}, ["proj:team"])
    MOCKS.created.clear()
    spec = _spec(name="sec1", count=1, tags={"team": "team-hidden-77"}, bootstrap={"enabled": True},
                 acceptance={"enabled": True})
    state_path = str(tmp_path / "hidden-state" / "f.json")
    key = pulumi.Output.secret("/keys/from-an-output")
    cluster = GpuCluster("s1", spec, secret_driver_config={"state_path": state_path},
                         secret_spec={"ssh.private_key": key})

    def check(_: Any) -> None:
        made = {r.name: r.inputs for r in MOCKS.created if r.typ.startswith("pulumi-python:dynamic/metalfleet:")}
        assert sorted(made) == ["s1-0", "s1-0-bootstrap", "s1-acceptance"]
        for name, inputs in made.items():
            plain = {k: v for k, v in inputs.items() if k not in ("secrets", "__provider")}
            assert not any(s in str(plain) for s in ("team-hidden-77", "hidden-state", "from-an-output")), name
            secrets = _secret_value(inputs["secrets"])
            assert ["spec", ["tags", "team"], "team-hidden-77"] in secrets, name
        node = made["s1-0"]
        assert node["driver_config"]["state_path"] == MARK
        assert ["driver_config", ["state_path"], state_path] in _secret_value(node["secrets"])
        for name in ("s1-0-bootstrap", "s1-acceptance"):
            assert ["spec", ["ssh", "private_key"], "/keys/from-an-output"] in _secret_value(made[name]["secrets"])
        assert ["driver_config", ["state_path"], state_path] in _secret_value(made["s1-acceptance"]["secrets"])

    return cluster.hostfile.apply(check)


def test_only_apply_time_fields_may_be_secret_outputs() -> None:
    from metalfleet.stacks.cluster import GpuCluster

    with pytest.raises(InvalidSpecError) as exc:
        GpuCluster("s2", _spec(), secret_spec={"count": pulumi.Output.secret("3")})
    assert exc.value.field == "secret_spec.count"
