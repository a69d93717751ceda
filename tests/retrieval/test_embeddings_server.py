"""The embeddings server's protocol, as OpenAI's SDK and a raw HTTP client see it (the packaged MiniLM
served in this process; tests/retrieval/test_openai_embedder.py runs it as `iba serve-embeddings`)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import numpy as np
import pytest

from iba.retrieval.embeddings_server import EmbeddingsServer


@pytest.fixture(scope="module")
def server(minilm):
    with EmbeddingsServer(minilm, model="minilm", max_inputs=8) as srv:
        yield srv


def _call(url: str, body: bytes | dict | None = None, *, method: str | None = None, headers: dict | None = None):
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    req = urllib.request.Request(url, data=data, method=method or ("POST" if data is not None else "GET"),
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_openai_sdk_reads_floats_and_base64(server, minilm):
    from openai import OpenAI

    client = OpenAI(api_key="unused", base_url=server.url, max_retries=0)
    texts = ["I never take the early train", "evenings suit me"]
    want = minilm.encode(texts)
    floats = client.embeddings.create(model="minilm", input=texts, encoding_format="float")
    assert [d.index for d in floats.data] == [0, 1] and floats.model == "minilm"
    assert np.allclose(np.array([d.embedding for d in floats.data]), want, atol=1e-6)
    default = client.embeddings.create(model="minilm", input=texts)  # the SDK asks for base64 and decodes it
    assert np.allclose(np.array([d.embedding for d in default.data]), want, atol=1e-7)
    assert floats.usage.prompt_tokens == floats.usage.total_tokens > 2 * 2  # [CLS] and [SEP] each, and words
    assert [m.id for m in client.models.list().data] == ["minilm"]


def test_base64_is_little_endian_float32(server, minilm):
    status, reply = _call(f"{server.url}/embeddings", {"model": "minilm", "input": "one text", "encoding_format": "base64"})
    assert status == 200 and reply["object"] == "list" and reply["data"][0]["object"] == "embedding"
    vec = np.frombuffer(base64.b64decode(reply["data"][0]["embedding"]), dtype="<f4")
    assert vec.shape == (384,) and np.allclose(vec, minilm.encode(["one text"])[0], atol=1e-7)


@pytest.mark.parametrize("body, status, param, words", [
    (b"{not json", 400, None, "not valid JSON"),
    ({"input": "x"}, 400, "model", "provide a model"),
    ({"model": "gpt-4", "input": "x"}, 404, "model", "The model `gpt-4` does not exist"),
    ({"model": "minilm", "input": []}, 400, "input", "non-empty list"),
    ({"model": "minilm", "input": [[101, 2023]]}, 400, "input", "token arrays are not supported"),
    ({"model": "minilm", "input": ["x"] * 9}, 413, "input", "too many inputs: 9 > the maximum of 8"),
    ({"model": "minilm", "input": "x", "encoding_format": "int8"}, 400, "encoding_format", "'float' or 'base64'"),
    ({"model": "minilm", "input": "x", "dimensions": 256}, 400, "dimensions", "does not support specifying dimensions"),
])
def test_bad_requests_get_openai_shaped_errors(server, body, status, param, words):
    got, reply = _call(f"{server.url}/embeddings", body)
    assert got == status and set(reply["error"]) == {"message", "type", "param", "code"}
    assert reply["error"]["param"] == param and words in reply["error"]["message"]


def test_routes(server):
    assert _call(f"{server.url}/models/minilm") == (200, {"id": "minilm", "object": "model", "created": 0, "owned_by": "iba"})
    assert _call(f"{server.url}/models/other")[0] == 404
    assert _call(f"{server.url.removesuffix('/v1')}/health") == (200, {"status": "ok"})
    status, reply = _call(f"{server.url}/chat/completions", {"model": "minilm"})
    assert status == 404 and "POST /v1/embeddings" in reply["error"]["message"]
    ok, reply = _call(f"{server.url}/embeddings", {"model": "minilm", "input": "x", "dimensions": 384})
    assert ok == 200 and len(reply["data"][0]["embedding"]) == 384  # its own dimension is accepted


def test_a_key_is_required_when_set(minilm):
    with EmbeddingsServer(minilm, model="minilm", api_key="s3cret-key") as srv:
        body = {"model": "minilm", "input": "x"}
        status, reply = _call(f"{srv.url}/embeddings", body)
        assert status == 401 and reply["error"]["code"] == "invalid_api_key" and "s3cret" not in json.dumps(reply)
        assert _call(f"{srv.url}/embeddings", body, headers={"Authorization": "Bearer wrong"})[0] == 401
        assert _call(f"{srv.url}/embeddings", body, headers={"Authorization": "Bearer s3cret-key"})[0] == 200
