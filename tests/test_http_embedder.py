"""The `openai-compatible` embedder against a real `uda embed-server` process.

The server runs the packaged model in its own process on a loopback port. Faults (slow,
failing, malformed answers) come from `FaultProxy`, a real HTTP server in front of it that
misbehaves on cue and otherwise forwards: the embedder's HTTP client is never replaced.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import numpy as np
import pytest
from embed_fixtures import EmbedServer, free_port, http_embedder, start_server

from uda.embedding import Embedder, packaged_model_path, weights_fingerprint
from uda.embedding.http import OpenAICompatibleEmbedder, estimated_tokens, token_batches
from uda.errors import BackendUnavailableError, ConnectorError

pytest.importorskip("uvicorn")

TEXTS = [
    "payment retries",
    "How does the ledger record a refund that was attempted twice?",
    "",  # an empty text has a vector too
    "ünïcödé, emoji 🚀 and numbers 12345",
    "word " * 400,  # longer than the model takes: cut by the server, as in process
]


# A fault answers one request: given a way to forward it upstream, it returns the status,
# headers and body to send back.
Answer = tuple[int, dict[str, str], bytes]
Fault = Callable[[Callable[[], httpx.Response]], Answer]


def status(code: int, headers: dict[str, str] | None = None, body: str = "") -> Fault:
    content = (body or json.dumps({"error": {"message": f"status {code} on cue"}})).encode()
    return lambda _forward: (code, headers or {}, content)


def slow(seconds: float) -> Fault:
    def fault(forward: Callable[[], httpx.Response]) -> Answer:
        time.sleep(seconds)
        answer = forward()
        return answer.status_code, {}, answer.content

    return fault


def rewrite(change: Callable[[dict[str, Any]], Any]) -> Fault:
    def fault(forward: Callable[[], httpx.Response]) -> Answer:
        payload = forward().json()
        change(payload)
        return 200, {}, json.dumps(payload).encode()

    return fault


def raw(body: bytes) -> Fault:
    return lambda _forward: (200, {"content-type": "application/json"}, body)


class FaultProxy:
    """A real HTTP server in front of the embedding server: each request takes the next fault
    of `script`, and is forwarded as it is once the script is empty."""

    def __init__(self, upstream: EmbedServer) -> None:
        self.script: deque[Fault] = deque()
        self.arrivals: list[float] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                proxy.arrivals.append(time.monotonic())
                fault = proxy.script.popleft() if proxy.script else slow(0)

                def forward() -> httpx.Response:
                    return httpx.post(
                        f"{upstream.url}/embeddings",
                        content=body,
                        headers={"content-type": "application/json"},
                        timeout=60,
                    )

                code, headers, content = fault(forward)
                try:
                    self.send_response(code)
                    for name, value in {"content-type": "application/json", **headers}.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(content)))
                    self.end_headers()
                    self.wfile.write(content)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting: what a timeout test wants

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def requests(self) -> int:
        return len(self.arrivals)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbedServer]:
    yield from start_server(tmp_path_factory.mktemp("embed-server") / "server.log")


@pytest.fixture
def proxy(server: EmbedServer) -> Iterator[FaultProxy]:
    faults = FaultProxy(server)
    yield faults
    faults.close()


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


# --- the vectors ----------------------------------------------------------------------------


def test_vectors_equal_the_local_runtimes(server: EmbedServer, embedder: Embedder) -> None:
    remote = http_embedder(server.url)
    got = remote.embed_documents(TEXTS)
    want = embedder.embed_documents(TEXTS)
    assert got.shape == want.shape == (len(TEXTS), 384)
    assert got.dtype == np.float32
    assert _cosines(got, want).min() >= 0.9999
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    query = remote.embed_query("how are payments retried?")
    assert float(query @ embedder.embed_query("how are payments retried?")) >= 0.9999
    assert remote.dimension == 384


def test_fingerprint_is_the_models_or_the_declared_one(
    server: EmbedServer, embedder: Embedder
) -> None:
    derived = http_embedder(server.url)
    moved = http_embedder(server.url.replace("127.0.0.1", "localhost"))
    other_model = OpenAICompatibleEmbedder(server.url, "another-model", dimension=384)
    # The URL is not part of it: a moved server keeps stores valid; another model does not.
    assert derived.fingerprint == moved.fingerprint != other_model.fingerprint
    assert derived.fingerprint != embedder.fingerprint  # a name is not proof of the weights
    served = httpx.get(f"{server.url}/models", timeout=10).json()["data"][0]
    assert served["fingerprint"] == weights_fingerprint(packaged_model_path())
    declared = http_embedder(server.url, fingerprint=served["fingerprint"])
    assert declared.fingerprint == embedder.fingerprint


# --- batching -------------------------------------------------------------------------------


def test_token_batches_cut_at_the_budget_and_the_count() -> None:
    texts = ["a" * 400] * 7  # 100 estimated tokens each
    assert [len(r) for r in token_batches(texts, budget=350, max_batch=100)] == [3, 3, 1]
    assert [len(r) for r in token_batches(texts, budget=10_000, max_batch=2)] == [2, 2, 2, 1]
    mixed = ["short", "b" * 4000, "short", "short"]  # the long one is over the budget alone
    assert [list(r) for r in token_batches(mixed, budget=300, max_batch=100)] == [
        [0],
        [1],
        [2, 3],
    ]
    assert list(token_batches([], budget=10, max_batch=10)) == []
    assert estimated_tokens("") == 1
    assert estimated_tokens("日本語") == 3  # 9 UTF-8 bytes: CJK is not under-counted by 4


def test_requests_follow_the_token_budget(server: EmbedServer, embedder: Embedder) -> None:
    texts = [f"{i:03d} " + "payment retry " * 28 + "end." for i in range(12)]
    assert {estimated_tokens(t) for t in texts} == {100}  # 400 bytes each
    cases = [({"batch_tokens": 350}, 4), ({"batch_tokens": 100_000, "max_batch": 5}, 3)]
    for options, expected_requests in cases:
        requests, inputs = server.counter("requests"), server.counter("inputs")
        got = http_embedder(server.url, **options).embed_documents(texts)
        assert server.counter("requests") - requests == expected_requests, options
        assert server.counter("inputs") - inputs == len(texts)
        # Cut into batches, the rows still come back in the texts' order.
        assert _cosines(got, embedder.embed_documents(texts)).min() >= 0.9999


def test_answers_out_of_order_are_matched_by_index(server: EmbedServer, proxy: FaultProxy) -> None:
    proxy.script.append(rewrite(lambda payload: payload["data"].reverse()))
    shuffled = http_embedder(proxy.url).embed_documents(TEXTS)
    assert proxy.requests == 1
    direct = http_embedder(server.url).embed_documents(TEXTS)
    assert _cosines(shuffled, direct).min() >= 0.9999


# --- retries and timeouts -------------------------------------------------------------------


def test_server_errors_are_retried_until_an_answer(proxy: FaultProxy) -> None:
    proxy.script.extend([status(500), status(503)])
    vectors = http_embedder(proxy.url, max_retries=2).embed_documents(TEXTS[:2])
    assert vectors.shape == (2, 384)
    assert proxy.requests == 3


def test_retries_run_out_into_a_typed_error_naming_the_endpoint(proxy: FaultProxy) -> None:
    proxy.script.extend([status(502)] * 3)
    with pytest.raises(BackendUnavailableError) as failure:
        http_embedder(proxy.url, max_retries=2).embed_documents(["x"])
    assert proxy.requests == 3
    assert f"{proxy.url}/embeddings" in str(failure.value)
    assert "answered 502" in str(failure.value)
    assert "3 attempts" in str(failure.value)


def test_retry_after_is_waited_for(proxy: FaultProxy) -> None:
    proxy.script.append(status(429, {"Retry-After": "1"}))
    assert http_embedder(proxy.url).embed_documents(["x"]).shape == (1, 384)
    assert proxy.requests == 2
    assert proxy.arrivals[1] - proxy.arrivals[0] >= 0.95  # the server's wait, not the backoff's


def test_a_retry_after_beyond_a_minute_fails_at_once(proxy: FaultProxy) -> None:
    proxy.script.append(status(429, {"Retry-After": "3600"}))
    with pytest.raises(BackendUnavailableError, match="3600 s"):
        http_embedder(proxy.url, max_retries=5).embed_documents(["x"])
    assert proxy.requests == 1


def test_a_timeout_is_retried_then_reported(proxy: FaultProxy) -> None:
    proxy.script.append(slow(3))
    assert http_embedder(proxy.url, timeout_s=0.5, max_retries=1).embed_query("x").shape == (384,)
    assert proxy.requests == 2
    proxy.script.extend([slow(3), slow(3)])
    with pytest.raises(BackendUnavailableError) as failure:
        http_embedder(proxy.url, timeout_s=0.5, max_retries=1).embed_documents(["y"])
    assert "no answer within 0.5 s" in str(failure.value)
    assert f"{proxy.url}/embeddings" in str(failure.value)
    assert proxy.requests == 4


def test_an_unreachable_endpoint_is_named_without_its_secrets() -> None:
    port = free_port()  # nothing listens there
    url = f"http://user:hunter2@127.0.0.1:{port}/v1?key=sk-query-secret"
    embedder = http_embedder(url, max_retries=1)
    with pytest.raises(BackendUnavailableError) as failure:
        embedder.embed_documents(["x"])
    message = str(failure.value)
    assert f"127.0.0.1:{port}/v1" in message
    assert "cannot reach it" in message
    assert "hunter2" not in message
    assert "sk-query-secret" not in message


def test_a_refused_request_is_not_retried(proxy: FaultProxy) -> None:
    body = json.dumps({"error": {"message": "input is too long for this model"}})
    proxy.script.append(status(400, body=body))
    with pytest.raises(ConnectorError) as failure:
        http_embedder(proxy.url, max_retries=3).embed_documents(["x"])
    assert not isinstance(failure.value, BackendUnavailableError)
    assert "answered 400: input is too long for this model" in str(failure.value)
    assert f"{proxy.url}/embeddings" in str(failure.value)
    assert proxy.requests == 1


def _drop_data(payload: dict[str, Any]) -> None:
    del payload["data"]


def _halve_vectors(payload: dict[str, Any]) -> None:
    for item in payload["data"]:
        item["embedding"] = item["embedding"][:192]


def _lose_last(payload: dict[str, Any]) -> None:
    payload["data"].pop()


def _same_index(payload: dict[str, Any]) -> None:
    for item in payload["data"]:
        item["index"] = 0


def _text_vector(payload: dict[str, Any]) -> None:
    payload["data"][1]["embedding"] = "not a vector"


def _zero_vector(payload: dict[str, Any]) -> None:
    payload["data"][0]["embedding"] = [0.0] * 384


def _nan_vector(payload: dict[str, Any]) -> None:
    payload["data"][1]["embedding"][7] = float("nan")  # json.dumps writes NaN; json.loads reads it


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (raw(b"<html>gateway says hello</html>"), "not JSON"),
        (raw(b"[1, 2, 3]"), 'no "data" list'),
        (rewrite(_drop_data), 'no "data" list'),
        (rewrite(_halve_vectors), "192 dimensions, not 384"),
        (rewrite(_lose_last), "1 embeddings for 2 inputs"),
        (rewrite(_same_index), "index 0 answered twice"),
        (rewrite(_text_vector), "embedding 1 is not a list of numbers"),
        (rewrite(_zero_vector), "embedding 0 is zero or not finite"),
        (rewrite(_nan_vector), "embedding 1 is zero or not finite"),
    ],
    ids=["html", "list", "no-data", "dimension", "missing", "duplicate", "text", "zero", "nan"],
)
def test_a_malformed_answer_is_a_typed_error_naming_the_endpoint(
    proxy: FaultProxy, fault: Fault, reason: str
) -> None:
    proxy.script.append(fault)
    texts = ["one", "two"]
    # Declared: the dimension check does not depend on the answer that is malformed.
    embedder = http_embedder(proxy.url, dimension=384, max_retries=3)
    with pytest.raises(ConnectorError) as failure:
        embedder.embed_documents(texts)
    assert not isinstance(failure.value, BackendUnavailableError)
    assert reason in str(failure.value)
    assert f"{proxy.url}/embeddings" in str(failure.value)
    assert proxy.requests == 1  # a wrong answer is not retried


def test_a_declared_dimension_is_checked(server: EmbedServer) -> None:
    with pytest.raises(ConnectorError, match="384 dimensions, not 256"):
        http_embedder(server.url, dimension=256).embed_query("x")
