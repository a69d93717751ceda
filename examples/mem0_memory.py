#!/usr/bin/env python3
"""mem0 (the `mem0ai` package's open-source `Memory`) behind IBA's memory protocol (docs/memory_systems.md).

    pip install 'iba[mem0]'        # mem0ai; no torch
    iba run DATASET --agent "memory?cmd=python examples/mem0_memory.py --base-url http://127.0.0.1:8080/v1 --model qwen --embed-base-url http://127.0.0.1:8081/v1 --embed-model qwen-embed&network=true"

Per user (`reset`) a new mem0 `Memory`: an in-memory Qdrant collection (qdrant-client's local
mode: no server, nothing written), its history database in memory, the LLM and the embedder on
OpenAI-compatible endpoints (mem0's `openai` providers with `openai_base_url`). Each `ingest` is
one `Memory.add(<the session's turns>, user_id=...)`: mem0's own extraction prompt and pipeline
decide what to remember. At `act`, `Memory.search(<the task>, filters={"user_id": ...})` finds the
memories nearest the task, and one call to the same LLM (through mem0's LLM object) writes the
response or fills the API's parameters. The replies carry the LLM calls and tokens mem0 spent
(counted at its OpenAI client), so iba records remembering and answering apart.

Offline by construction: telemetry is off (MEM0_TELEMETRY=False, set before mem0 is imported);
mem0's optional downloads are closed off (its spaCy model, used for entity linking and BM25
lemmas, and fastembed's BM25 model: both fall back to what needs no download); and every outgoing
connection other than to the configured model endpoints is refused (and said on stderr), so a
phone-home attempt cannot succeed unnoticed. mem0 does not use tiktoken.

A model server that returns one embedding per token (llama-cpp-python's server for a model
without a pooling layer) gets its vectors averaged here, as a pooling layer would.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import urllib.parse
from collections import Counter

os.environ["MEM0_TELEMETRY"] = "False"  # before mem0 is imported: it reads this at import
os.environ.setdefault("MEM0_DIR", os.path.join(tempfile.gettempdir(), "mem0"))  # its config file, not ~/.mem0

ACT_TEXT = """You are a personal assistant. What you remember about this user, oldest first (a later memory
replaces an earlier one on the same point):
{memories}

Do the user's request, following every preference above that applies to it. Reply with the response only."""

ACT_API = """You are a personal assistant who fills in an API call for the user. What you remember about this
user, oldest first (a later memory replaces an earlier one on the same point):
{memories}

The API {api} takes these parameters (JSON schema):
{schema}

Choose each parameter's value to fit the request and the user's preferences. Answer with the JSON
object of parameters only."""


REFUSED: list[str] = []  # connections the guard refused; every act reply's trace lists them


def guard_network(allowed_urls: list[str]) -> None:
    """Refuse (and report on stderr and in every act's trace) every TCP connection except to the
    hosts of `allowed_urls`."""
    allowed = set()
    for url in allowed_urls:
        u = urllib.parse.urlsplit(url)
        allowed.add((u.hostname, u.port or (443 if u.scheme == "https" else 80)))
    original = socket.socket.connect

    def connect(self, address):  # type: ignore[no-untyped-def]
        if self.family in (socket.AF_INET, socket.AF_INET6) and (address[0], address[1]) not in allowed:
            REFUSED.append(f"{address[0]}:{address[1]}")
            sys.stderr.write(f"mem0_memory: refused a connection to {address[0]}:{address[1]} (not a model endpoint)\n")
            sys.stderr.flush()
            raise ConnectionRefusedError(f"mem0_memory allows only the model endpoints, not {address[0]}:{address[1]}")
        return original(self, address)

    socket.socket.connect = connect  # type: ignore[method-assign]


def close_downloads() -> None:
    """mem0 would fetch spaCy's en_core_web_sm (if spaCy is installed) and fastembed's BM25 model
    (if fastembed is): mark both as unavailable, so its code takes the paths that need neither."""
    from mem0.utils import spacy_models

    spacy_models._load_failed_full = True
    spacy_models._load_failed_lemma = True


