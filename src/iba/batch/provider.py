"""`iba batch submit` / `iba batch collect`: a batch folder's rounds through the OpenAI SDK's Files and
Batches API (any provider that serves it: OpenAI, and servers that copy its Batch API).

submit uploads each round file not yet sent (purpose "batch") and creates one batch per file
(endpoint /v1/chat/completions, completion window 24h), recording the batch id beside the file.
collect asks each sent batch for its state; a finished one (completed, expired, cancelled, failed)
has its output and error files downloaded into results/, and every request of the file that came
back with nothing gets a failed result, so the next run sends it again (at most MAX_ATTEMPTS).
The key comes from OPENAI_API_KEY only and is written nowhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from iba.batch.folder import BatchError, BatchFolder, read_lines, utc_now
from iba.batch.lines import URL, RequestLine, ResultLine
from iba.dataset import atomic_write_text

FINISHED = ("completed", "expired", "cancelled", "failed")
WINDOW = "24h"


def client(base_url: str | None = None) -> Any:
    """An OpenAI SDK client for the Files/Batches API: base URL from the argument or
    $OPENAI_BASE_URL, key from $OPENAI_API_KEY."""
    from openai import OpenAI

    key = os.environ.get("OPENAI_API_KEY")
    if not key:
        raise BatchError("set OPENAI_API_KEY to submit or collect batches (the provider's key; it is stored nowhere)")
    return OpenAI(api_key=key, base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None, max_retries=2)


def submitted_path(request_file: Path) -> Path:
    return request_file.with_name(request_file.name.replace(".requests.jsonl", ".submitted.json"))


def submit(folder: BatchFolder, api: Any) -> list[dict[str, Any]]:
    """Send every round file that has not been sent; returns what was sent."""
    sent = []
    for f in folder.request_files():
        marker = submitted_path(f)
        if marker.exists():
            continue
        n = len(read_lines(f, RequestLine, "request"))
        with f.open("rb") as fh:
            upload = api.files.create(file=(f.name, fh), purpose="batch")
        batch = api.batches.create(input_file_id=upload.id, endpoint=URL, completion_window=WINDOW,
                                   metadata={"iba_round": f.parent.name, "iba_file": f.name})
        meta = {"batch_id": batch.id, "input_file_id": upload.id, "status": batch.status, "requests": n,
                "submitted_at": utc_now(), "collected": False}
        atomic_write_text(marker, json.dumps(meta, indent=2) + "\n")
        sent.append({"file": str(f), **meta})
    return sent


def _lines_of(api: Any, file_id: str | None, where: str) -> list[ResultLine]:
    if not file_id:
        return []
    text = api.files.content(file_id).text
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        if raw.strip():
            try:
                out.append(ResultLine.model_validate_json(raw))
            except ValueError as e:
                raise BatchError(f"{where} (file {file_id}) line {lineno}: not a Batch API output line: "
                                 f"{str(e).splitlines()[0]}") from None
    return out


def collect(folder: BatchFolder, api: Any) -> dict[str, Any]:
    """Fetch what finished; returns counts of batches collected and still running, and results stored."""
    out = {"collected": 0, "running": 0, "results": 0, "states": {}}
    for f in folder.request_files():
        marker = submitted_path(f)
        if not marker.exists():
            continue
        meta = json.loads(marker.read_text(encoding="utf-8"))
        if meta.get("collected"):
            continue
        batch = api.batches.retrieve(meta["batch_id"])
        meta["status"] = batch.status
        out["states"][str(f)] = batch.status
        if batch.status not in FINISHED:
            out["running"] += 1
            atomic_write_text(marker, json.dumps(meta, indent=2) + "\n")
            continue
        lines = _lines_of(api, getattr(batch, "output_file_id", None), str(f))
        lines += _lines_of(api, getattr(batch, "error_file_id", None), str(f))
        seen = {x.custom_id for x in lines}
        why = f"batch {batch.status}"
        errors = getattr(getattr(batch, "errors", None), "data", None) or []
        if errors:
            why += ": " + "; ".join(str(getattr(e, "message", e)) for e in errors[:3])
        for _, req in read_lines(f, RequestLine, "request"):
            if req.custom_id not in seen:  # nothing came back for it: a failed result, sent again next round
                lines.append(ResultLine(custom_id=req.custom_id, error={"code": f"batch_{batch.status}", "message": why}))
        mine = [x for x in lines if x.custom_id in folder.requests]
        if mine:
            folder.add_results(mine, f"collect-{f.parent.name}-{f.name.removesuffix('.requests.jsonl')}")
        meta["collected"] = True
        meta["collected_at"] = utc_now()
        atomic_write_text(marker, json.dumps(meta, indent=2) + "\n")
        out["collected"] += 1
        out["results"] += len(mine)
    return out
