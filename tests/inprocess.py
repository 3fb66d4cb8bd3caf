"""The command line run in the test's own process: ``reactgraph.app.cli.main`` with the
arguments, environment and folder a subprocess would get, its output captured, its exit code
returned as a subprocess's would be. Spares a test an interpreter start and the second or two
of imports each ``python -m reactgraph.app.cli`` costs.

    from tests.inprocess import run_main
    result = run_main("threads", "--db", db)      # as tests.test_cli.cli, same arguments
    assert result.returncode == 0 and "no threads" in result.stdout

For a test about what the command says and stores. A test about the process itself (a signal,
a kill, the exit of a hung tool, what is imported at start-up, a warning said once per process,
workers it starts) runs it with ``tests.test_cli.cli`` or ``popen`` in a subprocess.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

_LOGGERS = ("psycopg",)  # loggers whose level the command sets (``console.configure_logging``)


@contextlib.contextmanager
def _as_a_process(env: Mapping[str, str], cwd: Path) -> Iterator[None]:
    """This process's environment, folder and logging as a fresh process's, put back after."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    root = logging.getLogger()
    saved_root = root.handlers[:], root.level
    saved_levels = {name: logging.getLogger(name).level for name in _LOGGERS}
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    root.handlers = []  # so the command's logging.basicConfig takes effect, as in a process
    try:
        yield
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers, root.level = saved_root
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def _exit_code(exit: SystemExit, stderr: Any) -> int:
    """What a process's status would be after ``sys.exit(code)``."""
    if exit.code is None:
        return 0
    if isinstance(exit.code, int):
        return exit.code
    print(exit.code, file=stderr)
    return 1


def run_main(
    *args: str | bytes,
    env: dict | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``reactgraph ARGS`` run by ``main`` here; as ``tests.test_cli.cli`` returns it (bytes
    arguments are decoded as the interpreter decodes its command line)."""
    from reactgraph.app.cli import main
    from tests.test_cli import environment, scratch

    argv = [os.fsdecode(arg) for arg in args]
    # Files, not StringIO: what the command starts with this stderr (an MCP server's log, say)
    # needs a file descriptor, and writes there as a process's children would.
    with (
        _output() as stdout,
        _output() as stderr,
        _as_a_process(environment(env), cwd or scratch()),
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
    ):
        try:
            code = main(argv)
        except SystemExit as exit:
            code = _exit_code(exit, stderr)
        except Exception:  # an uncaught error: the traceback and exit 1, as a process ends
            traceback.print_exc(file=sys.stderr)
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        out, err = _read(stdout), _read(stderr)
    return subprocess.CompletedProcess(["reactgraph", *argv], code, out, err)


def _output() -> Any:
    return tempfile.TemporaryFile("w+", encoding="utf-8", errors="surrogateescape")


def _read(file: Any) -> str:
    file.seek(0)
    return file.read()
