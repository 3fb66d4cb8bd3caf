"""What each pytest-xdist worker gets of its own: a PostgreSQL database.

The PostgreSQL tests use fixed thread ids (``t1``, ``pg-notes-...``) on the test server's one
database; two workers running two of them at once would see each other's threads. So each
worker makes a database of its own beside the test one (``<name>_<checkout>_gw0``...: the
checkout's tag keeps two checkouts' suites on one server, run at once, out of each other's
databases), empty at the start of the run, dropped at its end, and points
``REACTGRAPH_TEST_POSTGRES_URL`` at it (the commands a test starts inherit it). Without a
server nothing changes: the tests skip (or fail in CI) as ``tests.test_persistence.postgres_url``
says.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

logger = logging.getLogger(__name__)

VARIABLE = "REACTGRAPH_TEST_POSTGRES_URL"
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
CHECKOUT = hashlib.sha1(str(Path(__file__).resolve().parents[1]).encode()).hexdigest()[:8]
"""This checkout's tag in its workers' database names."""


def base_url() -> str:
    """The test server's database: REACTGRAPH_TEST_POSTGRES_URL, else this project's local one."""
    return os.environ.get(VARIABLE, DEFAULT_URL)


def worker_url(base: str, worker: str) -> str:
    """``base`` with its database name suffixed by the checkout's tag and the worker's id."""
    parts = urlsplit(base)
    name = parts.path.lstrip("/") or "postgres"
    return urlunsplit(parts._replace(path=f"/{name}_{CHECKOUT}_{worker}"))


def _recreate(admin_url: str, name: str, *, create: bool) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if create:
            admin.execute(f'CREATE DATABASE "{name}"')


def claim(worker: str | None) -> str | None:
    """On an xdist worker: make its database and point the tests at it; its URL, or None (not
    a worker, or no server to make it on: the base URL stays, and says so when a test uses it)."""
    if not worker:
        return None
    base = base_url()
    url = worker_url(base, worker)
    try:
        _recreate(base, urlsplit(url).path.lstrip("/"), create=True)
    except Exception as error:  # no server, or no right to make databases: as before
        logger.warning("no PostgreSQL database of worker %s at %s: %s", worker, url, error)
        return None
    os.environ[VARIABLE] = url
    return url


def release(url: str | None, base: str) -> None:
    """Drop a worker's database (its connections ended first) at the end of its run."""
    if url is None:
        return
    try:
        _recreate(base, urlsplit(url).path.lstrip("/"), create=False)
    except Exception as error:
        logger.warning("could not drop %s: %s", url, error)
