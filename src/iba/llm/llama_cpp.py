"""The embedded backend: llama-cpp-python in this process (`local:<name>` or `local:/path.gguf`).

- Weights are loaded once per (path, n_ctx) per process and shared by every backend object, so
  agents, judges and writers of one run do not load the model N times.
- A llama.cpp context is not thread-safe: each loaded model has one worker thread (and a lock)
  that runs all its calls; the async API awaits that thread and never blocks the event loop.
- We render the prompt with the model's own GGUF chat template and call `create_completion`, so
  we control the grammar (JSON schema or a forced tool call), stop sequences and the deadline.
- Prompt state is reused across calls: llama.cpp skips the prefix a prompt shares with the live
  context, and iba.llm.prompt_states keeps snapshots so interleaved calls keep that gain.
  Completions report the prompt tokens that were not evaluated again (`reused_prompt_tokens`).
- Tool calls use the Hermes format Qwen2.5 was trained on (see iba.llm.toolcalls); a forced call
  is grammar-constrained to `<tool_call>{"name": <tool>, "arguments": <schema>}</tool_call>`.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iba import cancel
from iba.cpus import usable_cpus
from iba.llm import models
from iba.llm.base import Backend, Completion, LLMError, ModelRequest, ToolSpec
from iba.llm.cache import ResponseCache, open_cache, through_cache
from iba.llm.grammar import schema_gbnf
from iba.llm.prompt_states import DEFAULT_BUDGET_MB, PromptStates
from iba.llm.retry import RetryPolicy, Verdict, call_with_retries
from iba.llm.toolcalls import (
    forced_call_gbnf,
    messages_for_template,
    openai_tools,
    parse_text_tool_calls,
)

DEFAULT_N_CTX = 8192


class LocalTimeout(Exception):
    """Generation passed its deadline (raised in the worker thread)."""


@dataclass
class _Loaded:
    """One model in memory and the single thread allowed to touch it."""

    llama: Any  # llama_cpp.Llama
    formatter: Any  # llama_cpp.llama_chat_format.Jinja2ChatFormatter, or None without a template
    template_has_tools: bool
    n_ctx: int
    lock: threading.Lock
    executor: ThreadPoolExecutor
    states: PromptStates


_LOADED: dict[tuple[str, int], _Loaded] = {}
_LOAD_LOCK = threading.Lock()


def default_threads() -> int:
    """$IBA_LLAMA_THREADS if set, else half the CPUs we may use (llama.cpp's own advice: physical
    cores, not hyperthreads).

    Measured on a busy 2-vCPU box: 2 OpenMP threads fell to ~1 tok/s generation because the
    threads spin-wait for each other, 1 thread kept ~12 tok/s. On an idle one 2 threads evaluate
    prompts 1.9x faster (bench/BENCHMARKS.md, session 6), hence the variable. To use more threads
    on a shared machine, also set OMP_WAIT_POLICY=PASSIVE before starting Python.
    """
    raw = os.environ.get("IBA_LLAMA_THREADS", "")
    if raw.strip():
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"IBA_LLAMA_THREADS must be a positive integer, got {raw!r}")
        return n
    return max(1, usable_cpus() // 2)


def load_shared(path: Path, n_ctx: int, n_threads: int | None = None, state_mb: int = DEFAULT_BUDGET_MB) -> _Loaded:
    """The process-wide loaded model for (path, n_ctx); the first caller's n_threads and
    prompt-state budget win."""
    key = (str(Path(path).resolve()), n_ctx)
    with _LOAD_LOCK:
        if key in _LOADED:
            return _LOADED[key]
        try:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as e:  # pragma: no cover - a dependency of the package
            raise LLMError(f"llama-cpp-python is not installed ({e}); run `make install`") from None
        threads = n_threads or default_threads()
        llama = Llama(
            model_path=key[0], n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False
        )
        template = llama.metadata.get("tokenizer.chat_template")
        formatter = None
        if template:
            eos_id, bos_id = llama.token_eos(), llama.token_bos()
            eos = llama.detokenize([eos_id], special=True).decode("utf-8", "replace") if eos_id >= 0 else ""
            bos = llama.detokenize([bos_id], special=True).decode("utf-8", "replace") if bos_id >= 0 else ""
            formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos, stop_token_ids=[eos_id])
        loaded = _Loaded(
            llama=llama,
            formatter=formatter,
            template_has_tools=bool(template) and "tools" in template,
            n_ctx=llama.n_ctx(),
            lock=threading.Lock(),
            executor=ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"llama:{Path(key[0]).name}"),
            states=PromptStates(state_mb),
        )
        if not _LOADED:
            atexit.register(_close_all)
        _LOADED[key] = loaded
        return loaded


def _close_all() -> None:
    """Free models before interpreter teardown; Llama.__del__ at teardown prints TypeErrors."""
    with _LOAD_LOCK:
        for loaded in _LOADED.values():
            loaded.executor.shutdown(wait=True)
            loaded.llama.close()
        _LOADED.clear()


class LlamaCppBackend(Backend):
    def __init__(
        self,
        model_id: str,
        *,
        path: Path | None = None,
        packaged: str | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        cache: ResponseCache | None = None,
        timeout: float = 120.0,
        max_retries: int = 3,
        prompt_state_mb: int = DEFAULT_BUDGET_MB,
    ) -> None:
        if (path is None) == (packaged is None):
            raise ValueError("give exactly one of path= or packaged=")
        self.model_id = model_id
        self.context_window = n_ctx
        self._path = path
        self._packaged = packaged
        self._n_threads = n_threads
        self._state_mb = prompt_state_mb
        self._cache = cache
        self._timeout = timeout
        self.retry_policy = RetryPolicy(max_retries=max_retries)
        self._loaded: _Loaded | None = None
        self._init_lock = threading.Lock()
        if packaged is not None:
            models.package_files(packaged)  # fail now, with the pip command, if a package is missing
            pm = models.PACKAGED[packaged]
            self._identity = f"{model_id}#{pm.sha256 or '=='.join((pm.packages[0][0], pm.version))}"
        else:
            st = path.stat()
            self._identity = f"{model_id}#size={st.st_size},mtime_ns={st.st_mtime_ns}"

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_spec(
        cls,
        rest: str,
        *,
        cache_dir: str | Path | None = None,
        use_cache: bool = True,
        timeout: float = 120.0,
        max_retries: int = 3,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        base_url: str | None = None,  # noqa: ARG003 - accepted for a uniform factory signature
        prompt_state_mb: int = DEFAULT_BUDGET_MB,
        **_: Any,
    ) -> LlamaCppBackend:
        """`rest` is a packaged model name (qwen2.5-coder-0.5b, ...) or a path to a .gguf file."""
        cache = open_cache(models.cache_root(cache_dir)) if use_cache else None
        common = dict(n_threads=n_threads, cache=cache, timeout=timeout, max_retries=max_retries,
                      prompt_state_mb=prompt_state_mb)
        if rest in models.PACKAGED:
            pm = models.PACKAGED[rest]
            return cls(f"local:{rest}", packaged=rest, n_ctx=n_ctx or pm.n_ctx, **common)
        path = Path(rest).expanduser()
        if rest.endswith(".gguf") or os.sep in rest:
            if not path.is_file():
                raise ValueError(f"local model file not found: {path} (model string 'local:{rest}')")
            return cls(f"local:{rest}", path=path, n_ctx=n_ctx or DEFAULT_N_CTX, **common)
        from iba.llm import VALID_FORMS

        raise ValueError(f"unknown model string 'local:{rest}'; valid forms:\n  " + "\n  ".join(VALID_FORMS))

    def _load(self) -> _Loaded:
        """Assemble/verify the GGUF if needed and load it (blocking; call off the event loop)."""
        if self._loaded is None:
            with self._init_lock:
                if self._loaded is None:
                    path = self._path or models.model_path(self._packaged or "")
                    self._loaded = load_shared(path, self.context_window, self._n_threads, self._state_mb)
                    self.context_window = self._loaded.n_ctx
        return self._loaded

    async def _aload(self) -> _Loaded:
        if self._loaded is not None:
            return self._loaded
        return await asyncio.to_thread(self._load)

    # ------------------------------------------------------------------ API

    def count_tokens(self, text: str) -> int:
        # Tokenizing only reads the vocabulary, so it needs no lock (a generation may be running).
        return len(self._load().llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    async def send(self, request: ModelRequest) -> Completion:
        request = request.offered()

        async def produce() -> Completion:
            loaded = await self._aload()  # outside the retry: a broken model file is not transient
            loop = asyncio.get_running_loop()

            stop_event = cancel.current()  # run_in_executor does not carry the context: pass it on

            async def attempt() -> Completion:
                return await loop.run_in_executor(loaded.executor, lambda: self._generate(loaded, request, stop_event))

            return await call_with_retries(attempt, model_id=self.model_id, policy=self.retry_policy, classify=_classify)

        return await through_cache(self._cache, self._identity, self.model_id, request, produce)

    # ------------------------------------------------------------------ worker thread

    def _generate(self, loaded: _Loaded, req: ModelRequest, stop_event: threading.Event | None = None) -> Completion:
        from llama_cpp import LlamaGrammar, StoppingCriteriaList

        tools, tool_choice = req.tools, req.tool_choice
        with loaded.lock:
            cancel.check(stop_event)  # timed out while queued for the model: do not start
            llama = loaded.llama
            msgs = messages_for_template(req.messages, tools, loaded.template_has_tools)
            if loaded.formatter is None:
                return self._generate_without_template(loaded, msgs, req)
            rendered = loaded.formatter(
                messages=msgs, tools=openai_tools(tools) if tools and loaded.template_has_tools else None
            )
            prompt = llama.tokenize(rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True)
            grammar = None
            if tools and tool_choice not in (None, "auto"):
                grammar = LlamaGrammar.from_string(forced_call_gbnf(tools, tool_choice), verbose=False)
            elif req.json_schema is not None:
                grammar = _json_grammar(req.json_schema)
            stops = list(req.stop or []) + ([rendered.stop] if isinstance(rendered.stop, str) else list(rendered.stop or []))
            deadline = time.monotonic() + self._timeout
            late = {"hit": False}

            def past_deadline(_ids: Any, _logits: Any) -> bool:
                if time.monotonic() > deadline:
                    late["hit"] = True
                    return True
                # the action timed out: stop decoding now rather than at the call's own deadline
                return stop_event is not None and stop_event.is_set()

            criteria = StoppingCriteriaList([past_deadline])
            if rendered.stopping_criteria is not None:
                criteria.extend(rendered.stopping_criteria)
            reused = loaded.states.prepare(llama, prompt)
            resp = llama.create_completion(
                prompt=prompt,
                max_tokens=req.max_tokens,
                temperature=req.temperature,
                seed=req.seed,
                stop=stops,
                stopping_criteria=criteria,
                grammar=grammar,
                repeat_penalty=1.0,
            )
            loaded.states.save(llama)
            cancel.check(stop_event)
            if late["hit"]:
                raise LocalTimeout(f"generation passed the {self._timeout:g}s timeout (raise the call timeout, `--call-timeout`, or lower max_tokens)")
            choice, usage = resp["choices"][0], resp.get("usage") or {}
            return self._completion(choice.get("text") or "", choice.get("finish_reason"), usage, tools, reused)

    def _generate_without_template(self, loaded: _Loaded, msgs: list[dict[str, Any]], req: ModelRequest) -> Completion:
        """A GGUF without a chat template: let llama-cpp-python pick its fallback chat format."""
        from llama_cpp import LlamaGrammar

        kwargs: dict[str, Any] = {}
        if req.tools and req.tool_choice not in (None, "auto"):
            kwargs["grammar"] = LlamaGrammar.from_string(forced_call_gbnf(req.tools, req.tool_choice), verbose=False)
        elif req.json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": req.json_schema}
        resp = loaded.llama.create_chat_completion(
            messages=msgs, max_tokens=req.max_tokens, temperature=req.temperature, seed=req.seed, stop=req.stop or [], **kwargs
        )
        choice, usage = resp["choices"][0], resp.get("usage") or {}
        return self._completion(choice["message"].get("content") or "", choice.get("finish_reason"), usage, req.tools)

    def _completion(
        self, text: str, finish: str | None, usage: dict[str, Any], tools: list[ToolSpec] | None, reused: int = 0
    ) -> Completion:
        calls = []
        if tools:
            text, calls = parse_text_tool_calls(text, [t.name for t in tools])
        return Completion(
            text=text,
            tool_calls=calls,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            reused_prompt_tokens=reused,
            model=self.model_id,
            finish_reason="tool_calls" if calls else finish,
        )


def _json_grammar(schema: dict[str, Any]) -> Any:
    from llama_cpp import LlamaGrammar
    from llama_cpp.llama_grammar import JSON_GBNF

    try:
        return LlamaGrammar.from_string(schema_gbnf(schema), verbose=False)
    except Exception:  # noqa: BLE001 - a schema feature the converter lacks: plain JSON, then validate
        return LlamaGrammar.from_string(JSON_GBNF, verbose=False)


def _classify(exc: BaseException) -> Verdict:
    # Local failures (context overflow, timeout, a grammar the model cannot satisfy) repeat
    # identically on retry, so none is retried; the error becomes an LLMError at once.
    return Verdict(retryable=False)
