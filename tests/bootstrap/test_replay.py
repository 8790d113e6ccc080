"""The replaying connector keeps the connector's contract, so tests above it prove something about SSH runs.

A framed script answered item by item (``Script.replay``) gives the bytes a shell gives for the same
items: each case below runs the script's text with a local ``sh`` and replays it with every command run
locally, and the two outputs must be identical. The rest checks the replaying connector's own answers:
files, uploads, timeouts, drops, reboots, sudo, faults.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from metalfleet.bootstrap.connector import Endpoint
from metalfleet.bootstrap.errors import (
    CommandTimeout,
    ConnectionLost,
    HostKeyChanged,
    HostUnreachable,
    RebootTimeout,
    SshAuthError,
)
from metalfleet.bootstrap.facts import BootId, FileHashes, PathsExist
from metalfleet.bootstrap.replay import ReplayFleet, ReplayHost, Reply
from metalfleet.bootstrap.script import BatchItem, Script, parse_batch_output, parse_probe_stderr


def _local(argv: tuple[str, ...]) -> tuple[bytes, bytes, int]:
    """Run ``argv`` here, as the script's shell would (127 when there is no such program)."""
    try:
        res = subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except FileNotFoundError:
        return b"", f"sh: 1: {argv[0]}: not found\n".encode(), 127
    return res.stdout, res.stderr, res.returncode


def _sh(script: Script, stdin: bytes = b"") -> tuple[bytes, bytes, int]:
    res = subprocess.run(script.argv(), input=stdin, capture_output=True, check=False)
    return res.stdout, res.stderr, res.returncode


class _Disk:
    """Uploads a replayed script stores, written for real (as mf_put does on a host)."""

    def __call__(self, path: str, content: bytes, mode: str) -> None:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content)
        p.chmod(int(mode, 8))


def test_a_replayed_fact_script_prints_what_sh_prints() -> None:
    script = Script.facts([["printf", "%s", "no newline"], ["sh", "-c", "echo out; echo err >&2; exit 3"], ["true"],
                           ["definitely-not-a-command-mf"], ["printf", "a\\n\\n"]])
    shell = _sh(script)
    replayed = script.replay(_local, _Disk())
    assert replayed[0] == shell[0] and replayed[2] == shell[2] == 0
    assert b"err\n" in replayed[1] and b"err\n" in shell[1]  # stderr passes through (sh adds its own line for 127)


def test_a_replayed_batch_prints_what_sh_prints_uploads_included(tmp_path: Path) -> None:
    good, torn = b"hello world\n", b"0123456789"
    items = [BatchItem(upload=(str(tmp_path / "sh" / "f.txt"), len(good), hashlib.sha256(good).hexdigest(), "0640")),
             BatchItem(argv=("sh", "-c", "echo out; echo to-stderr >&2; exit 2"), ok_codes=(0, 2)),
             BatchItem(argv=("sleep", "5"), timeout=0.2, ok_codes=(124,)),
             BatchItem(argv=("cat",)),
             BatchItem(upload=(str(tmp_path / "sh" / "g"), len(torn), "0" * 64, "0600")),
             BatchItem(argv=("touch", str(tmp_path / "never")))]
    script = Script.batch(items)
    shell = _sh(script, good + torn)
    replay_items = tuple(BatchItem(upload=(i.upload[0].replace("/sh/", "/replay/"), *i.upload[1:]))
                         if i.upload else i for i in items)
    replayed = Script("batch", script.token, replay_items).replay(_local, _Disk(), good + torn)
    assert replayed[2] == shell[2] == 97
    assert replayed[0].replace(b"/replay/", b"/sh/") == shell[0]
    results = parse_batch_output(replayed[0].decode(), script.token)
    assert [(r.index, r.rc) for r in results] == [(0, 0), (1, 2), (2, 124), (3, 0), (4, 86)]
    assert (tmp_path / "replay" / "f.txt").read_bytes() == (tmp_path / "sh" / "f.txt").read_bytes() == good
    assert not (tmp_path / "replay" / "g").exists() and not (tmp_path / "never").exists()


def test_a_replayed_probe_script_frames_stderr_as_sh_does() -> None:
    script = Script.probes([["sh", "-c", "echo a; echo oops >&2; exit 4"], ["timeout", "-k", "5", "0.2", "sleep", "3"],
                            ["sh", "-c", "head -c 5000 /dev/zero | tr '\\0' e >&2"]])
    shell = _sh(script)
    replayed = script.replay(_local, _Disk())
    assert replayed == shell
    errs = parse_probe_stderr(replayed[0].decode(), script.token)
    assert errs[0] == "oops\n" and errs[1] == "" and len(errs[2]) == 4000


# -------------------------------------------------------------------------- the replaying connector


def _conn(host: ReplayHost, user: str = "root") -> object:
    return ReplayFleet([host])(Endpoint(host.address, user=user, name=host.name))


