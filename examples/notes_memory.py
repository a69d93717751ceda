#!/usr/bin/env python3
"""A notes memory for IBA's memory protocol (docs/memory_systems.md), standard library only.

The extract-then-retrieve design most memory layers share, in one file:

  ingest  one LLM call per session: the user's stated and implied preferences in that session,
          as short dated notes (JSON {"notes": [...]});
  act     the notes nearest the task (bag-of-words cosine, or the embeddings endpoint with
          --embed-model) go into one LLM call that writes the response (generate) or fills the
          API's parameters (call_api, JSON constrained by the schema where the server supports it).

Any OpenAI-compatible chat endpoint (llama.cpp's server, vLLM, Ollama, OpenAI...):

    iba run DATASET --agent "memory?cmd=python examples/notes_memory.py --base-url http://127.0.0.1:8080/v1 --model qwen&network=true"
    python examples/notes_memory.py --serve 8090 --base-url ... --model ...   (HTTP: memory?url=http://127.0.0.1:8090)

--base-url / --model default to $NOTES_MEMORY_BASE_URL (else $OPENAI_BASE_URL) and
$NOTES_MEMORY_MODEL; the key, if the server needs one, is read from $OPENAI_API_KEY (pass it into
the sandbox with env=OPENAI_API_KEY). Every reply carries the LLM calls and tokens it spent (the
protocol's `usage`), so iba records remembering and answering apart.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EXTRACT = """You keep notes about one user for a personal assistant. From the conversation below, write down
what it shows about the user's own preferences and habits: what they ask for, correct, complain
about, reject, keep choosing, or say they changed. Include preferences that are only implied.
Leave out facts about other people and one-off requests. One short note per preference (at most 20
words), in the third person ("Prefers ..."). If the session shows no preference, return no notes.
Answer with JSON only: {"notes": ["...", "..."]}"""

ACT_TEXT = """You are a personal assistant. Notes on this user's preferences, oldest first (a later note
replaces an earlier one on the same point):
{notes}

Do the user's request, following every preference in the notes that applies to it. Reply with the
response only."""

ACT_API = """You are a personal assistant who fills in an API call for the user. Notes on this user's
preferences, oldest first (a later note replaces an earlier one on the same point):
{notes}

The API {api} takes these parameters (JSON schema):
{schema}

Choose each parameter's value to fit the request and the user's preferences. Answer with the JSON
object of parameters only."""

STOP = set("""a an and are as at be but by for from has have i if in into is it its me my of on or our so
that the their them then there they this to was we were what when which who will with you your
please can could would should just like want need""".split())


def words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP and len(w) > 1]


def cosine(a: dict, b: dict) -> float:
    dot = sum(v * b.get(k, 0.0) for k, v in a.items())
    na, nb = math.sqrt(sum(v * v for v in a.values())), math.sqrt(sum(v * v for v in b.values()))
    return dot / (na * nb) if na and nb else 0.0


class Model:
    """The OpenAI-compatible endpoint: chat (and embeddings), over urllib, with a few retries."""

    def __init__(self, base_url: str, model: str, embed_model: str | None, max_tokens: int, timeout: float,
                 embed_base_url: str | None = None) -> None:
        self.base_url, self.model, self.embed_model = base_url.rstrip("/"), model, embed_model
        self.embed_base_url = (embed_base_url or base_url).rstrip("/")
        self.max_tokens, self.timeout = max_tokens, timeout
        self.key = os.environ.get("OPENAI_API_KEY", "")

    def _post(self, path: str, body: dict, base: str | None = None) -> dict:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        for attempt in range(4):
            try:
                req = urllib.request.Request((base or self.base_url) + path, data=data, headers=headers)
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    return json.load(r)
            except urllib.error.HTTPError as e:
                if e.code < 500 and e.code != 429 or attempt == 3:
                    raise RuntimeError(f"{path}: HTTP {e.code}: {e.read()[-500:].decode(errors='replace')}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                if attempt == 3:
                    raise RuntimeError(f"{path}: {e}") from None
            time.sleep(2 ** attempt)
        raise AssertionError("unreachable")

    def chat(self, system: str, user: str, usage: Counter, schema: dict | None = None, json_out: bool = False) -> str:
        body: dict = {"model": self.model, "temperature": 0, "max_tokens": self.max_tokens,
                      "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        if json_out:  # llama.cpp's server enforces a schema given here; other servers take the type alone
            body["response_format"] = {"type": "json_object", **({"schema": schema} if schema else {})}
        reply = self._post("/chat/completions", body)
        u = reply.get("usage") or {}
        usage["llm_calls"] += 1
        usage["prompt_tokens"] += int(u.get("prompt_tokens") or 0)
        usage["completion_tokens"] += int(u.get("completion_tokens") or 0)
        return reply["choices"][0]["message"].get("content") or ""

    def embed(self, texts: list[str]) -> list[list[float]]:
        reply = self._post("/embeddings", {"model": self.embed_model, "input": texts}, self.embed_base_url)
        out = []
        for item in sorted(reply["data"], key=lambda d: d["index"]):
            v = item["embedding"]
            if v and isinstance(v[0], list):  # one vector per token (a model without pooling): average them
                v = [sum(col) / len(v) for col in zip(*v)]
            out.append(v)
        return out


def parse_json(text: str) -> dict:
    """The first JSON object in a model's reply ({} when there is none)."""
    text = text.strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return {}
    try:
        value = json.loads(text[start:end + 1])
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


