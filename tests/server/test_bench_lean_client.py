"""The lean load generator of benchmarks/vs_vllm.py counts what a streamed chat answer holds, however the bytes
arrive: against a local server that writes its events in awkward pieces."""

from __future__ import annotations

import asyncio
import json

from benchmarks.lean_client import lean_streamed


def _event(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _delta(content: str) -> dict:
    return {"choices": [{"index": 0, "delta": {"content": content}}]}


STREAM = (_event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
          + b"".join(_event(_delta(text)) for text in ("Hel", "lo", '"quoted"', " world"))
          + _event({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11}})
          + b"data: [DONE]\n\n")


async def _serve(status: str, body: bytes, piece: int) -> tuple[asyncio.AbstractServer, int]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/event-stream\r\n\r\n".encode())
        for start in range(0, len(body), piece):  # every piece its own write, a pause between them
            writer.write(body[start:start + piece])
            await writer.drain()
            await asyncio.sleep(0.002)
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _request(status: str, body: bytes, piece: int):
    async def run():
        server, port = await _serve(status, body, piece)
        async with server:
            return await lean_streamed(f"http://127.0.0.1:{port}/v1/chat/completions", {"stream": True})
    return asyncio.run(run())


def test_counts_each_content_event_once_whatever_the_pieces():
    for piece in (5, 7, 64, 4096):  # markers split across reads, several events in one read
        result = _request("200 OK", STREAM, piece)
        assert result.ok, (piece, result.error)
        assert (result.prompt_tokens, result.output_tokens) == (7, 4)
        assert len(result.itl_s) == 3, piece  # four content events (the role event's "" is none): three gaps
        assert result.ttft_s > 0 and result.e2e_s >= result.ttft_s


def test_an_error_event_or_a_refusal_is_the_request_failing():
    error = _event({"error": {"message": "the model produced logits with NaN", "code": 500}})
    failed = _request("200 OK", _event(_delta("a")) + error, 64)
    assert not failed.ok and failed.error == "the model produced logits with NaN"
    refused = _request("429 Too Many Requests", b'{"error":"queue full"}', 64)
    assert not refused.ok and refused.error.startswith("HTTP/1.1 429")


def test_a_stream_without_usage_is_not_counted():
    result = _request("200 OK", _event(_delta("a")) + b"data: [DONE]\n\n", 64)
    assert not result.ok and result.error == "no usage chunk in the stream"
