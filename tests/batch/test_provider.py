"""`iba batch submit` / `collect` through the real OpenAI SDK against a small local fake of the Files
and Batches endpoints (no provider is reachable from tests)."""

from __future__ import annotations

import json
import threading
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from iba.batch.folder import BatchFolder
from iba.batch.lines import request_line
from iba.llm.base import ModelRequest
from iba.cli import main


class FakeBatchAPI:
    """POST /v1/files, POST /v1/batches, GET /v1/batches/{id}, GET /v1/files/{id}/content. A batch is
    in_progress on its first retrieve and completed on the next, answering every request but the
    last (which the output leaves out, as an expired request would be)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.auth: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, obj, status=200, text=None):
                data = text.encode() if text is not None else json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/jsonl" if text is not None else "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):  # noqa: N802
                outer.auth.append(self.headers.get("authorization", ""))
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path == "/v1/files":
                    msg = BytesParser().parsebytes(b"content-type: " + self.headers["content-type"].encode() + b"\r\n\r\n" + body)
                    parts = {p.get_param("name", header="content-disposition"): p for p in msg.get_payload()}
                    fid = f"file-{len(outer.files) + 1}"
                    outer.files[fid] = parts["file"].get_payload(decode=True)
                    assert parts["purpose"].get_payload() == "batch"
                    return self._send({"id": fid, "object": "file", "bytes": len(outer.files[fid]), "created_at": 0,
                                       "filename": parts["file"].get_filename(), "purpose": "batch", "status": "processed"})
                if self.path == "/v1/batches":
                    req = json.loads(body)
                    bid = f"batch_{len(outer.batches) + 1}"
                    outer.batches[bid] = {"id": bid, "object": "batch", "endpoint": req["endpoint"],
                                          "input_file_id": req["input_file_id"], "completion_window": req["completion_window"],
                                          "metadata": req.get("metadata"), "created_at": 0, "status": "validating",
                                          "retrieved": 0}
                    return self._send(outer.batches[bid])
                self._send({"error": {"message": "no route"}}, 404)

            def do_GET(self):  # noqa: N802
                if self.path.startswith("/v1/batches/"):
                    b = outer.batches[self.path.rsplit("/", 1)[1]]
                    b["retrieved"] += 1
                    if b["retrieved"] == 1:
                        b["status"] = "in_progress"
                    else:
                        b["status"], b["output_file_id"] = "completed", f"out-{b['id']}"
                        lines = [json.loads(x) for x in outer.files[b["input_file_id"]].decode().splitlines()]
                        outer.files[b["output_file_id"]] = "".join(json.dumps({
                            "id": f"req_{i}", "custom_id": x["custom_id"], "error": None,
                            "response": {"status_code": 200, "request_id": f"r{i}", "body": {
                                "id": "c", "object": "chat.completion", "created": 0, "model": x["body"]["model"],
                                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                    "role": "assistant", "content": "answer to " + x["body"]["messages"][-1]["content"]}}],
                                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}}}) + "\n"
                            for i, x in enumerate(lines[:-1])).encode()
                    return self._send({k: v for k, v in b.items() if k != "retrieved"})
                if self.path.startswith("/v1/files/") and self.path.endswith("/content"):
                    fid = self.path.split("/")[3]
                    return self._send(None, text=outer.files[fid].decode())
                self._send({"error": {"message": "no route"}}, 404)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture()
def api():
    fake = FakeBatchAPI()
    yield fake
    fake.server.shutdown()


def test_submit_and_collect_through_the_sdk(api, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch-key-123456")
    folder = BatchFolder(tmp_path / "b", create=True)
    lines = [request_line("openai:gpt-x", "gpt-x",
                          ModelRequest(messages=[{"role": "user", "content": f"q{i}"}], max_tokens=8))
             for i in range(3)]
    for line in lines:
        folder.want("openai:gpt-x", line)
    round_dir, written, _ = folder.flush()
    request_file = round_dir / "openai_gpt-x.requests.jsonl"

    assert main(["batch", "submit", str(folder.root), "--base-url", api.url]) == 0
    assert "3 request(s) as batch batch_1" in capsys.readouterr().out
    assert api.files["file-1"] == request_file.read_bytes()  # the round file, byte for byte
    b = api.batches["batch_1"]
    assert b["endpoint"] == "/v1/chat/completions" and b["completion_window"] == "24h"
    assert b["metadata"] == {"iba_round": "round-0001", "iba_file": request_file.name}
    assert main(["batch", "submit", str(folder.root), "--base-url", api.url]) == 0  # nothing sent twice
    assert "nothing to send" in capsys.readouterr().out and len(api.batches) == 1

    assert main(["batch", "collect", str(folder.root), "--base-url", api.url]) == 1  # still running
    assert "1 still running" in capsys.readouterr().out
    assert main(["batch", "collect", str(folder.root), "--base-url", api.url]) == 0
    assert "1 batch(es) collected (3 result lines)" in capsys.readouterr().out
    folder.reload()
    states = {cid: folder.state(cid) for cid in folder.requests}
    assert sorted(states.values()) == ["answered", "answered", "new"]  # the one left out is sent again
    answered = [c for c, s in states.items() if s == "answered"]
    assert folder.answers[answered[0]].response.body["choices"][0]["message"]["content"].startswith("answer to q")
    marker = json.loads((round_dir / "openai_gpt-x.submitted.json").read_text())
    assert marker["collected"] and marker["batch_id"] == "batch_1"
    # the key went to the provider, and nowhere into the folder
    assert all(a == "Bearer sk-test-batch-key-123456" for a in api.auth)
    assert not any("sk-test-batch-key" in p.read_text() for p in folder.root.rglob("*") if p.is_file())


def test_submit_needs_a_key(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    BatchFolder(tmp_path / "b", create=True)
    assert main(["batch", "submit", str(tmp_path / "b")]) == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err
