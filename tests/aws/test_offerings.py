"""AwsDriver.offerings(): the catalogue's orderable AWS entries merged with the emulator's DescribeInstanceTypes
answer (live facts win; the catalogue adds NVLink bandwidth and the dated prices)."""

from __future__ import annotations

from metalfleet.providers.aws import AwsDriver
from metalfleet.providers.catalog import load_catalog
from metalfleet.providers.models import BillingModel, Fabric, Interconnect
from metalfleet.testing.ec2 import Ec2Emulator
from tests.emulators.fixtures import REGION


def test_offerings_merge_the_live_answer_with_the_catalogue(driver: AwsDriver, emulator: Ec2Emulator) -> None:
    offerings = {o.name: o for o in driver.offerings()}
    catalog = load_catalog()
    assert list(offerings) == [e.name for e in catalog.of("aws", orderable=True)]
    p5en = offerings["p5en.48xlarge"]
    # from DescribeInstanceTypes (the emulator's answer: 144384 MiB, 16 cards with EFA, 8x 3800 GB)
    assert (p5en.gpu_model, p5en.gpu_count, p5en.gpu_memory_gib, p5en.fabric, p5en.fabric_cards) == (
        "H200", 8, 141, Fabric.EFA, 16)
    assert (p5en.vcpus, p5en.memory_gib, p5en.nvme_count, p5en.nvme_size_gib) == (192, 2048, 8, 3539)
    assert p5en.extra["efa_max_interfaces"] == 16 and p5en.fabric_gbps == 3200.0
    # from the catalogue: what the API does not say
    assert (p5en.interconnect, p5en.interconnect_gbps) == (Interconnect.NVSWITCH, 900.0)
    assert p5en.prices == catalog.prices("aws", REGION, "p5en.48xlarge") and p5en.price() is not None
    p5 = offerings["p5.48xlarge"]
    assert [p.billing for p in p5.prices] == [BillingModel.ON_DEMAND, BillingModel.CAPACITY_BLOCK]
    assert offerings["p4d.24xlarge"].interconnect_gbps == 600.0
    for name, o in offerings.items():  # the catalogue's own facts agree with the live answer
        e = catalog.require("aws", name)
        assert (e.gpu_model, e.gpu_count, e.gpu_memory_gib, e.fabric, e.fabric_cards, e.fabric_gbps, e.vcpus,
                e.memory_gib, e.nvme_count, e.nvme_size_gib) == (
            o.gpu_model, o.gpu_count, o.gpu_memory_gib, o.fabric, o.fabric_cards, o.fabric_gbps, o.vcpus,
            o.memory_gib, o.nvme_count, o.nvme_size_gib), name
    assert emulator.calls("DescribeInstanceTypes") == 1


def test_a_region_without_a_price_list_has_offerings_without_prices(emulator: Ec2Emulator) -> None:
    driver = AwsDriver(region="us-west-2", endpoint_url=emulator.url, poll=0.02)
    offerings = driver.offerings()
    assert offerings and all(o.prices == () for o in offerings)
