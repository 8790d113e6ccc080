#!/usr/bin/env python3
"""Capture acceptance evidence on a real NVIDIA machine, parse it, and (optionally) judge it.

Needs only python3 and this repository (no pip install): it builds a throw-away ``metalfleet`` namespace
in a temp dir that links to the repo's real ``bootstrap`` package and to ``providers/errors.py``,
``providers/textfile.py`` and ``providers/checks.py`` (so no third-party package is imported).

Runs, saving each output under ``--out`` with the names ``metalfleet.bootstrap.acceptance.offline``
understands:

    nvidia-smi -q -x          -> nvidia-smi-q-x.xml
    nvidia-smi                -> nvidia-smi.txt
    nvidia-smi topo -m        -> topo.txt
    nvidia-smi nvlink -s      -> nvlink-s.txt
    ibstat / ibv_devinfo / fi_info -p efa   (only when installed)
    all_reduce_perf           -> nccl-all_reduce.txt  (when on PATH or under $NCCL_TESTS_DIR;
                                 NCCL_DEBUG=INFO, -b 8M -e 1G -f 2 -g <GPUs>)

then prints ``{"files": {name: {"kind", "result" | "error"}}, "verdict": ...}`` as JSON.

    python3 tools/gpu_acceptance_check.py --out /tmp/accept --offering p5.48xlarge
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def install_shim() -> Path:
    """Make ``import metalfleet.bootstrap...`` work from the repo without installing anything.

    ``metalfleet`` is a namespace package (no ``__init__``), as in the installed wheel, and
    ``metalfleet.bootstrap`` is the repo's real package (its ``__init__`` loads names lazily, so the
    acceptance core imports only the standard library). ``providers/__init__`` needs pydantic, which a
    GPU host's python3 does not have, so ``metalfleet.providers`` is a namespace portion holding the
    three standard-library modules the core uses: errors, textfile (the text-file reader), checks.
    """
    root = Path(tempfile.mkdtemp(prefix="metalfleet-shim-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    pkg = root / "metalfleet"
    (pkg / "providers").mkdir(parents=True)
    (pkg / "bootstrap").symlink_to(REPO / "bootstrap", target_is_directory=True)
    for mod in ("errors.py", "textfile.py", "checks.py"):
        (pkg / "providers" / mod).symlink_to(REPO / "providers" / mod)
    sys.path.insert(0, str(root))
    return root


def run(cmd: list[str], out: Path, timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd``, save stdout (stderr appended for logs) to ``out``; never raises."""
    started = dt.datetime.now(dt.timezone.utc)  # noqa: UP017 - dt.UTC is 3.11+, this runs on 3.10
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except FileNotFoundError:
        return {"cmd": cmd, "error": "not installed"}
    except subprocess.TimeoutExpired as exc:
        text = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        out.write_text(text)
        return {"cmd": cmd, "error": f"timed out after {timeout}s", "file": out.name}
    text = proc.stdout
    if out.name.startswith("nccl"):
        text += proc.stderr  # NCCL_DEBUG lines and test failures go to stderr on some builds
    out.write_text(text)
    return {"cmd": cmd, "rc": proc.returncode, "file": out.name, "seconds": round(
        (dt.datetime.now(dt.timezone.utc) - started).total_seconds(), 2),  # noqa: UP017
        "stderr_tail": proc.stderr[-500:]}


def find_all_reduce_perf() -> str | None:
    found = shutil.which("all_reduce_perf")
    if found:
        return found
    base = os.environ.get("NCCL_TESTS_DIR")
    if base:
        for cand in (Path(base) / "build" / "all_reduce_perf", Path(base) / "all_reduce_perf"):
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="directory for the captured outputs (default: ./acceptance-HOST-TIME)")
    ap.add_argument("--offering", help="also judge the captures against this offering's baseline")
    ap.add_argument("--no-nccl", action="store_true", help="skip all_reduce_perf even if it is installed")
    ap.add_argument("--nccl-args", default="-b 8M -e 1G -f 2", help="all_reduce_perf size arguments")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per command (nccl: 5x)")
    args = ap.parse_args(argv)
    if sys.version_info < (3, 10):  # noqa: UP036 - GPU hosts run the system python3, not the venv
        print("gpu_acceptance_check needs Python >= 3.10 (the parsers use 3.10 syntax)", file=sys.stderr)
        return 2

    install_shim()
    from metalfleet.bootstrap.acceptance.offline import collect_facts, kind_for_path, verify_dir
    from metalfleet.bootstrap.acceptance.report import verdict_to_dict
    from metalfleet.bootstrap.parsers import ParseError, parse, to_jsonable
    from metalfleet.providers.errors import MetalfleetError

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")  # noqa: UP017
    out: Path = args.out or Path(f"acceptance-{socket.gethostname()}-{stamp}")
    out.mkdir(parents=True, exist_ok=True)

    commands = [run(["nvidia-smi", "-q", "-x"], out / "nvidia-smi-q-x.xml", args.timeout),
                run(["nvidia-smi"], out / "nvidia-smi.txt", args.timeout),
                run(["nvidia-smi", "topo", "-m"], out / "topo.txt", args.timeout),
                run(["nvidia-smi", "nvlink", "-s"], out / "nvlink-s.txt", args.timeout)]
    for tool, cmd, name in (("ibstat", ["ibstat"], "ibstat.txt"),
                            ("ibv_devinfo", ["ibv_devinfo"], "ibv_devinfo.txt"),
                            ("fi_info", ["fi_info", "-p", "efa"], "fi_info.txt")):
        if shutil.which(tool):
            commands.append(run(cmd, out / name, args.timeout))

    ngpus = 0
    with contextlib.suppress(OSError, ParseError):
        ngpus = parse("nvidia-smi-xml", (out / "nvidia-smi-q-x.xml").read_text()).gpu_count
    perf = None if args.no_nccl else find_all_reduce_perf()
    if perf and ngpus:
        env = dict(os.environ, NCCL_DEBUG="INFO")
        commands.append(run([perf, *args.nccl_args.split(), "-g", str(ngpus)], out / "nccl-all_reduce.txt",
                            args.timeout * 5, env=env))
    (out / ".commands.json").write_text(json.dumps(commands, indent=2))

    files: dict[str, Any] = {}
    for path in sorted(out.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        kind = kind_for_path(path, text)
        if kind is None:
            files[path.name] = {"kind": None}
            continue
        try:
            files[path.name] = {"kind": kind, "result": to_jsonable(parse(kind, text))}
        except ParseError as exc:
            files[path.name] = {"kind": kind, "error": str(exc), "internal": exc.internal}

    report: dict[str, Any] = {"host": socket.gethostname(), "out": str(out.resolve()), "commands": commands,
                              "files": files}
    rc = 0 if all("error" not in f for f in files.values()) else 2
    if args.offering:
        try:
            collect_facts(out)
            verdict = verify_dir(out, args.offering, node=socket.gethostname())
            report["verdict"] = verdict_to_dict(verdict)
            rc = rc or (0 if verdict.passed else 1)
        except MetalfleetError as exc:  # a ParseError, or a saved file that is not text (BadFileError)
            report["verdict_error"] = str(exc)
            rc = 2
    print(json.dumps(report, indent=2, allow_nan=False))
    return rc


if __name__ == "__main__":
    sys.exit(main())
