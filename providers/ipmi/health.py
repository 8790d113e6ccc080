"""BMC health: which System Event Log entries mean a host must not be handed out.

A host whose BMC logged a critical fault (a failed power supply, an uncorrectable memory error, a temperature
past its critical threshold) is quarantined in the claim store when an order first meets it: no cluster gets
it until an operator clears the quarantine. The table is data, checked against the IPMI 2.0 specification,
Table 42-3 (sensor type codes and their sensor-specific offsets) and Table 42-2 (threshold event offsets).

A SEL record (16 bytes, IPMI 2.0 section 32.1): record id (2), record type (1; 0x02 = system event), timestamp
(4), generator id (2), EvM revision (1), sensor type (1), sensor number (1), event dir | event type (1; bit 7 set
= deassertion), event data 1-3 (3; the low nibble of data 1 is the offset).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["CRITICAL_SEL", "THRESHOLD_CRITICAL", "critical_event"]

#: (sensor type, sensor-specific offset) -> what it means, for events of type 0x6F (sensor-specific)
CRITICAL_SEL: Mapping[tuple[int, int], str] = {
    (0x08, 0x01): "power supply failure detected",
    (0x08, 0x03): "power supply input lost",
    (0x07, 0x00): "processor IERR",
    (0x07, 0x01): "processor thermal trip",
    (0x0C, 0x01): "uncorrectable memory ECC error",
    (0x0C, 0x03): "memory parity error",
    (0x13, 0x00): "critical interrupt: front panel NMI",
    (0x13, 0x04): "critical interrupt: PCI SERR",
}

#: sensor types whose threshold events (event type 0x01) at a critical or non-recoverable level are critical
THRESHOLD_CRITICAL: Mapping[int, str] = {0x01: "temperature", 0x02: "voltage", 0x04: "fan"}
#: threshold offsets: 0x02/0x04 lower critical/non-recoverable going low, 0x09/0x0B upper ... going high
_CRITICAL_THRESHOLDS = {0x02: "below its lower critical threshold", 0x04: "below its lower non-recoverable threshold",
                        0x09: "above its upper critical threshold", 0x0B: "above its upper non-recoverable threshold"}


def critical_event(record: bytes) -> str | None:
    """What a 16-byte SEL record says, when it is a critical fault being asserted; None otherwise."""
    if len(record) < 16 or record[2] != 0x02:  # only system event records
        return None
    sensor_type, sensor, dir_type, data1 = record[10], record[11], record[12], record[13]
    if dir_type & 0x80:  # a deassertion: the condition went away
        return None
    event_type, offset = dir_type & 0x7F, data1 & 0x0F
    if event_type == 0x6F:
        what = CRITICAL_SEL.get((sensor_type, offset))
        return f"{what} (sensor {sensor:#04x})" if what else None
    if event_type == 0x01 and sensor_type in THRESHOLD_CRITICAL and offset in _CRITICAL_THRESHOLDS:
        return f"{THRESHOLD_CRITICAL[sensor_type]} sensor {sensor:#04x} {_CRITICAL_THRESHOLDS[offset]}"
    return None
