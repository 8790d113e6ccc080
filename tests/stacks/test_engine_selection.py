"""Which Pulumi CLI metalfleet runs: METALFLEET_PULUMI_DIR, else an official CLI on PATH, else the self-built one.

The CLIs here are stand-in executables that answer `pulumi version` (what selection reads); the real
engine runs in the e2e tests.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metalfleet.providers.errors import InvalidSpecError, PrerequisiteError
from metalfleet.stacks import engine as engine_mod
from metalfleet.stacks.engine import SELF_BUILT_MARKER, engine_env, find_engine, sdk_version


def _cli(folder: Path, version: str, self_built: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cli = folder / "pulumi"
    cli.write_text(f"#!/bin/sh\necho {version}\n")
    cli.chmod(0o755)
    if self_built:
        (folder / SELF_BUILT_MARKER).write_text("# our language host\n")
    return folder


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No METALFLEET_PULUMI_DIR, an empty cache, a PATH with only the system's tools."""
    monkeypatch.delenv("METALFLEET_PULUMI_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    engine_mod._announced.clear()
    return tmp_path


def _cache_bin(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "metalfleet" / f"pulumi-v{sdk_version()}" / "bin"


def test_an_official_cli_on_path_wins_over_the_self_built_one(isolated: Path, monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    _cli(_cache_bin(isolated), "v3.260.0", self_built=True)
    official = _cli(isolated / "official" / "bin", "v3.999.1")
    monkeypatch.setenv("PATH", f"{official}:/usr/bin:/bin")
    with caplog.at_level("INFO", logger="metalfleet.stacks.engine"):
        engine = find_engine()
    assert (engine.dir, engine.version, engine.source) == (official, "v3.999.1", "PATH")
    assert engine.describe() == f"Pulumi CLI {official / 'pulumi'} (v3.999.1, found on PATH)"
    assert f"metalfleet uses Pulumi CLI {official / 'pulumi'} (v3.999.1, found on PATH)" in caplog.text


def test_the_self_built_cli_is_the_fallback_even_when_its_folder_is_on_path(isolated: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    cache = _cli(_cache_bin(isolated), "v3.260.0", self_built=True)
    other_self_built = _cli(isolated / "worktree-engine" / "bin", "v3.260.0", self_built=True)
    monkeypatch.setenv("PATH", f"{other_self_built}:{cache}:/usr/bin:/bin")  # as after an earlier engine_env()
    engine = find_engine()
    assert (engine.dir, engine.source) == (cache, "self-built")
    assert engine.describe().endswith("(v3.260.0, self-built fallback: no Pulumi CLI on PATH)")


def test_metalfleet_pulumi_dir_wins(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    official = _cli(isolated / "official" / "bin", "v3.999.1")
    chosen = _cli(isolated / "chosen", "v3.260.0", self_built=True)
    monkeypatch.setenv("PATH", f"{official}:/usr/bin:/bin")
    monkeypatch.setenv("METALFLEET_PULUMI_DIR", str(chosen))
    engine = find_engine()
    assert (engine.dir, engine.source) == (chosen, "METALFLEET_PULUMI_DIR")
    # the chosen folder goes first on the engine's PATH, ahead of the official CLI
    path = engine_env()["PATH"].split(os.pathsep)
    assert path[0] == str(chosen) and path.count(str(chosen)) == 1 and str(official) in path


def test_a_wrong_metalfleet_pulumi_dir_is_an_error_not_a_silent_fallback(isolated: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _cli(_cache_bin(isolated), "v3.260.0", self_built=True)
    monkeypatch.setenv("METALFLEET_PULUMI_DIR", str(isolated / "nothing-here"))
    with pytest.raises(InvalidSpecError, match="holds no executable `pulumi`") as err:
        find_engine()
    assert err.value.field == "METALFLEET_PULUMI_DIR"


def test_no_cli_anywhere_says_how_to_get_one(isolated: Path) -> None:
    with pytest.raises(PrerequisiteError, match=r"no Pulumi CLI found: install it .* run `make engine`") as err:
        find_engine()
    assert err.value.tool == "pulumi" and not isinstance(err.value, InvalidSpecError)


def test_the_cli_says_no_pulumi_cli_and_exits_2(isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`metalfleet up` without any Pulumi CLI: the message and exit code of a usage error, before any stack."""
    from metalfleet.stacks.cli import main

    spec = tmp_path / "c.yaml"
    spec.write_text("name: nocli\nprovider: fake\nregion: local-1\noffering: fake.8xh100\ncount: 1\nimage: i\n")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "p")  # past the passphrase check, to the engine lookup
    assert main(["up", str(spec), "--backend", f"file://{tmp_path / 'state'}"]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]  # policy findings come first
    assert len(errors) == 1 and errors[0].startswith(
        "error: no Pulumi CLI found: install it (https://www.pulumi.com/docs/install/)"), err
    assert "run `make engine`; looked on PATH and in " in err and "Traceback" not in err


def test_engine_env_moves_the_engine_first(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    official = _cli(isolated / "official" / "bin", "v3.999.1")
    monkeypatch.setenv("PATH", f"/usr/bin:{official}:/bin")
    env = engine_env({"EXTRA": "1"})
    assert env["PATH"].split(os.pathsep) == [str(official), "/usr/bin", "/bin"]
    assert env["PULUMI_SKIP_UPDATE_CHECK"] == "true" and env["EXTRA"] == "1"
