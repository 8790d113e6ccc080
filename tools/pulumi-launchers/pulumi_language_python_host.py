"""A Python language host for the Pulumi engine (the LanguageRuntime gRPC service).

Why: no Pulumi CLI release can be downloaded where this repo's tests run, and the module proxy does
not serve the Go language host, so `pulumi up` in a project directory needs one. The engine
starts this as a plugin, reads the port from its first line of stdout, then calls Run once per
update; Run starts the executor (pulumi-language-python-exec) in a fresh interpreter with the
engine's settings, exactly as a release's host does, and reports its outcome.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from pulumi.runtime.proto import language_pb2, language_pb2_grpc, plugin_pb2

EXEC = str(Path(__file__).with_name("pulumi-language-python-exec"))
#: Exit code the executor uses once it has already reported the error to the engine.
BAIL_EXIT = 32


def _python() -> str:
    return os.environ.get("PULUMI_PYTHON_CMD") or sys.executable


class LanguageHost(language_pb2_grpc.LanguageRuntimeServicer):
    def __init__(self, engine_address: str) -> None:
        self.engine_address = engine_address

    def Handshake(self, request: Any, context: Any) -> Any:
        self.engine_address = request.engine_address or self.engine_address
        return language_pb2.LanguageHandshakeResponse()

    def GetPluginInfo(self, request: Any, context: Any) -> Any:
        from pulumi._version import _VERSION

        return plugin_pb2.PluginInfo(version=_VERSION)

    def GetRequiredPlugins(self, request: Any, context: Any) -> Any:
        return language_pb2.GetRequiredPluginsResponse()

    def GetRequiredPackages(self, request: Any, context: Any) -> Any:
        return language_pb2.GetRequiredPackagesResponse()

    def GetProgramDependencies(self, request: Any, context: Any) -> Any:
        return language_pb2.GetProgramDependenciesResponse()

    def About(self, request: Any, context: Any) -> Any:
        v = sys.version_info
        return language_pb2.AboutResponse(executable=_python(), version=f"{v.major}.{v.minor}.{v.micro}")

    def InstallDependencies(self, request: Any, context: Any) -> Any:
        # Dependencies are the virtualenv's business (`make venv`); nothing to stream.
        return iter(())

    def Run(self, request: Any, context: Any) -> Any:
        info = request.info
        program_dir = info.program_directory or request.program or request.pwd
        entry = info.entry_point or "."
        program = str(Path(program_dir) / entry) if entry != "." else program_dir
        argv = [_python(), "-u", EXEC,
                "--monitor", request.monitor_address,
                "--engine", self.engine_address,
                "--project", request.project,
                "--stack", request.stack,
                "--pwd", request.pwd,
                "--parallel", str(request.parallel),
                "--organization", request.organization or "organization",
                "--root", info.root_directory or request.pwd]
        if request.dryRun:
            argv.append("--dry-run")
        argv.append(program)
        env = dict(os.environ)
        env["PULUMI_CONFIG"] = json.dumps(dict(request.config))
        env["PULUMI_CONFIG_SECRET_KEYS"] = json.dumps(list(request.configSecretKeys))
        proc = subprocess.run(argv, cwd=request.pwd or None, env=env, check=False)
        if proc.returncode == 0:
            return language_pb2.RunResponse()
        if proc.returncode == BAIL_EXIT:
            return language_pb2.RunResponse(bail=True)
        return language_pb2.RunResponse(error=f"Program exited with non-zero exit code: {proc.returncode}")


def main(argv: list[str]) -> int:
    positional = [a for a in argv if not a.startswith("-")]
    engine = positional[0] if positional else ""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                         options=[("grpc.max_receive_message_length", 400 * 1024 * 1024)])
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(LanguageHost(engine), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: server.stop(0))
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
