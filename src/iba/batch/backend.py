"""The backend of `iba run --batch`: answers calls from a batch folder, defers the others.

It stands in for the run's real backend (`inner`), whose model string, context window and token
counter it keeps, so agents and judges build exactly the prompts a direct run builds; `inner` is
never asked to complete anything.
"""

from __future__ import annotations

import logging

from iba.batch.folder import BatchFolder
from iba.batch.lines import request_line, result_completion, same_model, served_name
from iba.llm.base import Backend, CallDeferred, Completion, ModelRequest
from iba.llm.retry import ModelBadResponse, ModelCallError, ModelRequestRejected

log = logging.getLogger(__name__)
_WARNED: set[tuple[str, str]] = set()  # (asked, answered) pairs said once per process


class BatchBackend(Backend):
    def __init__(self, inner: Backend, folder: BatchFolder) -> None:
        self.inner = inner
        self.folder = folder
        self.model_id = inner.model_id

    @property
    def context_window(self) -> int:  # type: ignore[override]
        return self.inner.context_window

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    async def send(self, request: ModelRequest) -> Completion:
        request = request.offered()
        line = request_line(self.model_id, served_name(self.model_id), request)
        cid = line.custom_id
        state = self.folder.state(cid)
        if state == "answered":
            answer = self.folder.answers[cid]
            asked = served_name(self.model_id)
            if not same_model(asked, answer.answered_by) and (asked, answer.answered_by or "") not in _WARNED:
                _WARNED.add((asked, answer.answered_by or ""))
                log.warning("warning: batch answers to %s come from %s (%s): the records are stored under %s, and "
                            "each trace step names the model that answered (answered_by)", self.model_id,
                            answer.answered_by, self.folder.answered_where.get(cid, self.folder.root), self.model_id)
            try:
                return result_completion(answer, request.tools, request.max_tokens, self.model_id)
            except ValueError as e:
                raise ModelBadResponse(f"{self.model_id}: batch result: {e}") from None
        if state in ("rejected", "given_up"):
            failed = self.folder.failures[cid]
            cls = ModelRequestRejected if state == "rejected" else ModelCallError
            raise cls(f"{self.model_id}: batch request {cid} failed ({len(failed)} result(s)): {failed[-1].problem()}",
                      attempts=len(failed))
        self.folder.want(self.model_id, line)
        raise CallDeferred(cid)

    async def aclose(self) -> None:
        await self.inner.aclose()
