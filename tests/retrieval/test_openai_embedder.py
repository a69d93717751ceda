"""`openai:<model>` embeddings against a real `iba serve-embeddings` (the packaged MiniLM in a subprocess):
the same vectors and index as the in-process MiniLM; faults through a fault-injecting proxy in front of
that server (500 then success, 429 with Retry-After, a dimension change, a server that is down)."""

from __future__ import annotations

import asyncio
import logging
import pickle
import threading
import time

import numpy as np
import pytest

from iba import cancel
from iba.llm.retry import ModelConnectionError, ModelRequestRejected, ModelServerError, RetryPolicy
from iba.retrieval.embed import EmbedderSpec, embedder_problem, get_embedder
from iba.retrieval.embeddings_server import EmbeddingsServer
from iba.retrieval.index import HistoryIndex, clear_memory_cache, index_path
from iba.retrieval.openai_embedder import EmbeddingConfigError, EmbeddingDimensionError, OpenAIEmbedder
from tests.llm.fault_proxy import Fault, FaultProxy
from tests.retrieval.helpers import make_history

TEXTS = [
    "short",
    "I never take the early train anymore, evenings suit me better",
    "Could you keep the summary to three bullet points? Long paragraphs lose me.",
    " ".join(["a very long window about trains, budgets and spicy food"] * 40),  # past MiniLM's 256 tokens
    "",
]


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch):
    for var in ("IBA_EMBED_API_KEY", "OPENAI_API_KEY", "IBA_EMBED_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


def _fast(**kw) -> RetryPolicy:
    return RetryPolicy(max_retries=kw.pop("max_retries", 3), base_delay=0.02, jitter=0.0, **kw)


def _embedder(url: str | list[str], **kw) -> OpenAIEmbedder:
    kw.setdefault("retry_policy", _fast())
    return OpenAIEmbedder("minilm", base_url=url, **kw)


@pytest.fixture()
def proxy(embeddings_server):
    with FaultProxy(embeddings_server, path="/embeddings") as p:
        yield p


# ---------------------------------------------------------------------- the happy path, real server


def test_the_server_gives_the_in_process_vectors(embeddings_server, minilm):
    emb = _embedder(embeddings_server)
    try:
        got = emb.encode(TEXTS)
        want = minilm.encode(TEXTS)
        assert emb.name == "openai:minilm@384" and got.shape == want.shape == (len(TEXTS), 384)
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
        assert float((got * want).sum(1).min()) > 0.99999  # the same model, sent as base64 float32
        # the first reply told the dimension: no probe request was needed
        assert emb.usage_tokens > 0 and emb.inputs_sent == len(TEXTS)
        assert emb.token_spans("spicy food") == minilm.token_spans("spicy food")  # the same chunks
    finally:
        emb.close()


def test_float_encoding_and_a_server_that_refuses_base64(proxy, minilm, caplog):
    proxy.then(Fault.http(400, message="'encoding_format' must be 'float'"))
    emb = _embedder(proxy.base_url)
    with caplog.at_level(logging.WARNING):
        got = emb.encode(TEXTS[:3])
    assert emb._encoding == "float" and "asking for floats" in caplog.text
    assert [h.fault for h in proxy.completions()] == ["status", None]  # refused, then the same request as floats
    assert float((got * minilm.encode(TEXTS[:3])).sum(1).min()) > 0.99999
    emb.close()


def _history(n: int):
    topics = ["trains", "spicy food", "meeting notes", "hotel budgets", "weekend plans", "code reviews"]
    return make_history([("user" if i % 2 == 0 else "assistant",
                          f"turn {i}: something about {topics[i % 6]} and " + "more words " * (i % 9)) for i in range(n)])


def test_the_index_is_the_minilm_index_and_its_cache_is_reused(embeddings_server, minilm, tmp_path):
    history = _history(120)
    emb = _embedder(embeddings_server)
    clear_memory_cache()
    remote = HistoryIndex.build(history, emb, tmp_path, unit="mixed")
    local = HistoryIndex.build(history, minilm, tmp_path / "local", unit="mixed")
    assert [c.text for c in remote.chunks] == [c.text for c in local.chunks]  # MiniLM's tokenizer chunks both
    assert float((remote.vectors.vectors * local.vectors.vectors).sum(1).min()) > 0.99999
    assert index_path(tmp_path, remote.key).is_file()
    sent = emb.inputs_sent
    clear_memory_cache()  # a new run: the disk cache, keyed by model and reported dimension
    again = HistoryIndex.build(history, emb, tmp_path, unit="mixed")
    assert emb.inputs_sent == sent and again.key == remote.key
    assert np.array_equal(again.vectors.vectors, remote.vectors.vectors)
    # another process (a fresh embedder of the same model) finds the same key after its probe
    other = _embedder(embeddings_server)
    assert HistoryIndex.build(history, other, tmp_path, unit="mixed").key == remote.key
    assert other.inputs_sent == 1  # the probe only
    emb.close()
    other.close()


def test_requests_follow_the_servers_limit_on_inputs(minilm, caplog):
    """A server that takes 4 inputs per request (413 above): split, and later requests sent at 4."""
    with EmbeddingsServer(minilm, model="minilm", max_inputs=4) as srv:
        emb = _embedder(srv.url, batch=16)
        texts = [f"message {i} about trains" for i in range(20)]
        with caplog.at_level(logging.WARNING):
            got = emb.encode(texts)
        assert emb.batch == 4 and "refused 16 inputs" in caplog.text
        assert np.allclose(got, minilm.encode(texts), atol=1e-5)
        before = emb.requests
        emb.encode(texts)
        assert emb.requests - before == 5  # 20 inputs at 4 a request, none refused
        emb.close()


def test_one_input_too_long_for_the_server_says_so(proxy):
    proxy.always(Fault.http(413, message="input is too large to process"))
    emb = _embedder(proxy.base_url)
    emb._dim = 384  # skip the probe: every request is refused here
    with pytest.raises(Exception, match="one input of 5 characters is too long"):
        emb.encode(["short", "words"])
    emb.close()


# ---------------------------------------------------------------------- faults


def test_a_500_then_success_is_retried(proxy, minilm):
    emb = _embedder(proxy.base_url)
    emb.dim  # noqa: B018 - the probe, unfaulted
    proxy.then(Fault.http(500))
    got = emb.encode(TEXTS[:2])
    assert [h.fault for h in proxy.completions()] == [None, "status", None]
    assert float((got * minilm.encode(TEXTS[:2])).sum(1).min()) > 0.99999
    emb.close()


def test_429_waits_for_retry_after(proxy):
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)
        await asyncio.sleep(s)

    emb = _embedder(proxy.base_url, retry_policy=_fast(sleep=sleep))
    emb.dim  # noqa: B018
    proxy.then(Fault.http(429, retry_after=1))
    emb.encode(["hello"])
    assert waits == [1.0]  # the server's wait, not the 20 ms backoff
    assert [h.fault for h in proxy.completions()][1:] == ["status", None] and proxy.gaps()[-1] >= 0.95
    emb.close()


