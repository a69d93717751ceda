"""Plan one persona: its transient states, its instances' ground truth, its history's sessions.

The plan depends only on (seed, persona, the scenarios assigned to it, the knobs), never on other
personas, so personas can be planned in any order with identical results.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from iba.construct import noise
from iba.construct.ground_truth import plan_instance, plan_states
from iba.construct.history import history_start, layout, now_day, span_days, state_spans
from iba.construct.plan_types import InstancePlan, PersonaPlan, SessionPlan, StateSpan
from iba.construct.rng import derive
from iba.types import Persona, Scenario, Taxonomy

# The exchange that carries an evidence turn or a state mention has four turns; its session is
# padded with filler chat to a length drawn like noise sessions' (see noise.padded_length).
EVIDENCE_SESSION_TURNS = 4
STATE_SESSION_TURNS = 4


@dataclass(frozen=True)
class Knobs:
    seed: int = 42
    noise_ratio: float = 100.0
    history_turns: int | None = None
    force_dynamic: bool = False  # make the persona's first instance with a dynamic dimension use one
    force_state: bool = False  # give the persona an active state if one constrains its scenarios


def instance_id(persona_id: str, scenario_id: str) -> str:
    return f"{persona_id}-{scenario_id}"


def persona_states(persona: Persona, scenarios: list[Scenario], taxonomy: Taxonomy, knobs: Knobs) -> list[StateSpan]:
    """The persona's transient states (decided first: they set minimum counts of its instances)."""
    return plan_states(derive(knobs.seed, persona.id, "states"), persona.id, scenarios, taxonomy.states, force_active=knobs.force_state)


def plan_persona(
    persona: Persona,
    scenarios: list[Scenario],
    taxonomy: Taxonomy,
    knobs: Knobs,
    counts: dict[str, tuple[int, int]],
    spans: list[StateSpan],
) -> PersonaPlan:
    """Plan `persona` with one instance per scenario; `counts` maps instance id to its target
    (number of constraints, number of evidence turns)."""
    seed = knobs.seed
    domain_of = {s.id: d.id for d in taxonomy.domains for s in d.scenarios}
    instances: list[InstancePlan] = []
    dynamic_done = False
    for scenario in scenarios:
        iid = instance_id(persona.id, scenario.id)
        want_dynamic = knobs.force_dynamic and not dynamic_done and any(d.dynamic for d in scenario.dimensions)
        inst = plan_instance(
            derive(seed, iid, "truth"),
            instance_id=iid,
            persona_id=persona.id,
            domain=domain_of[scenario.id],
            scenario=scenario,
            spans=spans,
            n_constraints=counts[iid][0],
            n_evidence=counts[iid][1],
            force_dynamic=want_dynamic,
            force_conflict=knobs.force_state,
        )
        dynamic_done = dynamic_done or any(c.kind == "dynamic" for c in inst.constraints)
        instances.append(inst)

    sessions: list[SessionPlan] = []
    pad_rng = derive(seed, persona.id, "pad")
    deck = noise.TopicDeck(derive(seed, persona.id, "topics"))

    def padded(key: str, kind: str, core: int, item) -> SessionPlan:
        n, offset = noise.padded_length(pad_rng, core)
        return SessionPlan(key=key, kind=kind, n_turns=n, item=item, offset=offset, noise=deck.deal())  # type: ignore[arg-type]

    for inst in instances:
        for item in inst.evidence:
            sessions.append(padded(item.key, "evidence", EVIDENCE_SESSION_TURNS, item))
    for span in spans:
        for m in span.mentions:
            sessions.append(padded(m.key, "state", STATE_SESSION_TURNS, m))
    relevant = sum(s.labelled is not None for s in sessions)
    rng = derive(seed, persona.id, "noise")
    fixed_turns = sum(s.n_turns for s in sessions)
    for k, n in enumerate(noise.session_lengths(rng, noise.noise_turns(knobs.noise_ratio, relevant, fixed_turns, knobs.history_turns))):
        sessions.append(SessionPlan(key=f"{persona.id}/noise/{k}", kind="noise", n_turns=n, noise=deck.deal()))

    time_rng = derive(seed, persona.id, "time")
    plan = PersonaPlan(
        persona=persona,
        instances=instances,
        spans=spans,
        sessions=sessions,
        start=history_start(time_rng),
        span_days=span_days(len(sessions), spans),
    )
    layout(time_rng, plan)
    # Task times: the morning after the last history day, minutes apart, all before the next
    # midnight (active states last at least until then).
    t = now_day(plan) + timedelta(hours=time_rng.randint(8, 10), minutes=time_rng.randrange(60))
    gap = max(1, min(30, (13 * 60) // max(1, len(instances))))
    for inst in instances:
        inst.now = t
        t += timedelta(minutes=time_rng.randint(1, gap))
    plan.persona = persona.model_copy(update={"states": state_spans(plan)})
    return plan
