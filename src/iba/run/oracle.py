"""The oracle reference's history, built on the evaluator's side of the wall.

The runner is the one place that holds both the history and the answer key. For the oracle, and
only for an agent whose class is exactly `OracleAgent` (a subclass, an external or a memory agent
never qualifies, whatever it is named), it reads the instance's key explicitly before the action,
a held-back key (`iba run --answer-key`) included, and hands the agent the gold evidence turns of
the instance's checkpoints and slots: whole turns from the history, in its (time) order, nothing
else. Every other agent gets the history unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping

from iba.agents.base import Agent
from iba.agents.references import GoldTurns, OracleAgent
from iba.dataset import Dataset, DatasetError
from iba.types import AnswerKey, TaskView, Turn


def evidence_turn_ids(key: AnswerKey, *, superseded: bool = False) -> set[str]:
    """The gold evidence turns of an instance: every checkpoint's and slot's evidence; with
    `superseded`, also the turns that revealed an old value of a changed preference."""
    ids = {t for c in key.checkpoints for t in c.evidence} | {t for s in key.slots for t in s.evidence}
    if superseded:
        ids |= {e.turn_id for e in key.evidence if e.superseded}
    return ids


def reads_key(agent: Agent) -> bool:
    """Whether the runner gives `agent` key-derived input: the built-in oracle only."""
    return type(agent) is OracleAgent


def history_for(agent: Agent, ds: Dataset, task: TaskView, history: list[Turn],
                keys: Mapping[str, AnswerKey] | None = None) -> list[Turn]:
    """What `agent` is handed for `task`: the history, or for the oracle its gold turns. `keys`: the
    answer keys the runner already loaded to score (a dict); else (a held-back key, --no-score) the
    instance's key is read from the file now."""
    if not reads_key(agent):
        return history
    instance_id = task.instance_id  # a QA probe's too: its task's evidence
    if isinstance(keys, dict) and instance_id in keys:
        key: AnswerKey | None = keys[instance_id]
    else:
        key = ds.answer_key_for(instance_id)  # opened here, for this item, on purpose
    if key is None:
        raise DatasetError(f"{ds.answer_key_path}: no answer key for instance {instance_id!r} (the oracle reads it)")
    wanted = evidence_turn_ids(key, superseded=agent.opts.superseded)
    gold = GoldTurns(t for t in history if t.id in wanted)
    if len(gold) != len(wanted):
        missing = sorted(wanted - {t.id for t in gold})
        raise DatasetError(f"{ds.answer_key_path}: instance {instance_id!r} names evidence turns not in "
                           f"{ds.history_path(task.user_id)}: {', '.join(missing[:5])}")
    return gold
