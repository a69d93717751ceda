"""The agent contract: `act(task, history) -> Action`.

An agent receives a TaskView (public) and the user's history (public turns) and nothing else.
The answer key never passes through here; tests/run/test_runner.py::test_agent_never_sees_the_answer_key holds that line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from iba.llm.base import Backend
from iba.types import Action, TaskView, Turn


@dataclass
class AgentEnv:
    """What the runner hands every agent: the backend and shared, per-run services."""

    backend: Backend
    cache_dir: Path = field(default_factory=lambda: Path(".iba-cache"))
    embedder: str = "minilm"
    seed: int = 42


class Agent(ABC):
    """Subclasses set `name` and implement `act`. Options come from the agent spec
    (`iba?retrieval=false&reranker=rules` -> {"retrieval": "false", "reranker": "rules"})."""

    name: str = "agent"

    def __init__(self, env: AgentEnv, **options: Any) -> None:
        self.env = env
        self.options = options

    @abstractmethod
    async def act(self, task: TaskView, history: list[Turn]) -> Action:
        """Produce the final action. Record every step in `Action.trace`."""


def parse_agent_spec(spec: str) -> tuple[str, dict[str, str]]:
    """'iba?retrieval=false&reranker=rules' -> ('iba', {'retrieval': 'false', 'reranker': 'rules'})."""
    name, _, query = spec.partition("?")
    options: dict[str, str] = {}
    for part in filter(None, query.split("&")):
        key, eq, value = part.partition("=")
        if not eq:
            raise ValueError(f"agent option {part!r} in {spec!r} must be key=value")
        options[key] = value
    return name, options


class AgentError(RuntimeError):
    """The agent could not produce a valid action (model output invalid after its retry, an external
    agent crashed or replied nonsense, ...). The agent's own failure: the runner records the
    instance as failed, and it scores 0; there is no default answer."""


class AgentUnavailable(AgentError):
    """An external agent could not be reached (cannot start, unreachable, timed out, HTTP 5xx): an
    infrastructure fault, so the instance is errored (retried with --retry-errored), not failed."""


def parse_options(model: type[BaseModel], options: dict[str, Any], agent: str) -> Any:
    """Validate an agent's spec options against its pydantic options model (unknown keys are errors)."""
    try:
        return model.model_validate(options)
    except ValidationError as e:
        known = ", ".join(model.model_fields)
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ValueError(f"bad options for agent {agent!r}: {problems} (options: {known})") from None
