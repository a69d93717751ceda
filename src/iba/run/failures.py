"""Whose failure is it? The rule that decides whether a run is *failed* (scored 0) or *errored*.

- The agent's side -> "failed", scored 0 with the reason: any exception of the agent's own code,
  a model reply that never validated (StructuredOutputError), an invalid or missing action
  (wrong kind, bad params), an external agent that crashed or replied nonsense.
- The infrastructure's side -> "errored", unscored, shown in reports and run again by
  `iba run --retry-errored`: a model call that failed after its retries (server down,
  connection, 5xx, 429, its timeout), the runner's per-action timeout, an external agent that
  cannot be started or reached (AgentUnavailable).
- The evaluator's side (a judge reply that cannot be parsed) is neither: the run stays ok and
  that verdict is unscored (`Verdict.passed=None`).
"""

from __future__ import annotations

import asyncio
from typing import Literal

from iba.agents.base import AgentUnavailable
from iba.llm.base import LLMError
from iba.llm.structured import StructuredOutputError

Status = Literal["failed", "errored"]


def classify(exc: BaseException) -> Status:
    """'errored' for an infrastructure fault, 'failed' for the agent's own failure."""
    if isinstance(exc, StructuredOutputError):
        return "failed"  # the model answered, but never with a valid reply: the agent's output
    if isinstance(exc, (LLMError, AgentUnavailable, asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return "errored"
    return "failed"
