"""Agent Chat UI for the browser test: a copy of its source with its packages installed,
served by ``next dev`` against a LangGraph server; and what the test needs on the machine."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from reactgraph import VARIANTS
from tests.langgraph_dev import LANGGRAPH, ROOT, free_port, serving

CHAT_UI = Path(os.environ.get("REACTGRAPH_AGENT_CHAT_UI") or ROOT.parent / "shared/agent-chat-ui")
CHROMIUM = os.environ.get("REACTGRAPH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# Compiling the client's page once takes minutes on a busy two-core machine.
COMPILE_S = 1800


def missing() -> str | None:
    """Why the browser test cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (pip install -e '.[dev]')"
    if not Path(CHROMIUM).exists():
        return f"Chromium is not installed at {CHROMIUM} (apt-get install -y chromium)"
    if shutil.which("npm") is None or shutil.which("npx") is None:
        return "npm is not installed"
    if not (CHAT_UI / "package-lock.json").exists():
        return f"Agent Chat UI's source is not at {CHAT_UI}"
    if not LANGGRAPH.exists():
        return "langgraph-cli is not installed"
    return None


def prepared_copy() -> Path:
    """A copy of the client's source with its packages installed (``npm ci``): in
    ``build/agent-chat-ui`` (ignored by git), kept between runs while the lock file is the
    same, so a rerun skips the install and reuses the compile cache."""
    app = ROOT / "build" / "agent-chat-ui"
    lock = (CHAT_UI / "package-lock.json").read_text()
    installed = app / "node_modules" / ".package-lock.json"
    fresh = not installed.exists() or (app / "package-lock.json").read_text() != lock
    if fresh and app.exists():
        shutil.rmtree(app)
    shutil.copytree(
        CHAT_UI, app, ignore=shutil.ignore_patterns("node_modules", ".next"), dirs_exist_ok=True
    )
    # Offline: the layout's Google font would be downloaded at compile time; use the default.
    layout = app / "src/app/layout.tsx"
    text = layout.read_text().replace('import { Inter } from "next/font/google";\n', "")
    start = text.index("const inter = Inter(")
    end = text.index(");", start) + 2
    layout.write_text(text[:start] + 'const inter = { className: "" };' + text[end:])
    return app


@contextlib.contextmanager
def chat_ui(folder: Path, api_url: str) -> Iterator[str]:
    """Agent Chat UI from a prepared copy of its source, pointed at ``api_url``."""
    app = prepared_copy()
    log = folder / "next.log"
    env = {
        **os.environ,
        "NEXT_TELEMETRY_DISABLED": "1",
        "NEXT_PUBLIC_API_URL": api_url,
        "NEXT_PUBLIC_ASSISTANT_ID": VARIANTS[0],
    }
    with open(log, "w") as out:
        if not (app / "node_modules" / ".package-lock.json").exists():
            subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund"], cwd=app, env=env, stdout=out, stderr=out
            ).check_returncode()
    port = free_port()
    command = ["npx", "next", "dev", "-p", str(port), "-H", "127.0.0.1"]
    url = f"http://127.0.0.1:{port}"
    # The first request compiles the page.
    with serving(command, app, env, log, f"{url}/", COMPILE_S):
        yield url
