"""The command line's OpenTelemetry export: with ``--otel``, ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set, a tracer and a meter provider that send the runs'
spans and metrics with OTLP over HTTP (``reactgraph[otel]``; the standard
``OTEL_EXPORTER_OTLP_*`` variables configure it, and ``--otel`` alone sends to
``http://localhost:4318``, where a collector listens; ``OTEL_METRICS_EXPORTER=none`` sends no
metrics, for a backend that takes only traces, as Phoenix). The traces' endpoint alone sends
the traces only: the metrics go where ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` says, or with ``--otel`` to the default.

An endpoint that does not answer never fails a run, and delays the command's exit by at most
``SHUTDOWN_S``: the exporters time out after ``EXPORT_TIMEOUT_S`` (unless the variables say
less), and the final flush runs on a daemon thread the exit does not wait for past that.
Worker processes (``batch``, ``eval``) inherit ``REACTGRAPH_OTEL`` and export the same way.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from typing import Any

logger = logging.getLogger(__name__)

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
METRICS_ENV = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
# Set by ``--otel`` for the command's own worker processes.
FLAG_ENV = "REACTGRAPH_OTEL"
DEFAULT_ENDPOINT = "http://localhost:4318"
EXPORT_TIMEOUT_S = 2.0
SHUTDOWN_S = 3.0
INSTALL_HINT = "tracing needs the OpenTelemetry SDK: pip install 'reactgraph[otel]'"

_providers: list[Any] = []
_lock = threading.Lock()


class TracingUnavailable(RuntimeError):
    """``--otel`` was asked for, and the OpenTelemetry SDK or exporter is not installed."""


def _set(name: str) -> str:
    return os.environ.get(name, "").strip()


def flagged(flag: bool = False) -> bool:
    """``--otel``, or its worker's inherited flag."""
    return flag or os.environ.get(FLAG_ENV) == "1"


def wanted(flag: bool = False) -> bool:
    """Whether this process exports: ``--otel``, its worker's inherited flag, or an endpoint
    (the OTLP one, or the traces' own: either alone is enough, as OpenTelemetry's conventions
    have it)."""
    return bool(flagged(flag) or _set(ENDPOINT_ENV) or _set(TRACES_ENV))


def metrics_wanted(flag: bool = False) -> bool:
    """Whether the metrics are sent too: not with ``OTEL_METRICS_EXPORTER=none``, nor when only
    the traces' endpoint was given (nothing says where metrics would go)."""
    if _set("OTEL_METRICS_EXPORTER").lower() == "none":
        return False
    return bool(flagged(flag) or _set(ENDPOINT_ENV) or _set(METRICS_ENV))


def _timeout() -> float:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        value = os.environ.get(name)
        if value:
            try:
                # The variables are in milliseconds (the spec), though older SDKs read seconds.
                return min(float(value) / 1000.0, EXPORT_TIMEOUT_S)
            except ValueError:
                pass
    return EXPORT_TIMEOUT_S


# What exporting needs: the API, the SDK and the OTLP/HTTP exporters (``reactgraph[otel]``).
_SDK_MODULES = (
    "opentelemetry.metrics",
    "opentelemetry.trace",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.sdk.metrics",
    "opentelemetry.sdk.metrics.export",
    "opentelemetry.sdk.resources",
    "opentelemetry.sdk.trace",
    "opentelemetry.sdk.trace.export",
)


def _tracing(endpoint: str, resource: Any, timeout: float) -> Any:
    """The process's tracer provider, set, sending batches of spans to ``endpoint``."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    spans = OTLPSpanExporter(endpoint=endpoint, timeout=timeout)
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(
        BatchSpanProcessor(spans, schedule_delay_millis=1000, export_timeout_millis=timeout * 1000)
    )
    trace.set_tracer_provider(provider)
    return provider


def _metering(endpoint: str, resource: Any, timeout: float) -> Any:
    """The process's meter provider, set, sending the metrics to ``endpoint`` each minute."""
    from opentelemetry import metrics
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=endpoint, timeout=timeout),
        export_interval_millis=60_000,
        export_timeout_millis=timeout * 1000,
    )
    provider = MeterProvider(resource=resource, metric_readers=[reader], shutdown_on_exit=False)
    metrics.set_meter_provider(provider)
    return provider


def _endpoint(own: str, signal: str) -> str:
    """Where one signal goes: its own variable ``own``, else ``/v1/<signal>`` under the
    OTLP endpoint (or the default, a collector on this machine)."""
    base = (_set(ENDPOINT_ENV) or DEFAULT_ENDPOINT).rstrip("/")
    return _set(own) or f"{base}/v1/{signal}"


def _resource() -> Any:
    """What the telemetry says it comes from: ``OTEL_SERVICE_NAME``, else reactgraph."""
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    return Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or "reactgraph"})


def _unavailable(flag: bool, error: ImportError) -> bool:
    """The SDK is missing: ``TracingUnavailable`` for ``--otel``, else a warning (False)."""
    if flag:
        raise TracingUnavailable(INSTALL_HINT) from error
    named = ENDPOINT_ENV if _set(ENDPOINT_ENV) else TRACES_ENV
    logger.warning("%s is set but %s; the runs are not traced", named, INSTALL_HINT)
    return False


def start(flag: bool = False) -> bool:
    """Set the process's tracer and meter providers to export with OTLP, once; True when they
    are set. With ``flag`` (``--otel``) a missing SDK raises ``TracingUnavailable``; with only
    the endpoint set it is a warning, and the run goes on untraced."""
    if not wanted(flag):
        return False
    with _lock:
        if _providers:
            return True
        try:
            for module in _SDK_MODULES:
                importlib.import_module(module)
        except ImportError as error:
            return _unavailable(flag, error)
        if flag:
            os.environ[FLAG_ENV] = "1"  # the command's worker processes export too
        timeout, resource = _timeout(), _resource()
        traces = _endpoint(TRACES_ENV, "traces")
        _providers.append(_tracing(traces, resource, timeout))
        if metrics_wanted(flag):
            _providers.append(_metering(_endpoint(METRICS_ENV, "metrics"), resource, timeout))
        logger.info("exporting traces to %s", traces)
    return True


def stop() -> None:
    """End the spans still open (a run left waiting), send what is buffered, and shut the
    providers down, waiting at most ``SHUTDOWN_S`` however the endpoint behaves."""
    with _lock:
        providers = list(_providers)
        _providers.clear()
    if not providers:
        return
    from reactgraph.nodes.loop.middleware import tracing

    tracing.end_all()

    def shut() -> None:
        if "langsmith" in sys.modules:  # its OTel mode hands spans over from its own thread
            try:
                from langchain_core.tracers.langchain import wait_for_all_tracers

                wait_for_all_tracers()
            except Exception as error:
                logger.warning("LangSmith's traces did not finish: %s", error)
        for provider in providers:
            try:
                provider.shutdown()
            except Exception as error:  # an exporter's fault never fails the command
                logger.warning("could not send the traces: %s", error)

    worker = threading.Thread(target=shut, name="reactgraph-otel-shutdown", daemon=True)
    worker.start()
    worker.join(SHUTDOWN_S)
    if worker.is_alive():
        logger.warning(
            "the trace endpoint did not answer in %.0f s; traces were dropped", SHUTDOWN_S
        )