class NotesMemory:
    """One user's notes (a fresh one per `reset`)."""

    def __init__(self, model: Model, k: int) -> None:
        self.model, self.k = model, k
        self.notes: list[tuple[str, str]] = []  # (date, note), in the order they were taken
        self.vectors: list[list[float]] = []

    def ingest(self, msg: dict) -> dict:
        usage: Counter = Counter()
        turns = msg["turns"]
        date = turns[0]["timestamp"][:10] if turns else ""
        talk = "\n".join(f"{t['role']}: {t['text']}" for t in turns)
        reply = self.model.chat(EXTRACT, f"Session of {date}:\n{talk}", usage, json_out=True)
        notes = [str(n).strip() for n in parse_json(reply).get("notes", []) if str(n).strip()][:20]
        self.notes += [(date, n) for n in notes]
        if notes and self.model.embed_model:
            self.vectors += self.model.embed(notes)
        return {"ok": True, "usage": dict(usage)}

    def nearest(self, query: str) -> list[tuple[str, str]]:
        if not self.notes:
            return []
        if self.model.embed_model:
            q = self.model.embed([query])[0]
            scores = [cosine(dict(enumerate(q)), dict(enumerate(v))) for v in self.vectors]
        else:
            qv = Counter(words(query))
            scores = [cosine(qv, Counter(words(n))) for _, n in self.notes]
        best = sorted(range(len(self.notes)), key=lambda i: -scores[i])[: self.k]
        return [self.notes[i] for i in sorted(best)]  # back in time order: later notes win

    def act(self, task: dict) -> dict:
        usage: Counter = Counter()
        query = f"{task.get('scenario_name', '')}: {task['query']}"
        notes = "\n".join(f"- ({d}) {n}" for d, n in self.nearest(query)) or "- (none)"
        if task["action"] == "generate":
            text = self.model.chat(ACT_TEXT.format(notes=notes), task["query"], usage)
            return {"kind": "generate", "text": text.strip(), "usage": dict(usage)}
        schema = task.get("api_schema") or {}
        reply = self.model.chat(ACT_API.format(notes=notes, api=task.get("api_name"), schema=json.dumps(schema)),
                                task["query"], usage, schema=schema, json_out=True)
        params = fit(parse_json(reply), schema)
        return {"kind": "call_api", "api_name": task.get("api_name"), "params": params, "usage": dict(usage)}


def fit(params: dict, schema: dict) -> dict:
    """Keep the schema's parameters; an enum value matched without regard to case. iba checks the rest."""
    props = schema.get("properties", {})
    out = {}
    for name, value in params.items():
        if name not in props:
            continue
        enum = props[name].get("enum")
        if enum and value not in enum:
            value = next((e for e in enum if str(e).lower() == str(value).lower()), value)
        out[name] = value
    return out


class Server:
    """The protocol's state: one NotesMemory per user id (a cmd= process only ever sees one)."""

    def __init__(self, model: Model, k: int) -> None:
        self.model, self.k = model, k
        self.users: dict[str, NotesMemory] = {}

    def handle(self, msg: dict) -> dict:
        kind, user = msg.get("type"), msg.get("user_id")
        if kind == "reset":
            self.users[user] = NotesMemory(self.model, self.k)
            return {"ok": True}
        if user not in self.users:
            return {"error": f"no reset for user {user!r} before {kind}"}
        if kind == "ingest":
            return self.users[user].ingest(msg)
        if kind == "act":
            return self.users[user].act(msg["task"])
        if kind == "close":
            del self.users[user]
            return {"ok": True}
        return {"error": f"unknown message type {kind!r}"}


def serve(port: int, server: Server) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            try:
                reply, status = server.handle(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))), 200
            except RuntimeError as e:  # the model server failed: a fault, retried by iba later
                reply, status = {"error": str(e), "retryable": True}, 200
            except Exception as e:  # a bad request
                reply, status = {"error": f"{type(e).__name__}: {e}"}, 400
            body = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", default=os.environ.get("NOTES_MEMORY_BASE_URL") or os.environ.get("OPENAI_BASE_URL"),
                   help="OpenAI-compatible API root, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--model", default=os.environ.get("NOTES_MEMORY_MODEL", "default"), help="chat model name")
    p.add_argument("--embed-model", default=None, help="embeddings model name (default: bag-of-words retrieval)")
    p.add_argument("--embed-base-url", default=None, help="embeddings endpoint root (default: --base-url)")
    p.add_argument("--k", type=int, default=8, help="notes shown at act (default 8)")
    p.add_argument("--max-tokens", type=int, default=400, help="completion tokens per call (default 400)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per model call (default 600)")
    p.add_argument("--serve", type=int, default=None, metavar="PORT", help="an HTTP server instead of JSON lines")
    args = p.parse_args(argv)
    if not args.base_url:
        p.error("--base-url (or $NOTES_MEMORY_BASE_URL / $OPENAI_BASE_URL) is required")
    server = Server(Model(args.base_url, args.model, args.embed_model, args.max_tokens, args.timeout,
                          args.embed_base_url), args.k)
    if args.serve is not None:
        serve(args.serve, server)
        return 0
    for line in sys.stdin:  # one message per line, one reply per line (flushed: iba waits for it)
        try:
            reply = server.handle(json.loads(line))
        except RuntimeError as e:  # the model server failed after retries: not this memory's failure
            reply = {"error": str(e), "retryable": True}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