def pooled(vector):  # type: ignore[no-untyped-def]
    if vector and isinstance(vector[0], list):  # one vector per token: average them
        return [sum(col) / len(vector) for col in zip(*vector)]
    return vector


class Counted:
    """mem0's OpenAI clients, counted: every chat and embeddings call adds its usage to `usage`."""

    def __init__(self) -> None:
        self.usage: Counter = Counter()

    def chat(self, create):  # type: ignore[no-untyped-def]
        def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
            reply = create(*args, **kwargs)
            self.usage["llm_calls"] += 1
            if reply.usage is not None:
                self.usage["prompt_tokens"] += reply.usage.prompt_tokens or 0
                self.usage["completion_tokens"] += reply.usage.completion_tokens or 0
            return reply
        return wrapped

    def embeddings(self, create):  # type: ignore[no-untyped-def]
        def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
            kwargs.pop("dimensions", None)  # llama.cpp and most local servers have no matryoshka sizes
            reply = create(*args, **kwargs)
            for item in reply.data:
                item.embedding = pooled(item.embedding)
            return reply
        return wrapped


class Mem0Memory:
    """One user's mem0 Memory."""

    def __init__(self, args: argparse.Namespace, dims: int) -> None:
        from mem0 import Memory
        from qdrant_client import QdrantClient

        key = os.environ.get("OPENAI_API_KEY") or "not-needed"  # the openai client wants one; local servers ignore it
        self.k = args.k
        self.memory = Memory.from_config({
            "llm": {"provider": "openai", "config": {"model": args.model, "openai_base_url": args.base_url,
                                                     "api_key": key, "temperature": 0, "max_tokens": args.max_tokens}},
            "embedder": {"provider": "openai", "config": {"model": args.embed_model, "api_key": key,
                                                          "openai_base_url": args.embed_base_url, "embedding_dims": dims}},
            "vector_store": {"provider": "qdrant", "config": {"collection_name": "iba", "embedding_model_dims": dims,
                                                              "client": QdrantClient(location=":memory:")}},
            "history_db_path": ":memory:",
        })
        self.memory.vector_store._bm25_encoder = False  # fastembed's BM25 model would be downloaded
        self.counted = Counted()
        # the OpenAI client's 10-minute default would cut off mem0's ~8k-token extraction prompt on a CPU
        self.memory.llm.client = self.memory.llm.client.with_options(timeout=args.timeout)
        self.memory.embedding_model.client = self.memory.embedding_model.client.with_options(timeout=args.timeout)
        llm_client = self.memory.llm.client
        llm_client.chat.completions.create = self.counted.chat(llm_client.chat.completions.create)
        emb_client = self.memory.embedding_model.client
        emb_client.embeddings.create = self.counted.embeddings(emb_client.embeddings.create)

    def take_usage(self) -> dict:
        usage, self.counted.usage = dict(self.counted.usage), Counter()
        return usage

    def ingest(self, msg: dict) -> dict:
        turns = msg["turns"]
        messages = [{"role": t["role"], "content": t["text"]} for t in turns if t["role"] in ("user", "assistant")]
        if messages:
            date = turns[0]["timestamp"][:10]
            self.memory.add(messages, user_id=msg["user_id"], metadata={"session_id": msg["session_id"], "date": date})
        return {"ok": True, "usage": self.take_usage()}

    def act(self, msg: dict) -> dict:
        task = msg["task"]
        found = self.memory.search(f"{task.get('scenario_name', '')}: {task['query']}",
                                   filters={"user_id": msg["user_id"]}, top_k=self.k).get("results", [])
        found.sort(key=lambda m: (m.get("metadata") or {}).get("date") or m.get("created_at") or "")
        memories = "\n".join(f"- ({(m.get('metadata') or {}).get('date', '')}) {m['memory']}" for m in found) or "- (none)"
        llm = self.memory.llm
        trace = [{"step": "mem0-search", "inputs": {"top_k": self.k},
                  "outputs": {"memories": [m["memory"] for m in found], "refused_connections": list(REFUSED)}}]
        if task["action"] == "generate":
            text = llm.generate_response([{"role": "system", "content": ACT_TEXT.format(memories=memories)},
                                          {"role": "user", "content": task["query"]}])
            return {"kind": "generate", "text": (text or "").strip(), "usage": self.take_usage(), "trace": trace}
        schema = task.get("api_schema") or {}
        system = ACT_API.format(memories=memories, api=task.get("api_name"), schema=json.dumps(schema))
        reply = llm.generate_response([{"role": "system", "content": system}, {"role": "user", "content": task["query"]}],
                                      response_format={"type": "json_object", "schema": schema})
        return {"kind": "call_api", "api_name": task.get("api_name"), "params": fit(parse_json(reply or ""), schema),
                "usage": self.take_usage(), "trace": trace}


