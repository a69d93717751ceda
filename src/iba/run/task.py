"""One Task: what an evaluation is, whichever front end executes it.

inspect_ai's Task (dataset, solver, scorer) kept small: the dataset, the Selection of its instances,
the agent specs (the solvers) and the scorers by registered name (registry kind "scorers",
eval/scoring.py). `iba run` (commands/run.py -> run/runner.py, its `--batch` path included) and the
inspect task `iba/iba_bench` (inspect/task.py) both build it with RunConfig.task, so the same
arguments give the same instances, agents and scorers in both.
"""

from __future__ import annotations

from dataclasses import dataclass

from iba import registry
from iba.dataset import Dataset
from iba.eval.scoring import DEFAULT_SCORERS
from iba.run.selection import Selection
from iba.types.dataset import TaskView


@dataclass(frozen=True)
class Task:
    dataset: Dataset
    selection: Selection
    agents: tuple[str, ...]  # agent specs, as `iba run --agent` takes them
    scorers: tuple[str, ...] = DEFAULT_SCORERS

    def __post_init__(self) -> None:
        for name in self.scorers:  # an unknown name fails here, with the registered ones listed
            registry.resolve("scorers", name)

    def instances(self) -> list[TaskView]:
        """The selected instances, in run order."""
        return self.selection.select(self.dataset)


def task_scorers(*, judged: bool = True) -> tuple[str, ...]:
    """The default scorers; without judges (`--judges none`, `-T judges=false`) less "judge", which
    would score nothing."""
    return DEFAULT_SCORERS if judged else tuple(n for n in DEFAULT_SCORERS if n != "judge")
