"""A loopback OTLP/HTTP receiver for tests: what an exporter sends to ``/v1/traces`` (protobuf),
decoded into plain span records; and a black-holed port that accepts connections and never
answers."""

from __future__ import annotations

import gzip
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class OTLPReceiver:
    """Listens on 127.0.0.1; ``spans`` are the spans received so far (name, ids, attributes,
    events, status, scope)."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.posts: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.posts.append(self.path)
                if self.path.endswith("/v1/traces"):
                    receiver._traces(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _traces(self, body: bytes) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    self.spans.append(
                        {
                            "name": span.name,
                            "scope": scope.scope.name,
                            "trace": span.trace_id.hex(),
                            "span": span.span_id.hex(),
                            "parent": span.parent_span_id.hex() or None,
                            "attributes": {a.key: _value(a.value) for a in span.attributes},
                            "events": [e.name for e in span.events],
                            "status": span.status.code,
                        }
                    )

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


class BlackHole:
    """A port that takes connections into its backlog and never answers them."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"

    def close(self) -> None:
        self._socket.close()
