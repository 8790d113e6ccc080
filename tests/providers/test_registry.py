"""The provider records: what the registry, the spec, the catalogue and the price refresh read about each platform."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import EntryPoint

import pytest

from metalfleet.providers import BillingModel, InvalidSpecError, MetalfleetError, parse_spec
from metalfleet.providers.fake import FakeDriver
from metalfleet.providers.record import ProviderRecord
from metalfleet.providers.refresh import PRICE_SOURCES
from metalfleet.providers.registry import _record, available_drivers, provider_record, provider_records
from metalfleet.providers.spec import billing_problem

BUILT_IN = ["alibaba", "aws", "fake", "huawei", "ipmi"]


def test_each_built_in_platform_is_one_registered_record() -> None:
    records = provider_records()
    assert [r.name for r in records] == BUILT_IN == available_drivers()
    for record in records:
        package = "metalfleet.providers." + record.name
        assert sys.modules[package].PROVIDER is record is provider_record(record.name)
        assert callable(record.factory())


def test_reading_every_record_imports_no_sdk() -> None:
    code = ("import json, sys; from metalfleet.providers.registry import provider_records; "
            "[r.factory() for r in provider_records()]; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'pyghmi', "
            "'huaweicloudsdkcore', 'huaweicloudsdkbms', 'alibabacloud_ecs20140526', 'alibabacloud_tea_openapi'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_an_unknown_provider_is_refused_naming_the_registered_ones() -> None:
    with pytest.raises(InvalidSpecError) as info:
        provider_record("nimbus")
    assert info.value.field == "provider" and str(info.value).startswith(
        "unknown provider 'nimbus'; available: alibaba, aws, fake, huawei, ipmi")
    with pytest.raises(InvalidSpecError) as info:
        parse_spec({"name": "train", "provider": "nimbus", "region": "r", "offering": "o", "count": 1, "image": "i"})
    assert info.value.field == "provider" and "unknown provider 'nimbus'; available: alibaba, aws" in str(info.value)


def test_billing_models_each_record_sells() -> None:
    assert billing_problem("aws", BillingModel.MONTHLY) == (
        "aws does not sell monthly nodes through metalfleet: capacity.billing must be one of on_demand, "
        "reserved_1y, reserved_3y, capacity_block")
    assert billing_problem("ipmi", BillingModel.SPOT) == (
        "ipmi does not sell spot nodes through metalfleet: capacity.billing must be one of on_demand")
    assert str(billing_problem("huawei", BillingModel.RESERVED_3Y)).startswith(
        "Huawei BMS orders at most one year at a time")
    assert billing_problem("huawei", BillingModel.MONTHLY) is None
    assert billing_problem("alibaba", BillingModel.SPOT) is None
    assert all(billing_problem("fake", b) is None for b in BillingModel)


def test_the_price_refresh_asks_the_records_with_a_price_source() -> None:
    assert sorted(PRICE_SOURCES) == ["alibaba", "aws", "huawei"] == [
        r.name for r in provider_records() if r.price_source]
    assert {name: PRICE_SOURCES[name]().currency for name in PRICE_SOURCES} == {
        "alibaba": "CNY", "aws": "USD", "huawei": "CNY"}
    assert "fake" not in PRICE_SOURCES


def test_a_driver_only_entry_point_is_a_record_without_rules_and_a_record_must_be_one() -> None:
    old = EntryPoint(name="legacy", value="metalfleet.providers.fake:FakeDriver", group="metalfleet.drivers")
    assert _record("legacy", old) == ProviderRecord(name="legacy", driver=FakeDriver)
    wrong = EntryPoint(name="wrong", value="metalfleet.providers.fake:FakeDriver", group="metalfleet.providers")
    with pytest.raises(MetalfleetError, match="is not the ProviderRecord of provider 'wrong'"):
        _record("wrong", wrong)
