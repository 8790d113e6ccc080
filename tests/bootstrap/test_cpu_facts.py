"""A node's CPUs and memory (for a scheduler's node definition): lscpu and /proc/meminfo, parsed from real
captures, and read as facts from simulated hosts that answer from their configured hardware."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from metalfleet.bootstrap.facts import CpuLayout, CpuTopology, Fact, MemoryTotal, RawCommand
from metalfleet.bootstrap.parsers import KIND_TOOLS, ParseError, parse, to_jsonable
from metalfleet.bootstrap.parsers.cpu import LscpuReport, parse_lscpu, parse_lscpu_json, parse_meminfo
from metalfleet.bootstrap.script import Script, parse_fact_output
from metalfleet.bootstrap.sessions import SessionPool
from metalfleet.testing.hosts.shims import mfshim

CPU = Path(__file__).resolve().parents[1] / "support" / "fixtures" / "cpu"
JSON_FLAT = "lscpu-json-flat-2vcpu-amd-epyc-kvm-util-linux-2.38.1.json"
JSON_TREE = "lscpu-json-hierarchic-2vcpu-amd-epyc-kvm-util-linux-2.38.1.json"
TEXT_FLAT = "lscpu-text-flat-2vcpu-amd-epyc-kvm-util-linux-2.38.1.txt"
TEXT_TREE = "lscpu-text-hierarchic-2vcpu-amd-epyc-kvm-util-linux-2.38.1.txt"
MEMINFO = "proc-meminfo-24gib-kvm-debian12.txt"

#: What the 2-vCPU build container's lscpu says (every capture of it).
CONTAINER = CpuLayout(sockets=1, cores_per_socket=2, threads_per_core=1, cpus=2, model="AMD EPYC", numa_nodes=1)


def _read(name: str) -> str:
    return (CPU / name).read_text()


def _layout(r: LscpuReport) -> CpuLayout:
    return CpuLayout(r.sockets, r.cores_per_socket, r.threads_per_core, r.cpus, r.model, r.numa_nodes)


# ------------------------------------------------------------------------------ the real captures


@pytest.mark.parametrize(("name", "parser"), [(JSON_FLAT, parse_lscpu_json), (JSON_TREE, parse_lscpu_json),
                                              (TEXT_FLAT, parse_lscpu), (TEXT_TREE, parse_lscpu)])
def test_every_lscpu_layout_of_the_capture_reads_the_same_counts(name: str, parser: Any) -> None:
    r = parser(_read(name))
    assert _layout(r) == CONTAINER
    assert (r.vendor, r.architecture, r.online) == ("AuthenticAMD", "x86_64", "0,1")
    assert r.get("NUMA node0 CPU(s)") == "0,1" and r.get("Hypervisor vendor") == "KVM"
    flags = r.get("Flags") or ""
    assert flags.startswith("fpu vme de pse") and flags.endswith(" rdpid fsrm") and "  " not in flags
    assert isinstance(to_jsonable(r), dict)


def test_the_hierarchic_forms_hold_the_flat_forms_fields_plus_their_section_headings() -> None:
    text, tree = parse_lscpu(_read(TEXT_TREE)), parse_lscpu_json(_read(JSON_TREE))
    assert text.fields == tree.fields  # a terminal's wrapped Flags join back into one value
    flat = parse_lscpu_json(_read(JSON_FLAT))
    assert parse_lscpu(_read(TEXT_FLAT)).fields == flat.fields
    headings = {k for k, v in tree.fields if v == ""}
    assert headings == {"Virtualization features", "Caches (sum of all)", "NUMA", "Vulnerabilities"}
    # flat says "Vulnerability Spectre v2", the tree "Spectre v2" under its heading: the values agree
    assert flat.get("Vulnerability Spectre v2") == tree.get("Spectre v2")
    assert (tree.get("Spectre v2") or "").startswith("Mitigation; Retpolines")
    assert tree.get("L3") == "32 MiB (1 instance)" and flat.get("L3 cache") == tree.get("L3")


def test_meminfo_capture() -> None:
    m = parse_meminfo(_read(MEMINFO))
    assert (m.total_kib, m.total_mib, m.available_kib) == (24683584, 24105, 23223228)
    assert m.get("HugePages_Total") == 0 and m.get("Hugepagesize") == 2048 and len(m.values) == 54


def test_registry_kinds() -> None:
    assert (KIND_TOOLS["lscpu-json"], KIND_TOOLS["lscpu"], KIND_TOOLS["meminfo"]) == ("lscpu -J", "lscpu",
                                                                                      "/proc/meminfo")
    assert _layout(parse("lscpu-json", _read(JSON_TREE))) == CONTAINER
    assert parse("meminfo", _read(MEMINFO)).total_mib == 24105


@pytest.mark.parametrize(("kind", "text", "tool"), [
    ("lscpu-json", "{", "lscpu -J"),
    ("lscpu-json", '{"lscpu": {}}', "lscpu -J"),
    ("lscpu-json", '{"lscpu": [{"data": "x86_64"}]}', "lscpu -J"),
    ("lscpu-json", '{"lscpu": [{"field": "Architecture:", "data": "x86_64"}]}', "lscpu -J"),  # no CPU(s)
    ("lscpu", "Architecture:  x86_64\nnot a field\n", "lscpu"),
    ("lscpu", "Architecture:  x86_64\n", "lscpu"),
    ("meminfo", "MemFree:  12 kB\n", "/proc/meminfo"),
    ("meminfo", "MemTotal: lots\n", "/proc/meminfo"),
])
def test_wrong_input_is_a_parse_error_naming_the_tool(kind: str, text: str, tool: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(kind, text)
    assert info.value.tool == tool and not info.value.internal


def test_a_count_lscpu_prints_as_a_dash_is_none() -> None:
    # A64FX's lscpu (util-linux 2.32, quoted in libxsmm/libxsmm#737): no sockets, cores per cluster instead
    r = parse_lscpu("Architecture:        aarch64\nCPU(s):              48\nThread(s) per core:  1\n"
                    "Core(s) per cluster: 12\nSocket(s):           -\nNUMA node(s):        4\n")
    assert (r.cpus, r.sockets, r.cores_per_socket, r.threads_per_core, r.numa_nodes) == (48, None, None, 1, 4)


# ----------------------------------------------------------------------------------- the facts, pure


def test_facts_parse_lscpu_json_or_text_and_meminfo() -> None:
    assert CpuTopology().parse(_read(JSON_FLAT), 0) == CONTAINER
    assert CpuTopology().parse(_read(TEXT_FLAT), 0) == CONTAINER  # util-linux without -J: plain lscpu
    assert MemoryTotal().parse(_read(MEMINFO), 0) == 24105


def test_facts_are_none_when_the_tool_or_file_is_missing_or_unreadable() -> None:
    assert CpuTopology().parse("", 127) is None
    assert CpuTopology().parse("lscpu: failed to determine number of CPUs\n", 1) is None
    assert CpuTopology().parse("<html>not lscpu</html>\n", 0) is None
    assert MemoryTotal().parse("", 1) is None
    assert MemoryTotal().parse("MemFree: 1 kB\n", 0) is None


def test_cpu_fact_asks_for_json_in_the_c_locale_with_plain_lscpu_as_the_fallback() -> None:
    argv = CpuTopology().command()
    assert argv[:2] == ["sh", "-c"] and "LC_ALL=C" in argv[2] and "lscpu -J" in argv[2] and "|| lscpu" in argv[2]
    assert MemoryTotal("/srv/node/proc/meminfo").command() == ["cat", "/srv/node/proc/meminfo"]


# ------------------------------------------------------------------- the shim prints util-linux's layout


DGX = {"model": "Intel(R) Xeon(R) Platinum 8480C", "sockets": 2, "cores_per_socket": 56, "threads_per_core": 2}


def _shape(line: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', line)


def test_the_shims_lscpu_has_the_real_captures_layout_and_parses_back() -> None:
    fields = mfshim.cpu_fields(DGX)
    js, text = mfshim.lscpu_json(fields), mfshim.lscpu_text(fields)
    assert {_shape(x) for x in js.splitlines()} <= {_shape(x) for x in _read(JSON_FLAT).splitlines()}
    def names(r: LscpuReport) -> set[str]:
        return {re.sub(r"node\d+", "nodeN", k) for k, _v in r.fields}

    assert names(parse_lscpu_json(js)) <= names(parse_lscpu_json(_read(JSON_FLAT)))  # util-linux's own field names
    for sample in (text, _read(TEXT_FLAT)):  # each value one column right of the longest name
        rows = sample.splitlines()
        column = max(len(r.split(":", 1)[0]) + 1 for r in rows) + 1
        assert all(r[column - 1] == " " and r[column] != " " for r in rows)
    for r in (parse_lscpu_json(js), parse_lscpu(text)):
        assert _layout(r) == CpuLayout(2, 56, 2, 224, "Intel(R) Xeon(R) Platinum 8480C", 2)
        assert (r.vendor, r.online, r.get("NUMA node1 CPU(s)")) == ("GenuineIntel", "0-223", "56-111,168-223")


def _number_end(line: str) -> int:
    return line.rstrip().removesuffix(" kB").__len__()


def test_the_shims_meminfo_has_the_kernels_layout() -> None:
    real = {ln.split(":")[0]: ln for ln in _read(MEMINFO).splitlines()}
    ours = mfshim.meminfo_text(24683584).splitlines()
    assert ours[0] == real["MemTotal"]  # the same total prints the same line
    for line in ours:  # every field is one the kernel prints, its number ending where the kernel's does
        sample = real[line.split(":")[0]]
        assert _number_end(line) == _number_end(sample) and line.endswith(" kB") == sample.endswith(" kB")
    assert parse_meminfo(mfshim.meminfo_text(2048 << 20)).total_mib == 2048 * 1024


# ---------------------------------------------------------------------------------- on a simulated host


def _read_facts(fleet: Any, facts: Sequence[Fact[Any]]) -> list[Any]:
    """The facts read in one round trip, as the engine reads them."""
    inventory = fleet.inventory()
    host = inventory.hosts[0]
    with SessionPool(inventory.ssh) as pool:
        conn = pool.connector(host)
        conn.connect()
        try:
            script = Script.facts([f.command() for f in facts])
            res = conn.run_script(script, timeout=60)
            parsed = parse_fact_output(res.text, script.token, len(facts))
        finally:
            conn.close()
    return [f.parse(out, rc) for f, (out, rc) in zip(facts, parsed, strict=True)]


def test_a_simulated_host_answers_from_its_configured_hardware(fleet_factory: Any) -> None:
    fleet = fleet_factory(1, "h100-ib")
    sim = fleet.hosts[0]
    meminfo = MemoryTotal(fleet.inventory().hosts[0].path("/proc/meminfo"))
    cpu, mem, nproc = _read_facts(fleet, [CpuTopology(), meminfo, RawCommand(("nproc",))])
    assert cpu == CpuLayout(sockets=2, cores_per_socket=56, threads_per_core=2, cpus=224,
                            model="Intel(R) Xeon(R) Platinum 8480C", numa_nodes=2)
    assert mem == 2048 * 1024 and nproc == (0, "224\n")

    sim.update_config(cpu={"sockets": 1}, memory_gib=512)
    with sim.edit_state():  # proc/ views are rewritten with the state
        pass
    cpu, mem, nproc = _read_facts(fleet, [CpuTopology(), meminfo, RawCommand(("nproc",))])
    assert (cpu.sockets, cpu.cores_per_socket, cpu.cpus, cpu.numa_nodes) == (1, 56, 112, 1)
    assert mem == 512 * 1024 and nproc == (0, "112\n")
    assert ["lscpu", "-J"] in sim.invocations()


def test_without_lscpu_or_meminfo_the_facts_are_none(fleet_factory: Any) -> None:
    fleet = fleet_factory(1, "plain")
    sim = fleet.hosts[0]
    sim.update_config(cpu=None, memory_gib=None)
    with sim.edit_state():
        pass
    assert not sim.file("/proc/meminfo").exists()
    cpu, mem = _read_facts(fleet, [CpuTopology(), MemoryTotal(fleet.inventory().hosts[0].path("/proc/meminfo"))])
    assert cpu is None and mem is None
