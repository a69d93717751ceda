"""IBA-Bench as an inspect_ai task: `inspect eval iba/iba_bench -T dataset=DIR --model openai/NAME`.

`iba_bench` (iba.inspect.task) turns our instances into inspect samples, runs our agent in a solver
with inspect's model behind our Backend interface (iba.inspect.backend), and scores with our slot
matcher, verifiers and checkpoint judges as three inspect scorers; inspect brings its log viewer,
retries, providers and batch modes. Registered through the `inspect_ai` entry point group
(`iba.inspect._registry`). Needs the `inspect` extra: pip install 'iba[inspect]'.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "iba_bench":
        try:
            from iba.inspect.task import iba_bench
        except ImportError as e:
            if "inspect_ai" not in str(e):
                raise
            raise ImportError("iba.inspect needs inspect_ai: pip install 'iba[inspect]'") from None
        return iba_bench
    raise AttributeError(name)
