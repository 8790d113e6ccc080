"""The driver base (providers/base.py) and the one capability check (contract.capability): what each built-in
driver can do beyond the contract, the polling wait, the lazy client, pickling as plain configuration, the
cached observer; and the ipmi package's modules import each other without a cycle."""

from __future__ import annotations

import ast
import pickle
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from metalfleet.providers.alibaba.driver import AlibabaDriver
from metalfleet.providers.aws.driver import AwsDriver
from metalfleet.providers.base import CachedObserver, Lazy, PerThread, PlainConfig, wait_for_state
from metalfleet.providers.contract import (
    ClusterResourcesDriver,
    HealthDriver,
    HostKeysDriver,
    PowerDriver,
    SubscriptionDriver,
    TaggingDriver,
    capability,
)
from metalfleet.providers.errors import OperationTimeout, ProviderError, RateLimitedError
from metalfleet.providers.fake import FakeDriver
from metalfleet.providers.huawei.driver import HuaweiDriver
from metalfleet.providers.ipmi.driver import IpmiDriver
from metalfleet.providers.models import Node, NodeState

CAPABILITIES = (TaggingDriver, ClusterResourcesDriver, SubscriptionDriver, HostKeysDriver, PowerDriver, HealthDriver)
#: Written from reading each driver class: the optional capabilities it implements.
HAS: dict[type, set[type]] = {
    FakeDriver: {TaggingDriver, SubscriptionDriver},
    AwsDriver: {TaggingDriver, ClusterResourcesDriver, HostKeysDriver},
    AlibabaDriver: {TaggingDriver, ClusterResourcesDriver, HostKeysDriver, SubscriptionDriver},
    HuaweiDriver: {TaggingDriver, HostKeysDriver, SubscriptionDriver},
    IpmiDriver: {TaggingDriver, HostKeysDriver, PowerDriver, HealthDriver},
}


@pytest.mark.parametrize("driver", list(HAS), ids=lambda c: c.__name__)
def test_each_built_in_driver_has_the_capabilities_it_implements_and_no_other(driver: type) -> None:
    assert {c for c in CAPABILITIES if issubclass(driver, c)} == HAS[driver]


def test_capability_answers_the_driver_as_the_protocol_or_none() -> None:
    fake = FakeDriver()
    assert capability(fake, TaggingDriver) is fake
    assert capability(fake, SubscriptionDriver) is fake
    assert capability(fake, HostKeysDriver) is None
    assert capability(fake, PowerDriver) is None

    class Blocked(FakeDriver):
        set_tags = None  # type: ignore[assignment]  # a method switched off is no capability

    assert capability(Blocked(), TaggingDriver) is None


def _node(node_id: str, state: NodeState) -> Node:
    return Node(id=node_id, provider="test", region="r", state=state, offering="o")


def test_wait_polls_until_every_node_is_in_the_state_and_reports_each_round() -> None:
    answers = iter([[_node("a", NodeState.PENDING), _node("b", NodeState.RUNNING)],
                    RateLimitedError("slow down", provider="test"),
                    [_node("a", NodeState.RUNNING), _node("b", NodeState.RUNNING)]])

    def read() -> Sequence[Node]:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    seen: list[list[str]] = []
    nodes = wait_for_state(["a", "b"], read, NodeState.RUNNING, timeout=5, poll=0.01, provider="test", what="w",
                           timed_out=lambda ns: "never", progress=lambda ns: seen.append([n.state for n in ns]))
    assert [n.state for n in nodes] == [NodeState.RUNNING, NodeState.RUNNING]
    assert seen == [[NodeState.PENDING, NodeState.RUNNING], [NodeState.RUNNING, NodeState.RUNNING]]


def test_wait_is_not_done_while_a_node_has_no_answer_and_times_out_with_the_drivers_message() -> None:
    with pytest.raises(OperationTimeout) as info:
        wait_for_state(["a", "b"], lambda: [_node("a", NodeState.RUNNING)], NodeState.RUNNING, timeout=0.05,
                       poll=0.01, provider="test", what="w",
                       timed_out=lambda ns: f"{len(ns)} of 2 answered")
    assert info.value.message == "1 of 2 answered" and info.value.provider == "test"


