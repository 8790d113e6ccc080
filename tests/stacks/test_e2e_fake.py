"""`up / up / refresh / up / destroy` through the real Pulumi engine, on the file-backed fake cloud.

Marked e2e: it needs the engine (`make engine`). The same cycle against the EC2 emulator is in
test_e2e_aws.py; this one isolates the engine + dynamic-provider path from any cloud emulator.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from metalfleet.providers import InvalidSpecError, MetalfleetError, parse_spec
from metalfleet.providers.fake import FakeDriver
from metalfleet.stacks import automation
from metalfleet.stacks.automation import StackOptions
from metalfleet.stacks.dynamic import UNSUBSCRIBE_ENV

from .conftest import stack_options

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("engine-fake")]


def test_engine_lifecycle_on_fake_cloud(tmp_path: Path, pulumi_home: Path, passphrase: str) -> None:
    spec = parse_spec({"name": "e2e-fake", "provider": "fake", "region": "local-1", "offering": "fake.8xh100",
                       "count": 2, "image": "img-1", "bootstrap": {"enabled": False},
                       "acceptance": {"enabled": False}})
    fake_state = tmp_path / "fake.json"
    opts = stack_options(tmp_path, pulumi_home, driver_config={"state_path": str(fake_state)})
    fake = FakeDriver(state_path=fake_state)

    first = automation.up(spec, opts)
    assert first.summary.get("create") == 4  # stack + component + 2 nodes
    ids = first.outputs["node_ids"]
    assert sorted(n.id for n in fake.list_nodes("e2e-fake")) == sorted(ids)
    assert first.outputs["hostfile"].count("slots=8") == 2

    second = automation.up(spec, opts)
    assert set(second.summary) == {"same"}, second.summary

    fake.terminate_out_of_band(ids[0])
    refreshed = automation.refresh(spec, opts)
    assert refreshed.summary.get("delete") == 1

    third = automation.up(spec, opts)
    assert third.summary.get("create") == 1
    new_ids = third.outputs["node_ids"]
    assert new_ids[1] == ids[1] and new_ids[0] != ids[0]
    assert len(fake.list_nodes("e2e-fake")) == 2

    gone = automation.destroy(spec, opts)
    assert gone.summary.get("delete") == 4
    assert fake.list_nodes("e2e-fake") == []


def test_missing_passphrase_is_a_clear_error(
    tmp_path: Path, pulumi_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE_FILE", raising=False)
    spec = parse_spec({"name": "e2e-nopass", "provider": "fake", "region": "local-1", "offering": "fake.8xh100",
                       "count": 1, "image": "img-1"})
    with pytest.raises(InvalidSpecError) as exc:
        automation.up(spec, stack_options(tmp_path, pulumi_home))
    assert exc.value.field == "PULUMI_CONFIG_PASSPHRASE"


def _subscription_stack(tmp_path: Path, pulumi_home: Path, name: str, count: int,
                        billing: str) -> tuple[dict[str, object], StackOptions, FakeDriver]:
    """A fake cluster bought for a term (bootstrap and acceptance off), its stack options and its fake cloud."""
    data: dict[str, object] = {"name": name, "provider": "fake", "region": "local-1", "offering": "fake.8xh100",
                               "count": count, "image": "img-1", "capacity": {"billing": billing},
                               "bootstrap": {"enabled": False}, "acceptance": {"enabled": False}}
    fake_state = tmp_path / "fake.json"
    return (data, stack_options(tmp_path, pulumi_home, driver_config={"state_path": str(fake_state)}),
            FakeDriver(state_path=fake_state))


def test_destroy_ends_subscriptions_only_when_opted_in(tmp_path: Path, pulumi_home: Path, passphrase: str) -> None:
    """`pulumi destroy` of monthly nodes: refused (naming the nodes) and nothing released until the spec opts in
    (`capacity.release_subscriptions`, an in-place update) or the command does (`metalfleet destroy --unsubscribe`)."""
    data, opts, fake = _subscription_stack(tmp_path, pulumi_home, "e2e-sub", 2, "monthly")
    ids = automation.up(parse_spec(data), opts).outputs["node_ids"]
    assert len(fake.subscriptions(ids)) == 2

    with pytest.raises(MetalfleetError) as refused:
        automation.destroy(parse_spec(data), opts)
    assert "subscriptions, so nothing was released" in str(refused.value)
    assert any(i in str(refused.value) for i in ids)
    assert sorted(n.id for n in fake.list_nodes("e2e-sub")) == sorted(ids)

    opted = {**data, "capacity": {"billing": "monthly", "release_subscriptions": True}}
    updated = automation.up(parse_spec(opted), opts)
    assert updated.summary.get("update") == 2 and "replace" not in updated.summary, updated.summary
    assert updated.outputs["node_ids"] == ids

    gone = automation.destroy(parse_spec(opted), opts)
    assert gone.summary.get("delete") == 4
    assert fake.list_nodes("e2e-sub") == [] and fake.subscriptions(ids) == []


def test_destroy_unsubscribe_flag_reaches_the_delete(tmp_path: Path, pulumi_home: Path, passphrase: str) -> None:
    data, opts, fake = _subscription_stack(tmp_path, pulumi_home, "e2e-sub-flag", 1, "reserved_1y")
    automation.up(parse_spec(data), opts)
    flagged = replace(opts, env={UNSUBSCRIBE_ENV: "1"})
    assert automation.destroy(parse_spec(data), flagged).summary.get("delete") == 3
    assert fake.list_nodes("e2e-sub-flag") == []
