"""Command builders shared by the steps. Each returns argv data; values are passed to ``sh -c``
scripts as positional parameters, never formatted into the script text."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from ..facts import FactValues, FileHashes, OsRelease, PackageVersions, package_manager
from ..step import Command, NoOp, StepContext, Upload

__all__ = [
    "ensure_line",
    "file_state",
    "installer_command",
    "manager",
    "os_fact",
    "package_install",
    "packages_plan",
]


def os_fact(ctx: StepContext) -> OsRelease:
    return OsRelease(ctx.path("/etc/os-release"))


def manager(ctx: StepContext, facts: FactValues) -> str:
    return package_manager(facts[os_fact(ctx)])


def package_install(mgr: str, packages: Mapping[str, str | None], *, hold: bool = True) -> list[Command]:
    """Install ``packages`` (name -> exact version, or None for the repository's), then hold them."""
    if not packages:
        return []
    if mgr == "dnf":
        specs = [f"{n}-{v}" if v else n for n, v in packages.items()]
        cmds = [Command(("dnf", "install", "-y", "-q", *specs), f"install {', '.join(packages)}")]
        if hold:
            cmds.append(Command(("dnf", "versionlock", "add", *specs), "hold versions", ok_codes=(0, 1)))
        return cmds
    specs = [f"{n}={v}" if v else n for n, v in packages.items()]
    cmds = [
        Command(("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "update", "-q"), "refresh package lists"),
        Command(("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q",
                 "--no-install-recommends", "--allow-downgrades", "--allow-change-held-packages", *specs),
                f"install {', '.join(packages)}"),
    ]
    if hold:
        cmds.append(Command(("apt-mark", "hold", *packages), "hold versions"))
    return cmds


def packages_plan(mgr: str, facts: FactValues, wanted: Mapping[str, str | None], *, hold: bool = True,
                  what: str = "") -> Iterator[Command | NoOp]:
    """Install the packages whose installed version differs from ``wanted``; a no-op otherwise."""
    installed = facts[PackageVersions(mgr, tuple(wanted))]
    missing = {n: v for n, v in wanted.items() if n not in installed or (v is not None and installed[n] != v)}
    if not missing:
        yield NoOp(f"{what or ', '.join(wanted)}: " + ", ".join(f"{n} {installed[n]}" for n in wanted)
                   + " installed")
        return
    yield from package_install(mgr, missing, hold=hold)


def ensure_line(path: str, line: str) -> Command:
    """Append ``line`` to ``path`` unless the file already has it (safe to repeat)."""
    return Command(("sh", "-c", 'grep -qxF -- "$2" "$1" 2>/dev/null || printf "%s\\n" "$2" >> "$1"', "sh", path, line),
                   f"line in {path}")


def file_state(facts: FactValues, hashes: FileHashes, path: str, content: bytes, mode: str = "0644",
               description: str = "") -> Upload | NoOp:
    """Upload ``content`` to ``path`` unless its sha256 already matches."""
    upload = Upload(path, content, mode, description)
    if facts[hashes].get(path) == upload.sha256:
        return NoOp(f"{path} up to date")
    return upload


#: Download an installer archive (or .run file), check its sha256 when one is given, run it.
#: $1 url, $2 sha256 or "", $3 directory inside the archive ("" for a .run file), $4... installer argv
_INSTALLER = r"""set -e
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT; cd "$d"
url=$1; sha=$2; sub=$3; shift 3
f=$(basename "$url")
curl -fsSL --retry 3 -o "$f" "$url"
if [ -n "$sha" ]; then echo "$sha  $f" | sha256sum -c --quiet -; fi
case "$f" in
  *.tar.gz|*.tgz) tar -xzf "$f"; cd "$sub"; "$@";;
  *) chmod +x "$f"; "./$f" "$@";;
esac
"""


def installer_command(url: str, args: Sequence[str], *, sha256: str | None = None, subdir: str = "",
                      description: str = "", timeout: float | None = None) -> Command:
    """Fetch and run a vendor installer (EFA, eRDMA, Ascend .run): the commands a dry run shows."""
    return Command(("sh", "-c", _INSTALLER, "sh", url, sha256 or "", subdir, *args), description or f"run {url}",
                   timeout=timeout)