def test_files_uploads_and_the_builtin_reads() -> None:
    host = ReplayHost("n", files={"/etc/motd": "hi\n"})
    conn = ReplayFleet([host])(Endpoint("n", user="ubuntu"))
    res = conn.run(["cat", "/etc/motd", "/nope"])
    assert (res.rc, res.stdout, res.stderr) == (1, b"hi\n", b"cat: /nope: No such file or directory\n")
    assert conn.run(["nvidia-smi"]).rc == 127  # not installed: no reply for it
    assert conn.put(b"x" * 10, "/opt/blob", mode="0600") is True
    channels = host.channels
    assert conn.put(b"x" * 10, "/opt/blob") is False and host.channels == channels + 1
    assert host.files["/opt/blob"] == b"x" * 10 and host.modes["/opt/blob"] == "0600"
    hashes = FileHashes(("/opt/blob", "/nope"))
    assert hashes.parse(conn.run(hashes.command()).text, 0) == {"/opt/blob": hashlib.sha256(b"x" * 10).hexdigest(),
                                                               "/nope": None}
    exists = PathsExist(("/opt", "/opt/blob", "/nope"))
    assert exists.parse(conn.run(exists.command()).text, 0) == frozenset({"/opt", "/opt/blob"})
    assert [c.sudo for c in host.calls] == [True] * len(host.calls)  # ubuntu is not root: all through sudo -n


def test_replies_match_exact_lines_then_globs_and_change_the_host() -> None:
    host = ReplayHost("n", replies={
        "pkg-version x": Reply("", rc=1),
        "pkg-install *": Reply("installed\n", writes={"/etc/x.conf": "on\n"}, sets={"pkg-version x": "1.0\n"}),
    })
    conn = _conn(host)
    assert conn.run(["pkg-version", "x"]).rc == 1
    assert conn.run(["pkg-install", "x", "--yes"]).stdout == b"installed\n"
    assert conn.run(["pkg-version", "x"]).stdout == b"1.0\n" and host.text("/etc/x.conf") == "on\n"
    assert host.commands() == [["pkg-version", "x"], ["pkg-install", "x", "--yes"], ["pkg-version", "x"]]


def test_timeouts_cut_slow_commands() -> None:
    host = ReplayHost("n", replies={"slow": Reply("late\n", delay=5)})
    conn = _conn(host)
    assert conn.run(["timeout", "-k", "5", "0.1", "slow"]).rc == 124
    with pytest.raises(CommandTimeout):
        conn.run(["slow"], timeout=0.1)


def test_a_drop_loses_the_session_once_and_a_read_is_retried() -> None:
    host = ReplayHost("n", replies={"apt-get install x": "ok\n"}, drops={"apt-get install *": 1, "cat *": 1})
    conn = _conn(host)
    with pytest.raises(ConnectionLost):
        conn.run(["apt-get", "install", "x"])
    assert not conn.connected
    assert conn.run(["apt-get", "install", "x"]).stdout == b"ok\n"  # reconnects; the drop was spent
    assert conn.run(BootId().command(), retry_on_drop=True).text.strip() == host.boot_id
    assert conn.reconnects == 2 and host.connects == 3


def test_a_reboot_drops_the_session_and_comes_back_with_a_new_boot_id() -> None:
    host = ReplayHost("n", files={"/run/marker": "1"}, replies={"reboot": Reply(reboot=True)},
                      on_boot={"lsmod": "Module\nnvidia 1 0\n"})
    conn = _conn(host)
    old = host.boot_id

    def boot_id() -> str | None:
        return BootId().parse(conn.run(BootId().command()).text, 0)

    with pytest.raises(RebootTimeout, match="still up"):  # nothing rebooted yet
        conn.wait_for_reboot(read_boot_id=boot_id, old_boot_id=old, timeout=5)
    with pytest.raises(ConnectionLost):
        conn.run(["reboot"])
    with pytest.raises(HostUnreachable):  # down until it boots
        _conn(host).connect()
    conn.wait_for_reboot(read_boot_id=boot_id, old_boot_id=old, timeout=5)
    assert host.boot_id != old and host.boots == 1 and "/run/marker" not in host.files
    assert b"nvidia" in conn.run(["lsmod"]).stdout


def test_faults_are_the_connector_errors_an_ssh_session_raises() -> None:
    fleet = ReplayFleet([ReplayHost("a", host_key="changed"), ReplayHost("b", auth_refused=True),
                         ReplayHost("c", replies={"reboot": Reply(reboot=True)}, reboot_hangs=True)])
    with pytest.raises(HostKeyChanged, match="HOST KEY CHANGED"):
        fleet(Endpoint("a")).connect()
    with pytest.raises(SshAuthError):
        fleet(Endpoint("b")).connect()
    with pytest.raises(HostUnreachable, match="cannot connect to ghost:22"):
        fleet(Endpoint("ghost")).connect()
    c = fleet(Endpoint("c"))
    with pytest.raises(ConnectionLost):
        c.run(["reboot"])
    with pytest.raises(RebootTimeout, match="SSH not back"):
        c.wait_for_reboot(read_boot_id=lambda: None, old_boot_id=None, timeout=1)
