"""A fresh PostgreSQL database opened by several commands at once: LangGraph's ``setup()`` runs
once at a time (it races itself otherwise), and a real fault is worded as what it is."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from reactgraph.storage.database import DatabaseError, aopen_db, open_db
from reactgraph.storage.faults import explain
from tests.fakes import open_at_once, scratch_database
from tests.test_cli import popen
from tests.test_persistence import postgres_url

# A server: `make test` runs these, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    """The URL of a database created for this test (a unique name), dropped afterwards."""
    with scratch_database(postgres_url(), "rg_setup") as db:
        yield db


def test_many_openers_of_a_fresh_database_all_succeed() -> None:
    with fresh_database() as db:
        assert open_at_once(db) == []


def test_many_async_openers_of_a_fresh_database_all_succeed() -> None:
    async def main(db: str) -> list[object]:
        async def opener() -> None:
            async with aopen_db(db):
                pass

        return await asyncio.gather(*(opener() for _ in range(8)), return_exceptions=True)

    with fresh_database() as db:
        assert asyncio.run(main(db)) == [None] * 8


def test_two_commands_at_once_on_a_fresh_database() -> None:
    with fresh_database() as db:
        runs = [popen("threads", "--db", db) for _ in range(2)]
        outcomes = [(run.wait(timeout=120), run.communicate()[1]) for run in runs]
        assert all(code == 0 for code, _ in outcomes), outcomes


def test_a_setup_fault_is_not_called_a_server_that_is_down() -> None:
    db = "postgresql://postgres:secret@127.0.0.1:5432/x"
    clash = psycopg.errors.UniqueViolation(
        'duplicate key value violates unique constraint "pg_type_typname_nsp_index"'
    )
    text = explain(db, clash)
    assert "server is up" not in text and "secret" not in text
    assert "pg_type_typname_nsp_index" in text and "refused" in text
    with pytest.raises(psycopg.OperationalError) as down:
        psycopg.connect("postgresql://postgres@127.0.0.1:9/x", connect_timeout=3)
    assert "check that the server is up" in explain(db, down.value)


def test_a_missing_database_is_named_as_missing() -> None:
    base = postgres_url()
    db = urlunsplit(urlsplit(base)._replace(path=f"/rg_missing_{uuid.uuid4().hex[:8]}"))
    with pytest.raises(DatabaseError, match=r"does not exist.*create it"), open_db(db):
        pass
