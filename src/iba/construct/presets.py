"""Build presets: which scenarios, how many personas and instances, how much noise.

- demo: seconds. Four personas on technical documentation writing (Generate) and food ordering
  (CallAPI), three instances each, with at least one changed preference and, when the taxonomy has
  a state constraining these scenarios, one state-driven constraint. Its noise ratio is 50 rather
  than the paper's 100, so histories stay at a few hundred turns and the offline `iba demo`
  (retrieval plus a small local model) stays quick; `--noise-ratio 100` restores the paper's.
- small: one instance per scenario, each for its own persona (66 personas at full taxonomy).
- full: 400 personas; each scenario gets its Table 13 instance count (`paper_instances`, 6,962 in
  all), each instance for a different persona.
"""

from __future__ import annotations

from dataclasses import dataclass

from iba.types import Scenario, Taxonomy


@dataclass(frozen=True)
class Preset:
    name: str
    help: str
    scenarios: tuple[str, ...] | None = None  # None: every scenario of the taxonomy
    personas: int | None = None  # None: one per scenario
    instances_per_scenario: int | None = None  # None: the scenario's paper_instances
    noise_ratio: float = 100.0
    force_examples: bool = False  # guarantee a dynamic preference and a state-driven constraint

    def select(self, taxonomy: Taxonomy) -> list[Scenario]:
        all_scenarios = taxonomy.scenarios()
        if self.scenarios is None:
            return all_scenarios
        have = {s.id: s for s in all_scenarios}
        missing = [sid for sid in self.scenarios if sid not in have]
        if missing:
            raise ValueError(
                f"preset {self.name!r} needs scenario(s) {', '.join(missing)}, which the taxonomy lacks "
                f"(it has: {', '.join(sorted(have)) or 'none'}); add them to src/iba/taxonomy/data/"
            )
        return [have[sid] for sid in self.scenarios]

    def instance_count(self, scenario: Scenario) -> int:
        if self.instances_per_scenario is not None:
            return self.instances_per_scenario
        if scenario.paper_instances <= 0:
            raise ValueError(f"scenario {scenario.id!r} has no paper_instances (Table 13's I); set it in the taxonomy")
        return scenario.paper_instances


PRESETS: dict[str, Preset] = {
    "demo": Preset(
        name="demo",
        help="4 personas, technical documentation + food ordering, 6 instances, noise ratio 50 (seconds)",
        scenarios=("technical_documentation", "food_ordering"),
        personas=4,
        instances_per_scenario=3,
        noise_ratio=50.0,
        force_examples=True,
    ),
    "small": Preset(name="small", help="one instance per scenario, one persona each, noise ratio 100", instances_per_scenario=1),
    "full": Preset(
        name="full",
        help="400 personas, Table 13 instance counts (6,962 at full taxonomy), noise ratio 100",
        personas=400,
    ),
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose from: {', '.join(PRESETS)}") from None
