"""`iba batch answer DIR --model M`: an offline answerer. Every request awaiting its answer is put to
backend M (the embedded model, or any openai: server) and its reply written as a Batch API output
line, as a provider would. It reads only the request body (batch.lines.call_params), exactly what
a provider is sent. Results are stored every `chunk` answers, so an interrupted answerer resumes.
"""

from __future__ import annotations

from typing import Any

from iba.batch.folder import BatchFolder, model_slug
from iba.batch.lines import ResultLine, ResultResponse, call_params, completion_body, served_name
from iba.llm.base import Backend, LLMError


async def answer_awaiting(folder: BatchFolder, backend: Backend, *, limit: int | None = None, chunk: int = 16,
                          progress: bool = True) -> dict[str, Any]:
    """Answer the awaiting requests (at most `limit`); returns counts: answered, failed, other_model
    (requests whose body names another model than `backend`'s, answered all the same)."""
    from tqdm.auto import tqdm

    todo = folder.awaiting()[:limit] if limit else folder.awaiting()
    counts = {"answered": 0, "failed": 0, "other_model": 0}
    bar = tqdm(total=len(todo), desc="answer", unit="request", disable=not progress)
    lines: list[ResultLine] = []
    try:
        for i, cid in enumerate(todo):
            body = folder.requests[cid].body
            if body.get("model") not in (backend.model_id, backend.model_id.partition(":")[2]):
                counts["other_model"] += 1
            try:
                comp = await backend.send(call_params(body))
                lines.append(ResultLine(id=f"batch_req_{i}", custom_id=cid, response=ResultResponse(
                    status_code=200, body=completion_body(comp, served_name(backend.model_id)))))
                counts["answered"] += 1
            except LLMError as e:  # a failed call is a failed result: the next round asks again
                lines.append(ResultLine(id=f"batch_req_{i}", custom_id=cid, response=ResultResponse(
                    status_code=500, body={"error": {"message": str(e)[:500], "type": "server_error"}})))
                counts["failed"] += 1
            bar.update(1)
            if len(lines) >= chunk:
                folder.add_results(lines, f"answer-{model_slug(backend.model_id)}")
                lines = []
    finally:
        if lines:  # what was answered before an interruption is kept
            folder.add_results(lines, f"answer-{model_slug(backend.model_id)}")
        bar.close()
    return counts
