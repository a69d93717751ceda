"""The agent contract: `act(task, history) -> Action`.

An agent receives a TaskView (public) and the user's history (public turns) and nothing else.
The answer key never passes through here; tests/run/test_runner.py::test_agent_never_sees_the_answer_key holds that line.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Sequence
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
    # the public scenario names of the benchmark's tasks (TaskView.scenario_name), for Deep Retrieval's
    # scenario contrast (iba?contrast=true); empty when the caller does not know them
    scenarios: tuple[str, ...] = ()


class Agent(ABC):
    """Subclasses set `name` and implement `act`. Options come from the agent spec
    (`iba?retrieval=false&reranker=rules` -> {"retrieval": "false", "reranker": "rules"})."""

    name: str = "agent"
    # the pydantic model of its spec options: Agent.__init__ parses them into `opts` (one message
    # for every agent: parse_options); None keeps them unparsed in `options`
    options_model: type[BaseModel] | None = None
    # whether the agent asks the run's model (AgentEnv.backend); False for one that brings its own
    # (external): reports do not label its rows with a model it never used
    uses_model: bool = True

    def __init__(self, env: AgentEnv, /, **options: Any) -> None:
        self.env = env
        self.options = options
        if self.options_model is not None:
            self.opts = parse_options(self.options_model, options, self.name)

    @abstractmethod
    async def act(self, task: TaskView, history: list[Turn]) -> Action:
        """Produce the final action. Record every step in `Action.trace`."""

    def hide(self, paths: Sequence[str]) -> None:
        """The evaluator's files (answer key, distractor labels) this agent must never be shown;
        ValueError if its configuration would show one. In-process agents open no files by path;
        an agent that starts another program (external) keeps them out of its sandbox. The runner
        calls this, so the paths never reach the agent's AgentEnv."""


def parse_agent_spec(spec: str) -> tuple[str, dict[str, str]]:
    """'iba?retrieval=false&reranker=rules' -> ('iba', {'retrieval': 'false', 'reranker': 'rules'}).

    ValueError (naming the spec) for no name, a part without '=', an empty key or a repeated key;
    whether the options exist is the agent's to say (`parse_options`)."""
    name, _, query = spec.partition("?")
    if not name.strip():
        raise ValueError(f"agent spec {spec!r} has no agent name (e.g. direct, rag, iba?retrieval=false)")
    options: dict[str, str] = {}
    for part in filter(None, query.split("&")):
        key, eq, value = part.partition("=")
        if not eq or not key:
            raise ValueError(f"agent {name}: option {part!r} in {spec!r} must be key=value")
        if key in options:  # the last would silently win
            raise ValueError(f"agent {name}: option {key!r} given twice in {spec!r}")
        options[key] = value
    return name, options


@functools.lru_cache(maxsize=256)  # report labels ask per cell
def agent_uses_model(spec: str) -> bool:
    """Whether the agent of `spec` asks the run's model (Agent.uses_model); True for a name this
    process cannot resolve (a script's own agent), as most do."""
    from iba import registry

    try:
        cls = registry.resolve("agents", parse_agent_spec(spec)[0])
    except (KeyError, ValueError, ImportError):
        return True
    return bool(getattr(cls, "uses_model", True))


class AgentError(RuntimeError):
    """The agent could not produce a valid action (model output invalid after its retry, an external
    agent crashed or replied nonsense, ...). The agent's own failure: the runner records the
    instance as failed, and it scores 0; there is no default answer."""


class AgentUnavailable(AgentError):
    """An external agent could not be reached (cannot start, unreachable, timed out, HTTP 5xx): an
    infrastructure fault, so the instance is errored (retried with --retry-errored), not failed."""


def check_overlap(options: Any) -> Any:
    """An option model's chunk windows (size=, overlap=): overlap must stay below size, else no
    window advances; said when the spec is parsed, not as a failed record per instance."""
    if options.overlap >= options.size:
        raise ValueError(f"option overlap={options.overlap} must be below size={options.size}")
    return options


def parse_options(model: type[BaseModel], options: dict[str, Any], agent: str) -> Any:
    """Validate an agent's spec options against its pydantic options model; every agent calls this,
    so all share one message: "agent direct: unknown option 'bogus' (allowed: ...)"."""
    try:
        return model.model_validate(options)
    except ValidationError as e:
        allowed = ", ".join(model.model_fields)
        problems = []
        for err in e.errors():
            key = ".".join(map(str, err["loc"]))
            msg = _RANGES.get(err["type"], err["msg"]).format(**err.get("ctx", {})).removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                problems.append(f"unknown option {key!r}")
            elif key:
                problems.append(f"option {key}={options.get(err['loc'][0], err.get('input'))!s}: {msg}")
            else:  # a check across options (e.g. external: exactly one of cmd or url)
                problems.append(msg)
        raise ValueError(f"agent {agent}: {'; '.join(problems)} (allowed: {allowed})") from None


# pydantic's range errors, said as the allowed range ("option k=0: must be >= 1")
_RANGES = {"greater_than_equal": "must be >= {ge}", "greater_than": "must be > {gt}",
           "less_than_equal": "must be <= {le}", "less_than": "must be < {lt}",
           "finite_number": "must be a finite number"}
