"""IBA-Bench construction (paper section 3): ground truth first, text second.

    presets -> builder.plan_dataset: personas (B, T, R), transient states (E), instances per
               scenario with Table 2's counts (count_histograms), ground truth per instance (ground_truth),
               sessions laid out on a timeline (planner, history, noise); plan_types holds the plan
    writers -> procedural_writer (template banks: evidence, noise) or llm_writer (a model,
               checked and rewritten, resumable journal)
    output  -> tasks (TaskView, AnswerKey, qa probes, fixed params) written by iba.dataset,
               then stats (Table 2). validate: AI annotation with agreement (Table 11).

Entry point: `build_dataset` (imported lazily so `import iba.construct` stays cheap).
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_dataset"]


def __getattr__(name: str) -> Any:
    if name == "build_dataset":
        from iba.construct.builder import build_dataset

        return build_dataset
    raise AttributeError(name)
