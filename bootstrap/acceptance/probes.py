"""Acceptance probes: the read-only commands that gather a node's evidence, as bootstrap facts.

Each :class:`Probe` is a :class:`~metalfleet.bootstrap.facts.Fact` (a command plus a pure parser), so
anything that reads facts can read it; :mod:`.live` runs a host's probes in one exec channel, each
under coreutils ``timeout``. What a node gets depends on its offering's baseline:

=======================  ==========================================================================
NVIDIA                   ``nvidia-smi -q -x`` (``nvidia-smi -q`` when XML fails), ``nvidia-smi topo -m``,
                         ``nvidia-smi nvlink -s`` (NVLink offerings)
InfiniBand / RoCE        ``ibstat`` (``ibv_devinfo`` when ibstat is not installed)
EFA (AWS)                ``fi_info -p efa``
eRDMA (Alibaba ERI)      ``ibv_devinfo``
Ascend                   ``npu-smi info``, ``npu-smi info -t topo``, ``hccn_tool -i N -status/-link/-net_health -g``,
                         ``hccl_test`` all_reduce (when installed)
bandwidth                ``all_reduce_perf -b 8 -e 16G -f 2 -g <gpus>`` with ``NCCL_DEBUG=INFO`` and the
                         environment file ``nccl-config`` wrote
optional                 ``dcgmi diag -r 1|2`` (``AcceptanceOptions.dcgm_level``)
=======================  ==========================================================================

Across nodes, :func:`multi_node_probe` runs all_reduce_perf under ``mpirun`` with a hostfile from
one node of the cluster.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..facts import Fact
from ..inventory import Host
from ..parsers import ParseError, parse, sniff_kind
from .baselines import Baseline
from .checks import NCCL_CHECKS

__all__ = ["AcceptanceOptions", "Probe", "ProbeOutput", "multi_node_probe", "plan_probes"]


@dataclass(frozen=True)
class AcceptanceOptions:
    """How the live checks run. Timeouts are seconds per command."""

    probe_timeout: float = 60.0
    nccl: bool = True
    #: all_reduce_perf size arguments (``-g`` is added from the offering's GPU count).
    nccl_args: tuple[str, ...] = ("-b", "8", "-e", "16G", "-f", "2")
    nccl_timeout: float = 1200.0
    #: Where the ``nccl-tests`` bootstrap step builds it; ``all_reduce_perf`` on PATH is the fallback.
    nccl_binary: str = "/opt/nccl-tests/build/all_reduce_perf"
    #: Sourced before NCCL runs (written by the ``nccl-config`` bootstrap step) when present.
    nccl_env_file: str = "/etc/profile.d/metalfleet-nccl.sh"
    #: Run one all_reduce across the nodes that passed on their own (>= 2 nodes of one offering).
    multi_node: bool = True
    #: When that run fails: rounds of smaller runs to find the nodes, links or switch group at fault
    #: (:mod:`.localise`).
    localise: bool = True
    #: The all_reduce_perf sizes of a localisation run, as multiples of the baseline's ``measure_min_bytes``
    #: (the smallest size judged): (first, last) for a run over every interface, and one size for a run held
    #: to one interface (which moves the same bytes over a fraction of the bandwidth).
    localise_sizes: tuple[int, int] = (1, 4)
    localise_nic_size: int = 1
    multi_node_timeout: float = 1800.0
    mpirun: str = "mpirun"
    #: Extra mpirun arguments (before the program), e.g. ("--mca", "btl_tcp_if_include", "eth0");
    #: word-split on the node, so no spaces inside one argument.
    mpirun_args: tuple[str, ...] = ("--bind-to", "none")
    #: Where the launching node keeps the hostfile (``~`` is the login user's home).
    hostfile_path: str = "~/.metalfleet/acceptance-hostfile"
    #: 0: no DCGM; 1 or 2: ``dcgmi diag -r N``.
    dcgm_level: int = 0
    dcgm_timeout: float = 1800.0
    #: Ascend: hccl_test all_reduce binary and its arguments (skipped when the binary is absent).
    hccl_binary: str = "/usr/local/Ascend/ascend-toolkit/latest/tools/hccl_test/bin/all_reduce_test"
    hccl_args: tuple[str, ...] = ("-b", "8K", "-e", "1G", "-f", "2", "-d", "fp32", "-o", "sum")
    hccl_timeout: float = 1200.0
    #: Run the probes through ``sudo -n`` (the login user normally can read everything needed).
    sudo: bool = False


@dataclass(frozen=True)
class ProbeOutput:
    """One probe's raw result: exit status and stdout (stderr and timing are added by the runner)."""

    rc: int
    stdout: str
    stderr: str = ""
    seconds: float | None = None


