"""A local HTTP server that speaks the wire formats of OpenAI's chat completions
(`POST /v1/chat/completions`, `POST /chat/completions`) and Anthropic's messages
(`POST /v1/messages`), answering from a recording: one response a request, in order. A response
is `{"status": 200, "body": {...}}` (the API's JSON, as the real endpoint sends it), with
`"headers"` to add (`retry-after`), `"raw"` for a body that is not JSON, or `"sleep"` seconds
before answering (a timeout). `replies(...)` makes the bodies of replies with a text and token
counts; recordings under tests/agent/llm_recordings/ hold whole exchanges."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RECORDINGS = Path(__file__).resolve().parent / "llm_recordings"


def openai_body(text: str, prompt_tokens: int, completion_tokens: int, model: str = "kir-test") -> dict[str, Any]:
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": 1764892800,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def anthropic_body(text: str, input_tokens: int, output_tokens: int, model: str = "kir-test") -> dict[str, Any]:
    return {
        "id": "msg_local",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def recording(name: str) -> list[dict[str, Any]]:
    """The responses of a recorded exchange file."""
    return json.loads((RECORDINGS / f"{name}.json").read_text())["responses"]


class Replay:
    """The server: `url` to give the SDK as its base URL; `requests` what it was sent (path and
    JSON body), in order. Past the recording's end it answers 500."""

    def __init__(self, responses: list[dict[str, Any]], prefix: str = "/v1") -> None:
        self.responses = list(responses)
        self.requests: list[tuple[str, Any]] = []
        self.lock = threading.Lock()
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                with replay.lock:
                    replay.requests.append((self.path, body))
                    response = replay.responses.pop(0) if replay.responses else {"status": 500, "body": {}}
                if response.get("sleep"):
                    time.sleep(float(response["sleep"]))
                data = response["raw"].encode() if "raw" in response else json.dumps(response.get("body", {})).encode()
                try:
                    self.send_response(int(response.get("status", 200)))
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in (response.get("headers") or {}).items():
                        self.send_header(k, str(v))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{prefix}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Replay:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
