"""Ground truth per (persona, scenario): the expected values and the evidence that reveals them.

For each instance: draw how many constraints and evidence turns it has (Table 2 of the paper,
see iba.construct.count_histograms), choose the dimensions, sample one value per dimension (a dynamic value
means: old value revealed early, new value later, the key expects the new one), let an active
transient state override the dimensions it constrains, and split the evidence budget into
labelled turns of the four signal types of Table 12.
"""

from __future__ import annotations

import random

from iba.construct.plan_types import Constraint, EvidenceItem, InstancePlan, Reveal, StateMention, StateSpan
from iba.construct.rng import weighted_choice
from iba.types import Dimension, PreferenceValue, Scenario, TransientState

# Our choices where the paper gives no figure (documented in stats and the manifest):
DYNAMIC_PROB = 0.45  # a dimension with "preferred X; now Y" values gets one with this probability
CONFLICT_PROB = 0.5  # a state-driven dimension also has an older long-term preference it overrides
STATE_ACTIVE_PROB = 0.35  # a persona has an active state constraining one of its scenarios
STATE_EXPIRED_PROB = 0.3  # a persona mentions a state that is over by task time (a distractor)
PATTERN_PROB = 0.6  # a dimension revealed by >= 2 turns shows it as a repeated behaviour

SINGLE_TYPES = ("explicit_revision", "complaint", "direct_statement", "implicit_pattern")
SINGLE_WEIGHTS = (0.3, 0.2, 0.3, 0.2)
STRONG_TYPES = ("explicit_revision", "complaint", "direct_statement")
STRONG_WEIGHTS = (0.35, 0.25, 0.4)


def selectable_dimensions(scenario: Scenario) -> list[Dimension]:
    """Dimensions an instance can be scored on: all for text, those driving a slot for API calls."""
    if scenario.action == "generate" or scenario.api is None:
        return list(scenario.dimensions)
    slotted = {p.dimension for p in scenario.api.params if p.slot and p.dimension}
    return [d for d in scenario.dimensions if d.id in slotted]


def state_dimensions(scenario: Scenario, spans: list[StateSpan]) -> list[tuple[StateSpan, Dimension, PreferenceValue]]:
    """(span, dimension, value) for each dimension of `scenario` that an active state constrains."""
    dims = {d.id: d for d in selectable_dimensions(scenario)}
    out: list[tuple[StateSpan, Dimension, PreferenceValue]] = []
    seen: set[str] = set()
    for span in spans:
        if not span.active:
            continue
        for c in span.state.constrains:
            if c.scenario == scenario.id and c.dimension in dims and c.dimension not in seen:
                seen.add(c.dimension)
                out.append((span, dims[c.dimension], dims[c.dimension].value(c.value)))
    return out


def plan_states(
    rng: random.Random, persona_id: str, scenarios: list[Scenario], states: list[TransientState], *, force_active: bool = False
) -> list[StateSpan]:
    """Transient states (persona E) of one persona: at most one active and one expired."""
    spans: list[StateSpan] = []
    usable = {(s.id, d.id) for s in scenarios for d in selectable_dimensions(s)}
    # states that would constrain one of this persona's tasks
    candidates = [st for st in states if any((c.scenario, c.dimension) in usable for c in st.constrains)]
    active = None
    if candidates and (force_active or rng.random() < STATE_ACTIVE_PROB) and any(st.duration_days >= 3 for st in candidates):
        active = rng.choice([st for st in candidates if st.duration_days >= 3])
        n_cues = min(len(active.cues), rng.choice((1, 1, 2)))
        hi = active.duration_days - 1  # so the state still holds at task time
        start_ago = rng.randint(min(n_cues + 1, hi), hi)
        span = StateSpan(state=active, active=True, start_ago=start_ago, end_ago=start_ago - active.duration_days)
        for j, cue in enumerate(rng.sample(active.cues, n_cues)):
            span.mentions.append(StateMention(key=f"{persona_id}/state/{active.id}/{j}", state=active, cue=cue, active=True, span=span))
        spans.append(span)
    others = [st for st in states if st is not active]
    if others and rng.random() < STATE_EXPIRED_PROB:
        past = rng.choice(others)
        end_ago = rng.randint(20, 45)
        span = StateSpan(state=past, active=False, start_ago=end_ago + past.duration_days, end_ago=end_ago)
        cue = rng.choice(past.cues)
        span.mentions.append(StateMention(key=f"{persona_id}/past/{past.id}/0", state=past, cue=cue, active=False, span=span))
        spans.append(span)
    return spans