#: Exit statuses with a meaning of their own.
RC_TIMEOUT = (124, 137)
RC_ABSENT = 127


@dataclass(frozen=True)
class Probe(Fact[ProbeOutput]):
    """A read-only acceptance command.

    ``kind`` is the parser kind ("auto": sniffed from the output among ``kinds``); ``file`` the name
    the output is saved under (one :mod:`.offline` recognises, so a saved folder re-judges the same);
    ``checks`` the gate checks its evidence feeds (to say why a check had none);
    ``parse_on_failure``: a non-zero exit still yields evidence when the output parses (nccl-tests
    and dcgmi exit non-zero exactly when they found a problem worth reporting).
    """

    name: str
    argv: tuple[str, ...]
    kind: str
    file: str
    timeout: float = 60.0
    checks: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    parse_on_failure: bool = False
    #: A file name per kind when ``kind`` is "auto".
    files: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    label_text: str = ""

    @property
    def label(self) -> str:
        return self.label_text or shlex.join(self.argv)

    def command(self) -> list[str]:
        return ["timeout", "-k", "5", f"{self.timeout:g}", *self.argv]

    def parse(self, stdout: str, rc: int) -> ProbeOutput:
        return ProbeOutput(rc, stdout)

    # -- evidence -------------------------------------------------------------------------------
    def resolve_kind(self, text: str) -> str:
        if self.kind != "auto":
            return self.kind
        sniffed = sniff_kind(text)
        return sniffed if sniffed in self.kinds else self.kinds[0]

    def file_for(self, kind: str) -> str:
        return self.files.get(kind, self.file)

    def problem(self, out: ProbeOutput) -> str | None:
        """Why this output is no evidence, or None when it is."""
        if out.rc in RC_TIMEOUT:
            return f"timed out after {self.timeout:g}s"
        if out.rc == RC_ABSENT:
            return "not installed (exit 127)" + _tail(out.stderr or out.stdout)
        if out.rc == -1:
            return "did not finish (the session ended)"
        if out.rc != 0 and not (self.parse_on_failure and out.stdout.strip()):
            return f"exited {out.rc}" + _tail(out.stdout or out.stderr)
        if not out.stdout.strip():
            return "printed nothing" + (f" (exit {out.rc})" if out.rc else "") + _tail(out.stderr)
        return None

    def evidence(self, out: ProbeOutput) -> tuple[str, Any]:
        """(kind, parsed result); raises ParseError when the output is not what the tool prints."""
        kind = self.resolve_kind(out.stdout)
        try:
            return kind, parse(kind, out.stdout)
        except ParseError:
            raise
        except Exception as exc:  # a parser bug must not take the whole host down
            raise ParseError(kind, f"internal parser error: {type(exc).__name__}: {exc}", internal=True) from exc


def _tail(text: str, limit: int = 300) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    last = lines[-1] if len(lines[-1]) > 3 else " ".join(lines[-2:])
    return ": " + (last if len(last) <= limit else last[:limit] + "...")


def _sh(script: str, *args: str) -> tuple[str, ...]:
    return ("sh", "-c", script, "sh", *args)


# Fallbacks are shell, with every value passed as a positional parameter.
_SMI_XML_OR_Q = 'out=$(nvidia-smi -q -x 2>/dev/null) && { printf "%s\\n" "$out"; exit 0; }; exec nvidia-smi -q'
_IBSTAT_OR_IBV = "if command -v ibstat >/dev/null 2>&1; then exec ibstat; fi; exec ibv_devinfo"
#: $1 env file, $2 all_reduce_perf path; the rest are its arguments.
_NCCL = ('[ -r "$1" ] && . "$1"; B="$2"; shift 2; '
         '[ -x "$B" ] || B=$(command -v all_reduce_perf) || '
         '{ echo "all_reduce_perf not found (is the nccl-tests bootstrap step done?)" >&2; exit 127; }; '
         'export NCCL_DEBUG=INFO; exec "$B" "$@"')
