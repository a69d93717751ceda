"""QA probes: a multiple-choice question on the same preference a checkpoint or slot tests.

Comparing QA accuracy with task scores measures the knowledge-to-action gap (paper Fig. 5d).
Options are the dimension's static value texts in a seeded order; the answer is the expected one.
"""

from __future__ import annotations

import random

from iba.construct.plan_types import Constraint
from iba.types import QAProbe


def qa_probe(rng: random.Random, probe_id: str, target: str, c: Constraint, scenario_name: str) -> QAProbe:
    options = [v.text for v in c.dimension.values if not v.dynamic]
    rng.shuffle(options)
    question = (
        f"Based on this user's history, which option best describes what they want right now "
        f"for \"{c.dimension.name}\" in {scenario_name.lower()}?"
    )
    return QAProbe(id=probe_id, target=target, question=question, options=options, answer=options.index(c.expected.text))
