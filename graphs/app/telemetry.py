"""The command line's OpenTelemetry export: with ``--otel`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``
set, a tracer and a meter provider that send the runs' spans and metrics with OTLP over HTTP
(``reactgraph[otel]``; the standard ``OTEL_EXPORTER_OTLP_*`` variables configure it, and
``--otel`` alone sends to ``http://localhost:4318``, where a collector listens;
``OTEL_METRICS_EXPORTER=none`` sends no metrics, for a backend that takes only traces, as
Phoenix).

An endpoint that does not answer never fails a run, and delays the command's exit by at most
``SHUTDOWN_S``: the exporters time out after ``EXPORT_TIMEOUT_S`` (unless the variables say
less), and the final flush runs on a daemon thread the exit does not wait for past that.
Worker processes (``batch``, ``eval``) inherit ``REACTGRAPH_OTEL`` and export the same way.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

logger = logging.getLogger(__name__)

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
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


def wanted(flag: bool = False) -> bool:
    """Whether this process exports: ``--otel``, its worker's inherited flag, or an endpoint."""
    return bool(flag or os.environ.get(FLAG_ENV) == "1" or os.environ.get(ENDPOINT_ENV, "").strip())


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
            from opentelemetry import metrics, trace
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
            from opentelemetry.sdk.resources import SERVICE_NAME, Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as error:
            if flag:
                raise TracingUnavailable(INSTALL_HINT) from error
            logger.warning("%s is set but %s; the runs are not traced", ENDPOINT_ENV, INSTALL_HINT)
            return False
        if flag:
            os.environ[FLAG_ENV] = "1"  # the command's worker processes export too
        endpoint = os.environ.get(ENDPOINT_ENV, "").strip() or DEFAULT_ENDPOINT
        base = endpoint.rstrip("/")
        timeout = _timeout()
        resource = Resource.create(
            {SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or "reactgraph"}
        )
        traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or f"{base}/v1/traces"
        spans = OTLPSpanExporter(endpoint=traces, timeout=timeout)
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        tracer_provider.add_span_processor(
            BatchSpanProcessor(
                spans, schedule_delay_millis=1000, export_timeout_millis=timeout * 1000
            )
        )
        measures = os.environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or f"{base}/v1/metrics"
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=measures, timeout=timeout),
            export_interval_millis=60_000,
            export_timeout_millis=timeout * 1000,
        )
        trace.set_tracer_provider(tracer_provider)
        _providers.append(tracer_provider)
        if os.environ.get("OTEL_METRICS_EXPORTER", "").strip().lower() != "none":
            meter_provider = MeterProvider(
                resource=resource, metric_readers=[reader], shutdown_on_exit=False
            )
            metrics.set_meter_provider(meter_provider)
            _providers.append(meter_provider)
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
    from reactgraph.nodes.features import tracing

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
