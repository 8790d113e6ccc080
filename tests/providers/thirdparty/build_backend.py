"""A PEP 517 build backend in a few lines, so pip installs this package offline whatever setuptools (or no
``wheel``) is at hand: the wheel holds the ``tinycloud`` package and the metadata pyproject.toml names."""

from __future__ import annotations

import base64
import hashlib
import tomllib
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(wheel_directory: str, config_settings: Any = None, metadata_directory: Any = None) -> str:
    project = tomllib.loads((HERE / "pyproject.toml").read_text())["project"]
    dist = f"{project['name'].replace('-', '_')}-{project['version']}"
    entry_points = "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
                           for group, eps in project["entry-points"].items())
    files = {f"tinycloud/{p.name}": p.read_bytes() for p in sorted((HERE / "tinycloud").iterdir()) if p.is_file()}
    files |= {
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                      f"Version: {project['version']}\n".encode(),
        f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: build_backend\nRoot-Is-Purelib: true\n"
                                   b"Tag: py3-none-any\n",
        f"{dist}.dist-info/entry_points.txt": entry_points.encode(),
    }
    name = f"{dist}-py3-none-any.whl"
    record = [_record_line(path, data) for path, data in files.items()] + [f"{dist}.dist-info/RECORD,,"]
    with zipfile.ZipFile(Path(wheel_directory) / name, "w") as whl:
        for path, data in files.items():
            whl.writestr(path, data)
        whl.writestr(f"{dist}.dist-info/RECORD", "\n".join(record) + "\n")
    return name
