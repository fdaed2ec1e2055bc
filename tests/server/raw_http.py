"""HTTP/1.1 over a plain socket, for what ordinary clients won't do: chunked uploads that watch for an early
answer, streams that are never read, hand-made headers. Traffic goes to 127.0.0.1 only."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


def connect(url: str, *, rcvbuf: int | None = None, timeout: float = 30.0) -> socket.socket:
    """A socket to the server at url; rcvbuf set before connecting (a small one fills fast when unread)."""
    parts = urlsplit(url)
    assert parts.hostname == "127.0.0.1", "the tests talk to 127.0.0.1 only"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(timeout)
    sock.connect((parts.hostname, parts.port))
    return sock


def head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def send_json(sock: socket.socket, path: str, body: dict, headers: dict[str, str] | None = None) -> None:
    data = json.dumps(body).encode()
    sock.sendall(head("POST", path, {"Content-Type": "application/json", "Content-Length": str(len(data)),
                                     **(headers or {})}) + data)


def upload_chunked(sock: socket.socket, path: str, chunks: Iterable[bytes],
                   headers: dict[str, str] | None = None) -> tuple[int, RawResponse | None]:
    """Send a chunked body piece by piece, stopping as soon as the server answers (or closes).

    Returns the bytes of body sent and the response, if one came.
    """
    sock.sendall(head("POST", path, {"Content-Type": "application/json", "Transfer-Encoding": "chunked",
                                     **(headers or {})}))
    sent = 0
    try:
        for chunk in chunks:
            if _readable(sock):
                break
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
        else:
            sock.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server stopped reading and closed: its answer may still be waiting to be read
    return sent, read_response(sock)


def read_response(sock: socket.socket, timeout: float = 30.0) -> RawResponse | None:
    """One whole response with a Content-Length body (None when the connection ends before one arrives)."""
    data = b""
    deadline = time.monotonic() + timeout
    while b"\r\n\r\n" not in data or len(data) < _expected_length(data):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no complete response in {timeout} s: {data[:200]!r}")
        try:
            piece = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            piece = b""
        if not piece:
            break
        data += piece
    if b"\r\n\r\n" not in data:
        return None
    header_block, body = data.split(b"\r\n\r\n", 1)
    status_line, *header_lines = header_block.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in header_lines)}
    return RawResponse(status=int(status_line.split()[1]), headers=headers, body=body)


def _expected_length(data: bytes) -> int:
    if b"\r\n\r\n" not in data:
        return 0
    header_block, _ = data.split(b"\r\n\r\n", 1)
    for line in header_block.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return len(header_block) + 4 + int(value)
    return len(data)


def _readable(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])
