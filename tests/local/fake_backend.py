"""A stand-in inference server for launcher tests, run as a script in a child process.

It finds its port the way the real programs do (``--port`` for llama-server and vLLM argv,
``OLLAMA_HOST`` for ``ollama serve``) and behaves as ``FAKE_MODE`` says:

- ``ok``: ready at once; ``slow:N``: HTTP 503 for the first N probes, then ready;
- ``never``: always 503; ``exit``: writes a line and exits with status 3 without listening;
- ``ignore-term``: ready, and ignores SIGTERM (only SIGKILL stops it).

``FAKE_MODELS`` (comma-separated) is what ``/v1/models`` and ``/api/tags`` list. If
``FAKE_RECORD`` names a file, the argv and environment are written there as JSON first.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _port() -> tuple[str, int]:
    if "--port" in sys.argv:
        host = sys.argv[sys.argv.index("--host") + 1] if "--host" in sys.argv else "127.0.0.1"
        return host, int(sys.argv[sys.argv.index("--port") + 1])
    host, _, port = os.environ["OLLAMA_HOST"].rpartition(":")
    return host, int(port)


def main() -> int:
    mode = os.environ.get("FAKE_MODE", "ok")
    models = [m for m in os.environ.get("FAKE_MODELS", "").split(",") if m]
    if record := os.environ.get("FAKE_RECORD"):
        with open(record, "w") as f:
            json.dump({"argv": sys.argv, "env": dict(os.environ)}, f)
    sys.stderr.write(f"fake backend starting in mode {mode}\n")
    sys.stderr.flush()
    if mode == "exit":
        sys.stderr.write("fake backend: cannot load model\n")
        return 3
    loading = int(mode.split(":")[1]) if mode.startswith("slow:") else 0
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            nonlocal loading
            with lock:
                still_loading = mode == "never" or loading > 0
                loading -= 1
            if still_loading:
                self._send(503, {"error": {"message": "Loading model"}})
            elif self.path == "/health":
                self._send(200, {"status": "ok"})
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": m} for m in models]})
            elif self.path == "/api/tags":
                self._send(200, {"models": [{"name": m, "model": m} for m in models]})
            else:
                self._send(404, {"error": "not found"})

        def _send(self, status: int, payload: object) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            sys.stderr.write("request: " + format % args + "\n")

    server = ThreadingHTTPServer(_port(), Handler)
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    sys.stderr.write("fake backend listening\n")
    sys.stderr.flush()
    server.serve_forever(poll_interval=0.02)
    sys.stderr.write("fake backend stopped\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
