"""tools/gpu_acceptance_check.py runs on GPU hosts with only python3: its import shim links the parsers,
the acceptance code, providers/errors.py, providers/textfile.py and providers/checks.py. Reading and
judging saved outputs (bad bytes included) must work there without any third-party package (``python -S``:
no site-packages)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ._fixtures import FIXTURES, REPO_ROOT

SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
import gpu_acceptance_check
gpu_acceptance_check.install_shim()
from metalfleet.bootstrap.acceptance.offline import parse_file
from metalfleet.providers.textfile import BadFileError
print(parse_file("auto", sys.argv[2])["gpu_count"])
try:
    parse_file("auto", sys.argv[3])
except BadFileError as exc:
    print(exc)
for name in ("yaml", "pydantic", "paramiko"):
    assert name not in sys.modules, name
"""


def test_the_shim_reads_saved_outputs_with_the_standard_library_only(tmp_path: Path) -> None:
    bad = tmp_path / "nvidia-smi.txt"
    bad.write_bytes(b"+---+\n\xff")
    res = subprocess.run([sys.executable, "-S", "-c", SCRIPT, str(REPO_ROOT / "tools"),
                          str(FIXTURES / "nvidia-smi/8x-v100s-pcie-32gb-vm-q-x.xml"), str(bad)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["8", f"saved output {bad} is not UTF-8 text: byte 0xff at byte offset 6 "
                                            "(invalid start byte)"]