def test_a_persistent_500_ends_as_a_server_error(proxy):
    proxy.always(Fault.http(500))
    emb = _embedder(proxy.base_url, retry_policy=_fast(max_retries=2))
    with pytest.raises(ModelServerError, match=r"after 3 attempts \(server_error, HTTP 500\)"):
        emb.encode(["x"])
    assert len(proxy.completions()) == 3
    emb.close()


def test_a_dimension_change_is_a_clear_error(proxy):
    emb = _embedder(proxy.base_url)
    assert emb.dim == 384
    proxy.always(Fault.shrink(128))  # the server now answers with another model's vectors
    with pytest.raises(EmbeddingDimensionError) as ei:
        emb.encode(["hello"])
    msg = str(ei.value)
    assert "128-dimensional vectors where this process's earlier replies had 384" in msg
    assert proxy.base_url.removesuffix("/v1") in msg and "--embed-base-url" in msg
    assert len(proxy.completions()) == 2  # not retried: another try would get the same vectors
    # a restarted run on the new model gets its own cache key
    fresh = _embedder(proxy.base_url)
    assert fresh.name == "openai:minilm@128"
    emb.close()
    fresh.close()


def test_replicas_of_other_dimensions_are_refused(embeddings_server, proxy):
    proxy.always(Fault.shrink(64))
    emb = _embedder([embeddings_server, proxy.base_url], max_in_flight_per_endpoint=1)
    with pytest.raises(EmbeddingDimensionError, match="endpoints serve different models"):
        for _ in range(4):  # both replicas get requests (least in flight, then round-robin)
            emb.encode([f"text {time.monotonic()}" for _ in range(40)])
    emb.close()