#: $1 env file, $2 all_reduce_perf, $3 hostfile path, $4 hostfile text, $5 mpirun, $6 ranks, $7 per node;
#: the rest: mpirun arguments, "--", then all_reduce_perf arguments.
_MPI = ('[ -r "$1" ] && . "$1"; B="$2"; H="$3"; case "$H" in "~/"*) H="$HOME/${H#"~/"}";; esac; '
        'mkdir -p "$(dirname "$H")" && printf "%s" "$4" > "$H" || exit 1; M="$5"; NP="$6"; PN="$7"; shift 7; '
        '[ -x "$B" ] || B=$(command -v all_reduce_perf) || '
        '{ echo "all_reduce_perf not found (is the nccl-tests bootstrap step done?)" >&2; exit 127; }; '
        'command -v "$M" >/dev/null 2>&1 || { echo "$M not found" >&2; exit 127; }; '
        'X="-x NCCL_DEBUG=INFO"; '
        '[ -r "$1" ] && for v in $(sed -n "s/^export \\([A-Za-z_][A-Za-z0-9_]*\\)=.*/\\1/p" "$1"); do '
        'X="$X -x $v"; done; '
        'R=""; [ "$(id -u)" = 0 ] && R="--allow-run-as-root"; '
        'A=""; while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do A="$A $1"; shift; done; shift; '
        'export NCCL_DEBUG=INFO; '
        'exec "$M" $R -np "$NP" -N "$PN" --hostfile "$H" $X $A "$B" "$@"')
_HCCL = ('B="$1"; M="$2"; N="$3"; shift 3; [ -x "$B" ] || { echo "hccl_test not found at $B" >&2; exit 127; }; '
         'R=""; [ "$(id -u)" = 0 ] && R="--allow-run-as-root"; '
         'exec "$M" $R -n "$N" "$B" -p "$N" "$@"')

_GPU_CHECKS = ("gpu-count", "gpu-model", "gpu-memory", "gpu-ecc", "gpu-memory-health", "gpu-persistence",
               "gpu-fabric-state")


def gpu_count(baseline: Baseline, host: Host | None = None) -> int:
    """GPUs per node: the baseline's, else the host's traits, else 8."""
    n = baseline.gpu.count
    if n:
        return int(n)
    if host is not None and host.traits.gpu_count:
        return int(host.traits.gpu_count)
    return 8


