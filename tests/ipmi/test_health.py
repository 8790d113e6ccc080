"""Which SEL records quarantine a host (a pure function over the IPMI record layout; no BMC needed)."""

from __future__ import annotations

import pytest

from metalfleet.providers.ipmi.health import critical_event


def record(sensor_type: int, sensor: int, dir_type: int, data1: int, kind: int = 0x02) -> bytes:
    """A 16-byte SEL record: id 1, ``kind``, timestamp 0, generator 0x20, EvM rev 4, the event fields."""
    return bytes([0x01, 0x00, kind, 0, 0, 0, 0, 0x20, 0x00, 0x04, sensor_type, sensor, dir_type, data1, 0xFF, 0xFF])


@pytest.mark.parametrize(("rec", "expected"), [
    (record(0x08, 0x01, 0x6F, 0x01), "power supply failure detected (sensor 0x01)"),
    (record(0x08, 0x02, 0x6F, 0x03), "power supply input lost (sensor 0x02)"),
    (record(0x0C, 0x10, 0x6F, 0xA1), "uncorrectable memory ECC error (sensor 0x10)"),  # data1 high bits: flags
    (record(0x01, 0x30, 0x01, 0x59), "temperature sensor 0x30 above its upper critical threshold"),
    (record(0x04, 0x40, 0x01, 0x52), "fan sensor 0x40 below its lower critical threshold"),
    (record(0x08, 0x01, 0xEF, 0x01), None),  # deasserted: the supply is back
    (record(0x08, 0x01, 0x6F, 0x00), None),  # presence detected
    (record(0x08, 0x01, 0x6F, 0x02), None),  # predictive failure: a warning, not a fault
    (record(0x01, 0x30, 0x01, 0x57), None),  # upper non-critical going high
    (record(0x08, 0x01, 0x6F, 0x01, kind=0xC0), None),  # an OEM record
    (b"\x01\x00\x02", None),
])
def test_critical_events(rec: bytes, expected: str | None) -> None:
    assert critical_event(rec) == expected