def test_wait_fails_at_once_only_while_waiting_to_run() -> None:
    def failed(nodes: Sequence[Node]) -> None:
        raise ProviderError("gone", provider="test")

    gone = [_node("a", NodeState.TERMINATED)]
    with pytest.raises(ProviderError, match="gone"):
        wait_for_state(["a"], lambda: [_node("a", NodeState.PENDING)], NodeState.RUNNING, timeout=5, poll=0.01,
                       provider="test", what="w", timed_out=str, failed=failed)
    assert wait_for_state(["a"], lambda: gone, NodeState.TERMINATED, timeout=5, poll=0.01, provider="test",
                          what="w", timed_out=str, failed=failed) == gone


def test_lazy_builds_once_for_all_threads_and_again_after_a_failed_build() -> None:
    attempts: list[int] = []

    def build() -> int:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("no credentials")
        return len(attempts)

    client = Lazy(build)
    with pytest.raises(RuntimeError):
        client()
    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert client() == 2 and len(attempts) == 2


def test_per_thread_builds_one_client_per_thread() -> None:
    client = PerThread(object)
    mine = client()
    theirs: list[object] = []
    t = threading.Thread(target=lambda: theirs.append(client()))
    t.start()
    t.join()
    assert client() is mine and theirs[0] is not mine


class _Driver(PlainConfig):
    CONFIG = ("region",)

    def __init__(self, region: str, secret: str) -> None:
        self.region = region
        self.secret = secret
        self._init_runtime()

    def _init_runtime(self) -> None:
        self.client = Lazy(object)


def test_a_driver_pickles_as_its_plain_configuration_and_builds_its_runtime_again() -> None:
    driver = _Driver("r1", "hunter2")
    driver.client()
    assert driver.__getstate__() == {"region": "r1"}
    again = pickle.loads(pickle.dumps(driver))
    assert again.region == "r1" and not hasattr(again, "secret") and again.client() is not driver.client()


def test_the_cached_observer_keeps_only_host_keys_found_and_knows_unread_nodes() -> None:
    observer = CachedObserver("test", "r")
    consoles = iter(["booting...", "-----BEGIN SSH HOST KEY KEYS-----\nssh-ed25519 AAAAC3 root@n\n"
                     "-----END SSH HOST KEY KEYS-----\n"])
    reads: list[str] = []

    def console() -> str:
        reads.append("x")
        return next(consoles)

    assert observer.console_keys("n", console) == ()
    assert observer.console_keys("n", console) == ("ssh-ed25519 AAAAC3 root@n",)
    assert observer.console_keys("n", console) == ("ssh-ed25519 AAAAC3 root@n",) and len(reads) == 2
    bare = observer.known("m", NodeState.PENDING)
    assert (bare.id, bare.state, bare.offering, bare.provider) == ("m", NodeState.PENDING, "", "test")
    observer.remember(_node("m", NodeState.RUNNING))
    observer.retag("m", {"k": "v"})
    assert observer.known("m", NodeState.STOPPED).tags == {"k": "v"}


def _imports(path: Path, package: str) -> set[str]:
    """The modules of ``package`` that ``path`` imports, at module level or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.add(node.module.split(".")[0] if node.module else "")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package + "."):
            found.add(str(node.module)[len(package) + 1:].split(".")[0])
    return found - {""}


def test_the_ipmi_modules_import_each_other_without_a_cycle() -> None:
    root = Path(__file__).resolve().parents[2] / "providers" / "ipmi"
    graph = {p.stem: _imports(p, "metalfleet.providers.ipmi") for p in root.glob("*.py") if p.stem != "__init__"}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join((*path, module))}"
        if module in done:
            return
        for dep in graph.get(module, ()):
            visit(dep, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())
    assert "model" not in graph["inventory"] and "inventory" in graph["model"]

