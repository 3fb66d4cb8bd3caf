"""The GenAI client metrics of the model calls (``gen_ai.client.token.usage``,
``gen_ai.client.operation.duration``), when the application set a meter provider."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

TRACER_NAME = "reactgraph"
_LOCK = threading.Lock()
_INSTRUMENTS: dict[int, tuple[Any, tuple[Any, Any]]] = {}


def instruments() -> tuple[Any, Any] | None:
    """The two GenAI client histograms, when the application set a meter provider."""
    metrics = sys.modules.get("opentelemetry.metrics")
    if metrics is None:
        return None
    provider = metrics.get_meter_provider()
    if isinstance(provider, metrics.NoOpMeterProvider) or type(provider).__name__.startswith(
        "_Proxy"
    ):
        return None
    with _LOCK:
        kept = _INSTRUMENTS.get(id(provider))
        found = kept[1] if kept is not None and kept[0] is provider else None
        if found is None:
            meter = provider.get_meter(TRACER_NAME)
            found = (
                meter.create_histogram(
                    "gen_ai.client.token.usage",
                    unit="{token}",
                    description="Number of input and output tokens used",
                    explicit_bucket_boundaries_advisory=[
                        1,
                        4,
                        16,
                        64,
                        256,
                        1024,
                        4096,
                        16384,
                        65536,
                        262144,
                        1048576,
                        4194304,
                        16777216,
                        67108864,
                    ],
                ),
                meter.create_histogram(
                    "gen_ai.client.operation.duration",
                    unit="s",
                    description="GenAI operation duration",
                    explicit_bucket_boundaries_advisory=[
                        0.01,
                        0.02,
                        0.04,
                        0.08,
                        0.16,
                        0.32,
                        0.64,
                        1.28,
                        2.56,
                        5.12,
                        10.24,
                        20.48,
                        40.96,
                        81.92,
                    ],
                ),
            )
            _INSTRUMENTS[id(provider)] = (provider, found)
    return found


def record_metrics(chat: Any, reply: Mapping[str, Any] | None, error: str | None) -> None:
    found = instruments()
    if found is None:
        return
    tokens, duration = found
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", "reactgraph.kind": chat.purpose}
    if chat.model:
        attributes["gen_ai.request.model"] = chat.model
    if error is not None:
        attributes["error.type"] = error
    duration.record(time.perf_counter() - chat.started, attributes)
    if reply is not None:
        for kind, count in (("input", "prompt_tokens"), ("output", "completion_tokens")):
            tokens.record(int(reply.get(count) or 0), {**attributes, "gen_ai.token.type": kind})