def plan_probes(host: Host, baseline: Baseline, options: AcceptanceOptions | None = None) -> list[Probe]:
    """The probes for one node, cheap reads first, the long bandwidth test (and DCGM) last."""
    o = options or AcceptanceOptions()
    t = o.probe_timeout
    probes: list[Probe] = []
    ascend = baseline.ascend
    fabric = baseline.fabric.kind or "none"
    n = gpu_count(baseline, host)
    if ascend:
        probes.append(Probe("npu-smi", ("npu-smi", "info"), "npu-smi", "npu-smi-info.txt", t,
                            ("gpu-count", "gpu-model", "gpu-memory", "npu-health")))
        probes.append(Probe("npu-smi-topo", ("npu-smi", "info", "-t", "topo"), "npu-smi-topo",
                            "npu-smi-info-t-topo.txt", t, ("gpu-interconnect",)))
        for i in range(n):
            for what in ("status", "link", "net_health"):
                probes.append(Probe(f"hccn-{i}-{what}", ("hccn_tool", "-i", str(i), f"-{what}", "-g"), "hccn-tool",
                                    f"hccn_tool-i{i}-{what}-g.txt", t, ("fabric-ports", "npu-nic")))
        if o.nccl:
            probes.append(Probe("hccl-all-reduce", _sh(_HCCL, o.hccl_binary, o.mpirun, str(n), *o.hccl_args),
                                "hccl-test", "hccl_test-all_reduce.txt", o.hccl_timeout,
                                ("nccl-correctness", "allreduce-busbw"), parse_on_failure=True,
                                label_text=f"mpirun -n {n} {o.hccl_binary} -p {n} {shlex.join(o.hccl_args)}"))
        return probes
    probes.append(Probe("nvidia-smi", _sh(_SMI_XML_OR_Q), "auto", "nvidia-smi-q-x.xml", t, _GPU_CHECKS,
                        kinds=("nvidia-smi-xml", "nvidia-smi-q"),
                        files={"nvidia-smi-xml": "nvidia-smi-q-x.xml", "nvidia-smi-q": "nvidia-smi-q.txt"},
                        label_text="nvidia-smi -q -x (nvidia-smi -q if XML fails)"))
    probes.append(Probe("topo", ("nvidia-smi", "topo", "-m"), "nvidia-smi-topo", "nvidia-smi-topo-m.txt", t,
                        ("gpu-interconnect",)))
    if baseline.interconnect.kind == "nvlink":
        probes.append(Probe("nvlink", ("nvidia-smi", "nvlink", "-s"), "nvlink-status", "nvidia-smi-nvlink-s.txt", t,
                            ("nvlink-links",)))
    if fabric in ("infiniband", "roce"):
        probes.append(Probe("ibstat", _sh(_IBSTAT_OR_IBV), "auto", "ibstat.txt", t, ("fabric-ports",),
                            kinds=("ibstat", "ibv-devinfo"), files={"ibstat": "ibstat.txt",
                                                                   "ibv-devinfo": "ibv_devinfo.txt"},
                            label_text="ibstat (ibv_devinfo if ibstat is not installed)"))
    elif fabric == "efa":
        probes.append(Probe("fi_info", ("fi_info", "-p", "efa"), "fi-info", "fi_info-p-efa.txt", t, ("fabric-ports",)))
    elif fabric == "erdma":
        probes.append(Probe("erdma", ("ibv_devinfo",), "erdma", "ibv_devinfo-erdma.txt", t, ("fabric-ports",)))
    if o.nccl:
        args = (*o.nccl_args, "-g", str(n))
        probes.append(Probe("all_reduce_perf", _sh(_NCCL, o.nccl_env_file, o.nccl_binary, *args), "nccl-tests",
                            "all_reduce_perf.txt", o.nccl_timeout, (*NCCL_CHECKS, "fabric-ports"),
                            parse_on_failure=True,
                            label_text=f"NCCL_DEBUG=INFO all_reduce_perf {shlex.join(args)}"))
    if o.dcgm_level:
        probes.append(Probe("dcgmi-diag", ("dcgmi", "diag", "-r", str(o.dcgm_level)), "dcgm-diag",
                            f"dcgmi-diag-r{o.dcgm_level}.txt", o.dcgm_timeout, ("dcgm-diag",), parse_on_failure=True))
    return probes


def multi_node_probe(hosts: Sequence[Host], baseline: Baseline,
                     options: AcceptanceOptions | None = None) -> tuple[Probe, str]:
    """The all_reduce across ``hosts`` (run from the first), and the hostfile it writes there."""
    o = options or AcceptanceOptions()
    per_node = gpu_count(baseline, hosts[0])
    hostfile = "".join(f"{h.address} slots={per_node}\n" for h in hosts)
    ranks = per_node * len(hosts)
    args = (*o.nccl_args, "-g", "1")
    argv = _sh(_MPI, o.nccl_env_file, o.nccl_binary, o.hostfile_path, hostfile, o.mpirun, str(ranks),
               str(per_node), *o.mpirun_args, "--", *args)
    label = (f"{o.mpirun} -np {ranks} -N {per_node} --hostfile {o.hostfile_path} -x NCCL_DEBUG=INFO "
             f"{shlex.join(o.mpirun_args)} all_reduce_perf {shlex.join(args)}")
    probe = Probe("all_reduce_perf-multinode", argv, "nccl-tests", "all_reduce_perf-multinode.txt",
                  o.multi_node_timeout, NCCL_CHECKS, parse_on_failure=True, label_text=label)
    return probe, hostfile
