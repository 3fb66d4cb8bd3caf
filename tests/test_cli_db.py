"""Database faults on the command line: one line on stderr naming the database and what to do,
exit code 2, never a traceback; reading commands never create a database."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reactgraph.storage.database import new_record, open_db
from tests.fakes import FakeOpenAIServer
from tests.inprocess import run_main
from tests.test_cli import one_line_error, popen
from tests.test_persistence import postgres_url

# Subprocesses and servers: `make test` runs them, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow

ROOT = os.geteuid() == 0
COMMANDS = {
    "threads": ["threads"],
    "show": ["show", "t0"],
    "resume": ["resume", "t0", "--base-url", "http://127.0.0.1:9/v1"],
    "ask": ["ask", "a question", "--thread", "new", "--base-url", "http://127.0.0.1:9/v1"],
}


def filled_db(path: Path, records: int = 300) -> Path:
    """A real database with many run records (so it spans many pages)."""
    with open_db(str(path)) as (_, store):
        for number in range(records):
            record = new_record(f"t{number}", "q " * 200, "transcript", "m", None, None, {})
            record.save(store)
    return path


def garbage_file(path: Path) -> None:
    path.write_text("this is not a database " * 100)


def garbage_inside(path: Path) -> None:
    """The header stays valid; the pages after the first are overwritten."""
    filled_db(path)
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.seek(4096)
        file.write(bytes((i * 7 + 3) % 256 for i in range(size - 4096)))


def read_only_file(path: Path) -> None:
    filled_db(path)
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)


def immutable(path: Path) -> None:
    filled_db(path)
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot make a file immutable here: {done.stderr.strip()}")


def needs_non_root(make: Callable[[Path], None]) -> Callable[[Path], None]:
    def made(path: Path) -> None:
        if ROOT:
            pytest.skip("root writes through file permissions; the immutable case covers it")
        make(path)

    return made


@needs_non_root
def read_only_folder(path: Path) -> None:
    filled_db(path)
    path.parent.chmod(stat.S_IRUSR | stat.S_IXUSR)


FAULTS: dict[str, Callable[[Path], None]] = {
    "garbage": garbage_file,
    "garbage inside": garbage_inside,
    "immutable": immutable,
    "read-only file": needs_non_root(read_only_file),
    "read-only folder": read_only_folder,
}
# Which commands a fault stops: a file that cannot be written still reads.
STOPS = {
    "garbage": set(COMMANDS),
    "garbage inside": set(COMMANDS),
    "immutable": {"ask", "resume"},
    "read-only file": {"ask", "resume"},
    "read-only folder": {"ask", "resume"},
}


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """A folder for the database, made deletable again after the test."""
    where = tmp_path / "db"
    where.mkdir()
    yield where
    where.chmod(0o755)
    for path in where.iterdir():
        subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=False)
        path.chmod(0o644)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_database_fault_is_one_line_naming_the_file(
    fault: str, command: str, folder: Path
) -> None:
    db = folder / "runs.sqlite"
    FAULTS[fault](db)
    result = run_main(*COMMANDS[command], "--db", str(db))
    assert "Traceback" not in result.stderr, result.stderr
    if command not in STOPS[fault]:
        assert result.returncode == 0, result.stderr
        return
    one_line_error(result, str(db))
    assert "--db" in result.stderr or "chattr" in result.stderr  # what to do


def test_reading_commands_never_create_a_database(tmp_path: Path) -> None:
    db = tmp_path / "not" / "yet" / "runs.sqlite"
    threads = run_main("threads", "--db", str(db))
    assert threads.returncode == 0 and f"no database at {db}" in threads.stdout
    one_line_error(run_main("show", "t1", "--db", str(db)), f"no database at {db}")
    one_line_error(run_main("resume", "t1", "--db", str(db)), f"no database at {db}")
    assert not (tmp_path / "not").exists()


def test_a_postgres_fault_during_a_run_keeps_the_resume_hint(
    openai_server: FakeOpenAIServer,
) -> None:
    import psycopg

    base = postgres_url()
    name = f"rg-cli-{uuid.uuid4().hex[:8]}"
    db = f"{base}{'&' if '?' in base else '?'}application_name={name}"
    thread = f"pg-fault-{name}"
    gate = openai_server.hold()
    run = popen(
        "ask", "How many years?", "--base-url", openai_server.url, "--db", db, "--thread", thread
    )
    try:
        openai_server.wait_for_a_request()
        with psycopg.connect(base, autocommit=True) as admin:
            # Every connection of the run, as a server restart would: the run's own, and its
            # thread lock's (over which its checkpoints are written).
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name IN (%s, %s)",
                (name, f"reactgraph-lock:{thread}"[:63]),
            )
    finally:
        gate.set()
        _, err = run.communicate(timeout=120)
    assert run.returncode == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "reactgraph: error: the database" in lines[0], lines
    assert f"reactgraph resume {thread} --db" in lines[0]