def test_a_server_that_is_down_is_a_connection_error(proxy):
    emb = _embedder("http://127.0.0.1:9/v1", retry_policy=_fast(max_retries=1))
    with pytest.raises(ModelConnectionError, match="connection"):
        emb.dim  # noqa: B018
    emb.close()


def test_a_down_replica_is_failed_over(embeddings_server, minilm):
    emb = _embedder(["http://127.0.0.1:9/v1", embeddings_server])
    got = emb.encode(TEXTS[:3])
    assert float((got * minilm.encode(TEXTS[:3])).sum(1).min()) > 0.99999
    dead, alive = emb.endpoints.endpoints
    # moved off the dead one (its down period may be over by now on a busy machine: count, not clock)
    assert dead.failed >= 1 and dead.ok == 0 and alive.ok >= 1
    emb.close()


def test_a_wrong_model_name_says_what_to_check(embeddings_server):
    emb = OpenAIEmbedder("no-such-model", base_url=embeddings_server, retry_policy=_fast())
    with pytest.raises(ModelRequestRejected, match="does the server serve a model named 'no-such-model'"):
        emb.dim  # noqa: B018
    emb.close()


def test_a_timed_out_action_stops_waiting(proxy):
    emb = _embedder(proxy.base_url)
    emb.dim  # noqa: B018
    proxy.then(Fault.delay(5.0))
    with cancel.scope() as event:
        threading.Timer(0.3, event.set).start()
        t0 = time.monotonic()
        with pytest.raises(cancel.Cancelled):
            emb.encode(["held by the server"])
    assert time.monotonic() - t0 < 2.0
    emb.close()


# ---------------------------------------------------------------------- configuration


def test_a_remote_url_needs_a_key_and_says_which(monkeypatch):
    with pytest.raises(EmbeddingConfigError, match="set IBA_EMBED_API_KEY .or OPENAI_API_KEY. for https://api.openai.com/v1"):
        OpenAIEmbedder("text-embedding-3-small")
    monkeypatch.setenv("IBA_EMBED_API_KEY", "sk-embedkey123")
    emb = OpenAIEmbedder("text-embedding-3-small")
    assert emb._key == "sk-embedkey123" and [e.url for e in emb.endpoints.endpoints] == ["https://api.openai.com/v1"]
    monkeypatch.setenv("IBA_EMBED_BASE_URL", "http://10.0.0.5:8080/v1, http://10.0.0.6:8080/v1")
    assert len(OpenAIEmbedder("m").endpoints) == 2


@pytest.mark.parametrize("options, message", [
    ({"batch": "0"}, "batch must be a positive integer"),
    ({"dimensions": "wide"}, "dimensions must be a positive integer"),
    ({"timeout": "-1"}, "timeout must be a positive number"),
    ({"base_url": "http//typo:8000/v1"}, "is not an http:// or https:// URL"),
])
def test_bad_options_name_the_option(options, message):
    with pytest.raises(EmbeddingConfigError, match=message):
        OpenAIEmbedder("m", **{"base_url": "http://127.0.0.1:9/v1", **options})


def test_names_and_specs():
    assert embedder_problem("openai:text-embedding-3-small?dimensions=256") is None
    assert "needs a model name" in embedder_problem("openai")
    assert "unknown embedder 'nope'" in embedder_problem("nope") and "openai:MODEL" in embedder_problem("nope")
    assert "takes no ':' part" in embedder_problem("minilm:x")
    spec = EmbedderSpec("openai:m", base_url=["http://user:pw@10.0.0.5:8080/v1"], timeout=None)
    back = pickle.loads(pickle.dumps(spec))  # what a pool process or a Ray worker receives
    assert back == "openai:m" and back.settings == {"base_url": ["http://user:pw@10.0.0.5:8080/v1"]}
    assert "pw" not in repr(spec) and "10.0.0.5" not in f"{spec}"


def test_get_embedder_passes_spec_options_and_settings(embeddings_server):
    emb = get_embedder(EmbedderSpec("openai:minilm?batch=7", base_url=[embeddings_server], max_retries=0))
    assert isinstance(emb, OpenAIEmbedder) and emb.batch == 7 and emb.retry_policy.max_retries == 0
    assert emb.endpoints.endpoints[0].url == embeddings_server