def static_values(dim: Dimension) -> list[PreferenceValue]:
    return [v for v in dim.values if not v.dynamic]


def _choose_values(
    rng: random.Random, dims: list[Dimension], force_dynamic: bool
) -> list[Constraint]:
    out = []
    dynamic_dims = [d for d in dims if d.dynamic]
    forced = rng.choice(dynamic_dims).id if (force_dynamic and dynamic_dims) else None
    for d in dims:
        dyn_values = [v for v in d.values if v.dynamic]
        if dyn_values and (d.id == forced or rng.random() < DYNAMIC_PROB):
            v = rng.choice(dyn_values)
            out.append(
                Constraint(dimension=d, expected=d.value(v.to_value), kind="dynamic", superseded=d.value(v.from_value))
            )
        else:
            out.append(Constraint(dimension=d, expected=rng.choice(static_values(d))))
    return out


class CueCycle:
    """Which cue reveals a value each time: the value's cues in a shuffled order, in turn, so a
    value revealed several times is said in other words each time."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.orders: dict[str, list[str]] = {}
        self.used: dict[str, int] = {}

    def next(self, value: PreferenceValue) -> str:
        key = value.id
        if key not in self.orders:
            cues = value.all_cues
            self.orders[key] = self.rng.sample(cues, len(cues))
            self.used[key] = 0
        order = self.orders[key]
        cue = order[self.used[key] % len(order)]
        self.used[key] += 1
        return cue


def _reveal(c: Constraint, value: PreferenceValue, cycle: CueCycle, superseded: bool = False) -> Reveal:
    return Reveal(
        dimension=c.dimension.id,
        dimension_name=c.dimension.name,
        value=value.id,
        value_text=value.text,
        cue=cycle.next(value),
        superseded=superseded,
        alternatives=tuple(value.all_cues),
    )


def _groups(rng: random.Random, items: list, n: int) -> list[list]:
    """Split `items` (shuffled) into `n` non-empty groups."""
    items = list(items)
    rng.shuffle(items)
    cuts = sorted(rng.sample(range(1, len(items)), n - 1)) if n > 1 else []
    bounds = [0, *cuts, len(items)]
    return [items[a:b] for a, b in zip(bounds, bounds[1:])]


def plan_instance(
    rng: random.Random,
    *,
    instance_id: str,
    persona_id: str,
    domain: str,
    scenario: Scenario,
    spans: list[StateSpan],
    n_constraints: int,
    n_evidence: int,
    force_dynamic: bool = False,
    force_conflict: bool = False,
) -> InstancePlan:
    """The ground truth of one instance with (about) the given numbers of constraints and
    evidence turns (from Table 2, see iba.construct.count_histograms.allocate). A state-driven dimension always
    counts, and every constraint gets at least one evidence turn, which can raise the numbers."""
    dims = selectable_dimensions(scenario)
    if not dims:
        raise ValueError(f"scenario {scenario.id!r} has no dimension an instance can be scored on (CallAPI needs slot parameters)")
    by_state = state_dimensions(scenario, spans)
    n_constraints = max(min(n_constraints, len(dims)), len(by_state))
    state_ids = {d.id for _, d, _ in by_state}
    others = [d for d in dims if d.id not in state_ids]
    chosen = rng.sample(others, min(len(others), n_constraints - len(by_state)))
    if force_dynamic and not any(d.dynamic for d in chosen):
        dyn = [d for d in others if d.dynamic]
        if dyn:
            chosen = [rng.choice(dyn)] + chosen[1:] if chosen else [rng.choice(dyn)]
    order = {d.id: i for i, d in enumerate(scenario.dimensions)}
    chosen.sort(key=lambda d: order[d.id])

    constraints = _choose_values(rng, chosen, force_dynamic)
    mentions: list[StateMention] = []
    span_of: dict[str, StateSpan] = {}
    for span, d, value in by_state:
        span_of[d.id] = span
        c = Constraint(dimension=d, expected=value, source="state", state=span.state)
        if force_conflict or rng.random() < CONFLICT_PROB:
            c.superseded = rng.choice([v for v in static_values(d) if v.id != value.id])
        constraints.append(c)
        mentions.extend(m for m in span.mentions if m not in mentions)
    constraints.sort(key=lambda c: order[c.dimension.id])

    # Evidence budget: state mentions count; every preference dimension needs >= 1 turn.
    topics = [t for t in scenario.topics] or [""]
    template = rng.choice(scenario.tasks)
    topic = rng.choice(topics)
    past_topics = [t for t in topics if t != topic] or topics
    pref = [c for c in constraints if c.source == "preference"]
    budget = max(n_evidence - len(mentions), 1 if pref else 0)

    items: list[EvidenceItem] = []
    cycle = CueCycle(rng)

    def add(reveals: list[Reveal], signal: str, window: tuple[float, float], before: StateSpan | None = None) -> None:
        position = 2 if signal in ("explicit_revision", "complaint") else rng.choice((0, 2))
        items.append(
            EvidenceItem(
                key=f"{instance_id}/e{len(items)}",
                instance_id=instance_id,
                scenario=scenario,
                topic=rng.choice(past_topics),
                signal_type=signal,
                reveals=reveals,
                position=position,
                window=window,
                before=before,
                recent=window == (0.55, 1.0),
            )
        )

    def window_for(cs: list[Constraint]) -> tuple[float, float]:
        # the new value of a changed preference shows up late, after the old one
        return (0.55, 1.0) if any(c.kind == "dynamic" for c in cs) else (0.0, 1.0)

    if pref:
        if budget >= len(pref):
            counts = {id(c): 1 for c in pref}
            for _ in range(budget - len(pref)):
                counts[id(rng.choice(pref))] += 1
            for c in pref:
                k = counts[id(c)]
                pattern = k >= 2 and rng.random() < PATTERN_PROB
                for _ in range(k):
                    signal = "implicit_pattern" if pattern else weighted_choice(rng, list(STRONG_TYPES), list(STRONG_WEIGHTS))
                    add([_reveal(c, c.expected, cycle)], signal, window_for([c]))
        else:
            for group in _groups(rng, pref, budget):
                group.sort(key=lambda c: order[c.dimension.id])
                signal = weighted_choice(rng, list(SINGLE_TYPES), list(SINGLE_WEIGHTS))
                add([_reveal(c, c.expected, cycle) for c in group], signal, window_for(group))
    # Superseded evidence: the old value of a change (early), a habit a state overrides (before the state).
    for c in constraints:
        if c.superseded is None:
            continue
        signal = weighted_choice(rng, list(SINGLE_TYPES), list(SINGLE_WEIGHTS))
        if c.kind == "dynamic":
            add([_reveal(c, c.superseded, cycle, superseded=True)], signal, (0.0, 0.45))
        else:
            add([_reveal(c, c.superseded, cycle, superseded=True)], signal, (0.0, 1.0), before=span_of[c.dimension.id])

    return InstancePlan(
        instance_id=instance_id,
        persona_id=persona_id,
        domain=domain,
        scenario=scenario,
        query=template.format(topic=topic) if "{topic}" in template else template,
        topic=topic,
        template=template,
        constraints=constraints,
        evidence=items,
        states=mentions,
    )
