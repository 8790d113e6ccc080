"""`up / up / refresh / up / destroy` through the real Pulumi engine, on the file-backed fake cloud.

Marked e2e: it needs the engine (`make engine`). The same cycle against the EC2 emulator is in
test_e2e_aws.py; this one isolates the engine + dynamic-provider path from any cloud emulator.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from metalfleet.providers import InvalidSpecError, parse_spec
from metalfleet.providers.fake import FakeDriver
from metalfleet.stacks import automation

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
