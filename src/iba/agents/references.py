"""Reference rows: the direct agent's prompt on three histories, so that a report reads
no memory -> a system -> perfect retrieval.

  null    no history at all: what the model does from the task alone (the floor)
  direct  the whole history, as much of it as fits the context window, the most recent turns
          kept (the full-context row; on a long history it is truncated, and its trace says how
          many turns it kept)
  oracle  only the gold evidence turns of the instance's checkpoints and slots, whole, in time order
          (the ceiling when retrieval is perfect)

The oracle's turns come from the answer key, which no agent may read: the runner reads the key and
hands the oracle a `GoldTurns` history (iba.run.oracle), and only to an agent whose class is exactly
`OracleAgent`. The oracle refuses any other history, so outside `iba run` (inspect, a script) it
cannot quietly run as `direct`.
"""

from __future__ import annotations

from pydantic import Field

from iba.agents.direct import DirectAgent
from iba.types import Action, Strict, TaskView, Turn

# agent name -> what its row is named in reports and submissions
REFERENCES: dict[str, str] = {"null": "no history", "direct": "full context", "oracle": "gold evidence"}
# a report's order: the floor, the systems, then the ceilings
_ORDER = {"null": 0, "direct": 2, "oracle": 3}
_SYSTEMS = 1


def reference_of(spec: str) -> str | None:
    """The reference an agent spec is ('null', 'direct', 'oracle'), or None for a system."""
    name = spec.partition("?")[0]
    return name if name in REFERENCES else None


def row_order(spec: str) -> int:
    """Where a row of `spec` goes in a report: null, then the systems, then direct, then oracle."""
    ref = reference_of(spec)
    return _SYSTEMS if ref is None else _ORDER[ref]


class GoldTurns(list):  # list[Turn]
    """The history the runner builds for the oracle: the instance's gold evidence turns, whole, in
    time order, read from the answer key."""


class NullOptions(Strict):
    max_tokens: int | None = Field(None, ge=1)  # answer length; default per action kind


class OracleOptions(NullOptions):
    # also the turns that revealed the *old* value of a changed preference (EvidenceLabel.superseded)
    superseded: bool = False


class OracleMisuse(RuntimeError):
    """The oracle was run without the runner's gold turns."""


class NullAgent(DirectAgent):
    name = "null"
    options_model = NullOptions

    async def act(self, task: TaskView, history: list[Turn]) -> Action:
        return await super().act(task, [])


class OracleAgent(DirectAgent):
    name = "oracle"
    options_model = OracleOptions

    async def act(self, task: TaskView, history: list[Turn]) -> Action:
        if not isinstance(history, GoldTurns):
            raise OracleMisuse("the oracle reference runs only in `iba run`, whose runner hands it the gold evidence "
                               "turns from the answer key; it was given a plain history")
        action = await super().act(task, history)
        step = action.trace[0]  # truncate_history: which turns the prompt shows (the newest that fit)
        step.outputs["turn_ids"] = [t.id for t in history[len(history) - step.outputs["kept_turns"]:]]
        return action
