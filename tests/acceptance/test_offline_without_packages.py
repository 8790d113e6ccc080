"""tools/gpu_acceptance_check.py runs on GPU hosts with only python3: its import shim links the real
bootstrap package (whose ``__init__`` loads lazily) and providers/errors.py, providers/textfile.py and
providers/checks.py. Reading and judging saved outputs (bad bytes included) must work there without any
third-party package (``python -S``: no site-packages)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ._fixtures import FIXTURES, REPO_ROOT

SCRIPT = """
import os, sys
sys.path.insert(0, sys.argv[1])
import gpu_acceptance_check
root = gpu_acceptance_check.install_shim()
from metalfleet.bootstrap.acceptance.offline import parse_file
from metalfleet.providers.textfile import BadFileError
print(parse_file("auto", sys.argv[2])["gpu_count"])
try:
    parse_file("auto", sys.argv[3])
except BadFileError as exc:
    print(exc)
from metalfleet.bootstrap.acceptance.offline import verify_dir
verdict = verify_dir(sys.argv[4], "p5.48xlarge")
print(verdict.check("gpu-count").reason, verdict.check("gpu-model").status)
for name in ("yaml", "pydantic", "paramiko", "tenacity"):
    assert name not in sys.modules, name
# The real package, not a stand-in: bootstrap's own __init__ ran, and the shim wrote no __init__ of its own.
import metalfleet.bootstrap
repo = os.path.dirname(os.path.realpath(sys.argv[1]))
assert os.path.realpath(metalfleet.bootstrap.__file__) == os.path.join(repo, "bootstrap", "__init__.py")
written = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if not os.path.islink(os.path.join(d, f))]
assert written == [], written
"""


def test_the_shim_reads_saved_outputs_with_the_standard_library_only(tmp_path: Path) -> None:
    bad = tmp_path / "nvidia-smi.txt"
    bad.write_bytes(b"+---+\n\xff")
    xml = FIXTURES / "nvidia-smi/8x-v100s-pcie-32gb-vm-q-x.xml"
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "nvidia-smi-q-x.xml").write_bytes(xml.read_bytes())
    res = subprocess.run([sys.executable, "-S", "-c", SCRIPT, str(REPO_ROOT / "tools"), str(xml), str(bad),
                          str(saved)], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["8", f"saved output {bad} is not UTF-8 text: byte 0xff at byte offset 6 "
                                            "(invalid start byte)",
                                       "found 8 GPUs (nvidia-smi -q -x) fail"]  # 8 GPUs, but V100s, not H100s
