"""A threaded HTTP server on a free loopback port, for the fakes of services we cannot run
here (a rerank API, a webhook receiver): each POST is answered by a function of its path,
headers (lower-cased) and body. A reply may also stream its body (`chunks`, a pause before
each, no length: the connection's end ends it), to play a slow or endless server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes = b""
    content_type: str | None = None
    chunks: Iterable[bytes] | None = None  # streamed after `body`, until the client hangs up
    pause_seconds: float = 0.0  # before each chunk
    headers: tuple[tuple[str, str], ...] = ()


Answer = Callable[[str, dict[str, str], bytes], Reply]


@contextmanager
def loopback_server(answer: Answer) -> Iterator[str]:
    """Serve until the block ends; its base URL (http://127.0.0.1:PORT)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {name.lower(): value for name, value in self.headers.items()}
            reply = answer(self.path, headers, body)
            self.send_response(reply.status)
            if reply.content_type is not None:
                self.send_header("content-type", reply.content_type)
            if reply.chunks is None:
                self.send_header("content-length", str(len(reply.body)))
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)
            if reply.chunks is not None:
                self._stream(reply)

        def _stream(self, reply: Reply) -> None:
            assert reply.chunks is not None
            try:
                for chunk in reply.chunks:
                    time.sleep(reply.pause_seconds)
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except OSError:  # the client hung up: what a server that streams sees
                return

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
