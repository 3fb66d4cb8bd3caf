"""Test-wide guards: no test reaches the network (cl100k_base, what token counts need, ships in
the package: nothing beside the checkout is read)."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
from pathlib import Path
from typing import Any

import pytest

from reactgraph.storage.backends import registered

ROOT = Path(__file__).resolve().parents[1]
# What tests must never leave inside the checkout (`make test` keeps `git status` clean).
_LITTER = ("runs", ".langgraph_api")
_BEFORE = {name for name in _LITTER if (ROOT / name).exists()}
_BASE_POSTGRES = pytest.StashKey[str]()
_WORKER_POSTGRES = pytest.StashKey["str | None"]()
# Ray (the Ray engine's tests) keeps every node on 127.0.0.1 with this, never the machine's
# network address; it is read when ray is imported, so it is set before any test module loads.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# A suite started in the background by a shell (`make test &`, nohup) inherits SIGINT ignored,
# and so would every command a test starts: the Ctrl-C tests would then see no Ctrl-C at all.
# Commands get the default disposition, as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _is_local(address: Any) -> bool:
    if isinstance(address, str | bytes):
        return True  # a Unix socket path
    if not isinstance(address, tuple) or not address:
        return False
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def elsewhere(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs in a folder of its own: a default path (runs/notes, say) never lands in
    the checkout."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Fail any test that tries to connect beyond loopback (a real model endpoint, a download)."""
    attempts: list[Any] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def guard(address: Any) -> None:
        if not _is_local(address):
            attempts.append(address)
            raise ConnectionRefusedError(f"tests may not reach the network: {address!r}")

    def connect(self: socket.socket, address: Any) -> Any:
        guard(address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> Any:
        guard(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    yield
    if attempts:
        pytest.fail(f"the test tried to reach the network: {attempts}")


@pytest.fixture
def openai_server() -> Any:
    """A local OpenAI-compatible server for the test, closed afterwards; what was found out
    about the server at its address is forgotten (a later test's may get the same port)."""
    from reactgraph.nodes.calling import cachehints, constrained, streamchoice, transport
    from tests.fakes import FakeOpenAIServer

    server = FakeOpenAIServer()
    yield server
    server.close()
    streamchoice.forget()
    constrained.forget()
    transport.forget()
    cachehints.forget()


@pytest.fixture
def seed_server(openai_server: Any) -> Any:
    """``openai_server`` answering every request as ``seed_responder`` does (48, in four turns)."""
    from tests.fakes import seed_responder

    openai_server.responder = seed_responder
    return openai_server


@pytest.fixture(scope="module")
def seed_model_server() -> Any:
    """A local OpenAI-compatible server answering as ``seed_responder`` does, shared by the
    module's tests (for the modules whose servers start once)."""
    from tests.fakes import FakeOpenAIServer, seed_responder

    server = FakeOpenAIServer()
    server.responder = seed_responder
    yield server
    server.close()


@pytest.fixture(scope="module")
def http_server() -> Any:
    """The MCP test server over streamable HTTP, shared by the tests that leave it running."""
    from tests.mcp_servers import shared_http_server

    return shared_http_server()


@pytest.fixture
def own_http_server() -> Any:
    """An MCP HTTP server of the test's own, for a test that ends it."""
    from tests.mcp_servers import HttpServer

    server = HttpServer().start()
    yield server
    server.stop()


@pytest.fixture(params=[backend.name for backend in registered()])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database for the test, once per registered storage backend: a new SQLite file, the
    PostgreSQL test server (skipped where there is none)..."""
    from tests.test_persistence import database_at

    return database_at(request.param, tmp_path)


@pytest.fixture(params=["invoke", "ainvoke"])
def run(request: pytest.FixtureRequest) -> Any:
    """Run a graph through ``invoke`` and, as a second test, through ``ainvoke``: every
    behaviour test of a variant holds on both paths."""
    from tests.fakes import runner

    return runner(request.param)


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker its own PostgreSQL database (``tests.workers``)."""
    from tests import workers

    config.stash[_BASE_POSTGRES] = workers.base_url()
    config.stash[_WORKER_POSTGRES] = workers.claim(os.environ.get("PYTEST_XDIST_WORKER"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the modules holding subprocess and server tests (``slow``) first, each
    module's tests still together and in order: the workers take the long tests while there is
    other work to do beside them, instead of ending the run on one long test while the other
    worker waits (every worker sorts the same way, as xdist requires). Before that, every test's
    markers are kept, the ones ``-m`` will deselect included."""
    from tests import collected

    config.stash[collected.MARKERS] = {
        item.nodeid: frozenset(mark.name for mark in item.iter_markers()) for item in items
    }
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    slow = {item.module for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.module not in slow)


def pytest_unconfigure(config: pytest.Config) -> None:
    from tests import workers

    if _WORKER_POSTGRES in config.stash:
        workers.release(config.stash[_WORKER_POSTGRES], config.stash[_BASE_POSTGRES])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a test wrote its files into the checkout."""
    left = [name for name in _LITTER if (ROOT / name).exists() and name not in _BEFORE]
    if left:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\ntests left {', '.join(left)} in the checkout {ROOT}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """Each phase's report on the test item (``rep_call``), so a fixture's teardown can tell
    whether the test failed (the browser test saves a screenshot then)."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