def parse_json(text: str) -> dict:
    start, end = text.find("{"), text.rfind("}")
    try:
        value = json.loads(text[start:end + 1]) if 0 <= start < end else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def fit(params: dict, schema: dict) -> dict:
    """Keep the schema's parameters; an enum value matched without regard to case. iba checks the rest."""
    props = schema.get("properties", {})
    out = {}
    for name, value in params.items():
        if name in props:
            enum = props[name].get("enum")
            if enum and value not in enum:
                value = next((e for e in enum if str(e).lower() == str(value).lower()), value)
            out[name] = value
    return out


def embedding_dims(args: argparse.Namespace) -> int:
    """The embedder's vector size, asked once (mem0's vector store is created with it)."""
    from openai import OpenAI

    client = OpenAI(api_key=os.environ.get("OPENAI_API_KEY") or "not-needed", base_url=args.embed_base_url)
    return len(pooled(client.embeddings.create(input=["dimension probe"], model=args.embed_model).data[0].embedding))


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.dims = args.embed_dims
        self.users: dict[str, Mem0Memory] = {}

    def handle(self, msg: dict) -> dict:
        kind, user = msg.get("type"), msg.get("user_id")
        if kind == "reset":
            self.dims = self.dims or embedding_dims(self.args)
            self.users[user] = Mem0Memory(self.args, self.dims)
            return {"ok": True}
        if user not in self.users:
            return {"error": f"no reset for user {user!r} before {kind}"}
        if kind == "ingest":
            return self.users[user].ingest(msg)
        if kind == "act":
            return self.users[user].act(msg)
        if kind == "close":
            self.users.pop(user).memory.close()
            return {"ok": True}
        return {"error": f"unknown message type {kind!r}"}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description="mem0 behind IBA's memory protocol (JSON lines on stdin/stdout)")
    p.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"), help="chat endpoint root (…/v1)")
    p.add_argument("--model", required=True, help="chat model name")
    p.add_argument("--embed-base-url", default=None, help="embeddings endpoint root (default: --base-url)")
    p.add_argument("--embed-model", required=True, help="embeddings model name")
    p.add_argument("--embed-dims", type=int, default=None, help="embedding size (default: asked once)")
    p.add_argument("--k", type=int, default=10, help="memories shown at act (default 10)")
    p.add_argument("--max-tokens", type=int, default=1000, help="completion tokens per call (default 1000)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per model call (default 3600)")
    args = p.parse_args(argv)
    if not args.base_url:
        p.error("--base-url (or $OPENAI_BASE_URL) is required")
    args.embed_base_url = args.embed_base_url or args.base_url
    guard_network([args.base_url, args.embed_base_url])
    close_downloads()
    server = Server(args)
    for line in sys.stdin:  # one message per line, one reply per line
        msg = json.loads(line)
        try:
            reply = server.handle(msg)
        except Exception as e:  # noqa: BLE001 - every failure is answered, never a silent exit
            from openai import APIConnectionError, APIStatusError, APITimeoutError

            cause = e.__cause__ or e  # mem0 wraps the client's errors (LLMError)
            fault = isinstance(cause, (APIConnectionError, APITimeoutError)) or (
                isinstance(cause, APIStatusError) and cause.status_code >= 500)
            reply = {"error": f"{type(e).__name__}: {e}", "retryable": fault}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
