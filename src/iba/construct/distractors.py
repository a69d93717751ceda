"""Distractor preferences: preference-shaped user turns that no task of the user depends on.

Real histories hold a lot of preference talk that a given task does not ask about: tastes in other
areas of life, other people's, old ones, hypotheticals. Without it, any preference-shaped turn is
evidence, and a bag of words finds the evidence (the tell audit, iba.construct.tell_audit).
Distractors are rendered by the evidence machinery (signal-type wrappers, connectors, anchors,
stories; cues of the same taxonomy), so only their meaning tells them apart: what they are about,
whose they are, and when.

The answer key stays true (data/related/facets.yaml says which dimensions a reader could take for
one another):
- own_other_topic, ended, hypothetical (the user's own voice): a dimension of a scenario the persona
  has no task in, sharing no `generic` facet with any dimension of a task scenario; one sharing an
  `anchored` facet or its id with one is voiced only in a turn that names its scenario. The persona
  holds one value per such dimension for the whole history; an ended preference names another value.
- other_person: the same pool and rules, any value: a past task the user did for someone else
  ("It's for my sister this time"), and that person's preference in the reaction. The reaction alone
  reads like the user's own, so only the conversation says whose it is, and a reader of the turn
  alone could still not take it for a task's preference.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from itertools import accumulate

import yaml

from iba.construct import evidence_bank as bank
from iba.construct.ground_truth import static_values
from iba.construct.plan_types import DistractorItem, InstancePlan, PersonaPlan, Reveal, SessionPlan
from iba.construct.rng import ChangingWeights, weighted_choice
from iba.types import Dimension, PreferenceValue, Scenario, Taxonomy

# Distractor turns per labelled turn of the persona (the floor is 5 per evidence turn).
DISTRACTORS_PER_LABELLED = 7
FORMS = ("own_other_topic", "other_person", "ended", "hypothetical")
FORM_WEIGHTS = (0.56, 0.38, 0.04, 0.02)
# Dimensions a persona voices its own distractor preferences on: one per this many own-voice turns,
# within bounds, so each is revealed a few times, like the real ones.
TURNS_PER_OWN_DIMENSION = 4
OWN_DIMENSIONS = (6, 36)
SIGNAL_TYPES = ("explicit_revision", "complaint", "direct_statement", "implicit_pattern")
TOLD = ("direct_statement", "implicit_pattern")  # the signal types a preference told in passing takes

Key = tuple[str, str]  # (scenario id, dimension id)


@dataclass(frozen=True)
class Facets:
    generic: dict[str, frozenset[str]]
    anchored: dict[str, frozenset[str]]


@cache
def facets() -> Facets:
    text = resources.files("iba.construct").joinpath("data/related/facets.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text) or {}
    return Facets(
        generic={k: frozenset(v) for k, v in (data.get("generic") or {}).items()},
        anchored={k: frozenset(v) for k, v in (data.get("anchored") or {}).items()},
    )


def _dotted(k: Key) -> str:
    return f"{k[0]}.{k[1]}"


def _share(groups: dict[str, frozenset[str]], a: Key, b: Key) -> bool:
    da, db = _dotted(a), _dotted(b)
    return any(da in members and db in members for members in groups.values())


def generic_related(a: Key, b: Key) -> bool:
    """A preference on `a` in the user's own voice could be taken for one on `b`, whatever the turn says."""
    return a[0] == b[0] or _share(facets().generic, a, b)


def anchored_related(a: Key, b: Key) -> bool:
    """A preference on `a` could be taken for one on `b` unless the turn names its scenario."""
    return a[1] == b[1] or _share(facets().anchored, a, b)


@cache
def _groups_of(kind: str) -> dict[str, frozenset[str]]:
    """Dotted dimension key -> the names of the `kind` ("generic" or "anchored") facets it is in."""
    out: dict[str, set[str]] = {}
    for name, members in getattr(facets(), kind).items():
        for m in members:
            out.setdefault(m, set()).add(name)
    return {k: frozenset(v) for k, v in out.items()}


def own_pool(taxonomy: Taxonomy, task_scenarios: list[Scenario]) -> list[tuple[Scenario, Dimension, bool]]:
    """(scenario, dimension, must be anchored) a persona with these task scenarios may voice as its own.

    The same test as generic_related / anchored_related against every task dimension, done with
    the facets each key is in (the full build asks this ~7 million times pairwise)."""
    tasks = {s.id for s in task_scenarios}
    generic, anchored = _groups_of("generic"), _groups_of("anchored")
    none: frozenset[str] = frozenset()
    taken_generic: set[str] = set()
    taken_anchored: set[str] = set()
    taken_dims: set[str] = set()
    for s in task_scenarios:
        for d in s.dimensions:
            dotted = f"{s.id}.{d.id}"
            taken_generic |= generic.get(dotted, none)
            taken_anchored |= anchored.get(dotted, none)
            taken_dims.add(d.id)
    out = []
    for s in taxonomy.scenarios():
        if s.id in tasks:
            continue  # generic_related: the same scenario as a task's
        for d in s.dimensions:
            dotted = f"{s.id}.{d.id}"
            if not taken_generic.isdisjoint(generic.get(dotted, none)):
                continue
            out.append((s, d, d.id in taken_dims or not taken_anchored.isdisjoint(anchored.get(dotted, none))))
    return out


def _reveal(rng: random.Random, dim: Dimension, value: PreferenceValue) -> Reveal:
    return Reveal(dimension=dim.id, dimension_name=dim.name, value=value.id, value_text=value.text, cue=rng.choice(value.all_cues),
                  alternatives=tuple(value.all_cues))


@dataclass(frozen=True)
class Profile:
    """What the evidence of a whole build looks like, for distractors to look the same: how often
    each (scenario, dimension) is revealed, in how many personas' own-voice pools it is, the mix of
    signal types, and how many preferences a turn carries. A distractor drawn from this profile
    differs from evidence in meaning only, not in which cue words or frames it uses."""

    reveals: dict[Key, int]
    available: dict[Key, int]
    signals: dict[str, int]
    bundles: dict[int, int]
    recent_share: float = 0.0  # evidence items that reveal a changed preference's new value

    def own_weight(self, k: Key) -> float:
        return self.reveals.get(k, 0) / self.available[k] if self.available.get(k) else 0.0


def _sum(a: Counter, b: Counter) -> Counter:
    """a + b keeping zero counts (Counter's + drops them)."""
    out = Counter(a)
    out.update(b)
    return out


@dataclass
class ProfileCounts:
    """The counts behind a Profile, for some of a build's personas: the counts of two groups of
    personas add up to those of all of them (a build split over processes adds its parts)."""

    reveals: Counter[Key] = field(default_factory=Counter)
    available: Counter[Key] = field(default_factory=Counter)
    signals: Counter[str] = field(default_factory=Counter)
    bundles: Counter[int] = field(default_factory=Counter)
    recent: int = 0
    items: int = 0

    def __add__(self, other: ProfileCounts) -> ProfileCounts:
        return ProfileCounts(_sum(self.reveals, other.reveals), _sum(self.available, other.available),
                             _sum(self.signals, other.signals), _sum(self.bundles, other.bundles),
                             self.recent + other.recent, self.items + other.items)

    def profile(self) -> Profile:
        return Profile(dict(self.reveals), dict(self.available), dict(self.signals), dict(self.bundles),
                       self.recent / self.items if self.items else 0.0)


def profile_counts(plans: list[PersonaPlan], taxonomy: Taxonomy) -> ProfileCounts:
    """The evidence profile's counts over `plans`."""
    c = ProfileCounts()
    for p in plans:
        for inst in p.instances:
            for item in inst.evidence:
                c.items += 1
                c.recent += item.recent
                c.signals[item.signal_type] += 1
                c.bundles[len(item.reveals)] += 1
                for r in item.reveals:
                    c.reveals[(inst.scenario.id, r.dimension)] += 1
        tasks = list({i.scenario.id: i.scenario for i in p.instances}.values())
        for s, d, _ in own_pool(taxonomy, tasks):
            c.available[(s.id, d.id)] += 1
    return c


def profile(plans: list[PersonaPlan], taxonomy: Taxonomy) -> Profile:
    """The evidence profile of `plans` (PersonaPlans of one build)."""
    return profile_counts(plans, taxonomy).profile()


def _weighted_sample(rng: random.Random, items: list, weights: list[float], k: int) -> list:
    """`k` distinct items, each drawn with probability proportional to its weight among those left
    (Efraimidis-Spirakis keys); items of weight 0 only after all others."""
    keyed = [((rng.random() ** (1.0 / w)) if w > 0 else -rng.random(), i) for i, w in enumerate(weights)]
    keyed.sort(reverse=True)
    return [items[i] for _, i in keyed[:k]]


def plan_distractors(
    rng: random.Random, persona_id: str, instances: list[InstancePlan], taxonomy: Taxonomy, n_labelled: int, prof: Profile
) -> list[DistractorItem]:
    """The persona's distractor turns: DISTRACTORS_PER_LABELLED per labelled turn of its history,
    with the build's evidence profile (which dimensions, signal types, bundle sizes)."""
    n = DISTRACTORS_PER_LABELLED * n_labelled
    if n == 0:
        return []
    tasks = list({i.scenario.id: i.scenario for i in instances}.values())
    pool = own_pool(taxonomy, tasks)
    if not pool:  # every dimension is related to a task's: no preference talk is safe
        return []
    forms = [weighted_choice(rng, list(FORMS), list(FORM_WEIGHTS)) for _ in range(n)]
    own_turns = sum(f != "other_person" for f in forms)
    k = min(len(pool), max(OWN_DIMENSIONS[0], min(OWN_DIMENSIONS[1], round(own_turns / TURNS_PER_OWN_DIMENSION))))
    # whole scenarios at a time (by the summed weight of their dimensions), so that a turn can carry
    # several of one scenario's preferences, as evidence turns do
    scen_dims: dict[str, list[tuple[Scenario, Dimension, bool]]] = {}
    for m in pool:
        scen_dims.setdefault(m[0].id, []).append(m)
    names = sorted(scen_dims)
    order = _weighted_sample(rng, names, [sum(prof.own_weight((m[0].id, m[1].id)) for m in scen_dims[n]) for n in names], len(names))
    own: list[tuple[Scenario, Dimension, bool]] = []
    for name in order:
        if len(own) >= k:
            break
        own += scen_dims[name]
    own.sort(key=lambda x: (x[0].id, x[1].id))
    own_w = [prof.own_weight((s.id, d.id)) or 1e-3 for s, d, _ in own]
    held = {(s.id, d.id): rng.choice(static_values(d)) for s, d, _ in own}
    by_scenario: dict[str, list[tuple[Scenario, Dimension, bool]]] = {}
    for s, d, anchored in own:
        by_scenario.setdefault(s.id, []).append((s, d, anchored))
    # other people's preferences come from the same pool: the turn itself does not say whose it is
    # (the request that opens the exchange does), so a reader of the turn alone must not be able to
    # take it for a task's
    other_w = [prof.own_weight((s.id, d.id)) or 1e-3 for s, d, _ in pool]
    signal_types = sorted(prof.signals) or list(SIGNAL_TYPES)
    signal_w = [prof.signals.get(t, 1) for t in signal_types]
    sizes = sorted(prof.bundles) or [1]
    size_w = [prof.bundles.get(b, 1) for b in sizes]

    told_types = [t for t in signal_types if t in TOLD]
    told_w = [prof.signals.get(t, 1) for t in told_types]

    def told() -> str:
        # someone else's, ended and hypothetical preferences are told, not reacted with
        return weighted_choice(rng, told_types, told_w) if told_types else "direct_statement"

    # running sums of the long weight lists, once (rng.choices with cum_weights draws the same)
    other_cum, own_cum = list(accumulate(other_w)), list(accumulate(own_w))
    items: list[DistractorItem] = []
    for j, form in enumerate(forms):
        key = f"{persona_id}/distractor/{j}"
        if form == "other_person":  # a past task done for someone else, and their preference
            s, d, anchored = rng.choices(pool, cum_weights=other_cum, k=1)[0]
            signal = weighted_choice(rng, signal_types, signal_w)
            mates = [m for m in scen_dims[s.id] if m[1].id != d.id]
            size = min(len(mates) + 1, weighted_choice(rng, sizes, size_w))
            group = [(s, d, anchored)] + rng.sample(mates, size - 1)
            group.sort(key=lambda m: [x.id for x in s.dimensions].index(m[1].id))
            # the preference turn reads like any other; a turn of its own (the request at position 2,
            # the user's answer to the draft at position 0) says whose it is
            items.append(DistractorItem(
                key=key, form=form, scenario=s, reveals=[_reveal(rng, gd, rng.choice(static_values(gd))) for _, gd, _ in group],
                signal_type=signal, position=_position(rng, signal), topic=rng.choice(list(s.topics) or [""]),
                person=bank.person(rng.choice(sorted(bank.PEOPLE))), anchored=any(a for _, _, a in group),
                recent=rng.random() < prof.recent_share,
            ))
            continue
        s, d, anchored = rng.choices(own, cum_weights=own_cum, k=1)[0]
        value = held[(s.id, d.id)]
        if form == "ended":
            others = [v for v in static_values(d) if v.id != value.id]
            items.append(DistractorItem(
                key=key, form=form, scenario=s, reveals=[_reveal(rng, d, rng.choice(others))], signal_type=told(),
                position=0, topic="", anchored=anchored,
            ))
        elif form == "hypothetical":
            items.append(DistractorItem(
                key=key, form=form, scenario=s, reveals=[_reveal(rng, d, value)], signal_type=told(),
                position=0, topic="", anchored=True,
            ))
        else:  # own_other_topic: an evidence-like exchange about a past task of another scenario
            signal = weighted_choice(rng, signal_types, signal_w)
            mates = by_scenario[s.id]
            size = min(len(mates), weighted_choice(rng, sizes, size_w))
            group = [(s, d, anchored)] + rng.sample([m for m in mates if m[1].id != d.id], size - 1)
            group.sort(key=lambda m: [x.id for x in s.dimensions].index(m[1].id))
            reveals = [_reveal(rng, gd, held[(s.id, gd.id)]) for _, gd, _ in group]
            items.append(DistractorItem(
                key=key, form=form, scenario=s, reveals=reveals, signal_type=signal, position=_position(rng, signal),
                topic=rng.choice(list(s.topics) or [""]), anchored=any(a for _, _, a in group),
                recent=rng.random() < prof.recent_share,
            ))
    return items


def _position(rng: random.Random, signal: str) -> int:
    """Where the preference turn sits in its four-turn exchange (as evidence does)."""
    return 2 if signal in ("explicit_revision", "complaint") else rng.choice((0, 2))


def exchange_size(item: DistractorItem) -> int:
    """Turns of the exchange a distractor turn sits in: an evidence-like exchange, or a turn and a reply."""
    return 4 if item.form in ("own_other_topic", "other_person") else 2


def _core(s: SessionPlan) -> tuple[int, int] | None:
    """The turns of a session taken by its evidence or state exchange, [start, end)."""
    if s.kind == "noise" or s.item is None:
        return None
    return s.offset, s.offset + 4


def place(rng: random.Random, sessions: list[SessionPlan], items: list[DistractorItem]) -> int:
    """Put each distractor exchange into the filler of some session (any kind), in place.

    A session's free stretches are the even-aligned turns outside its core and earlier placements;
    a host is drawn with weight equal to its free turns, then a start uniformly among its free slots,
    so distractors spread over the history like the noise they sit in. Returns how many found no
    room and were left out (only when a history is far shorter than its labelled turns need, e.g.
    a tiny --history-turns; never at the presets' noise ratios).
    """
    free: list[set[int]] = []
    for s in sessions:
        core = _core(s)
        free.append(set(range(s.n_turns)) - (set(range(*core)) if core else set()))

    def starts(j: int, size: int) -> list[int]:
        f, n = free[j], sessions[j].n_turns
        if size == 2:
            return [a for a in range(0, n - 1, 2) if a in f and a + 1 in f]
        if size == 4:
            return [a for a in range(0, n - 3, 2) if a in f and a + 1 in f and a + 2 in f and a + 3 in f]
        return [a for a in range(0, n - size + 1, 2) if all(a + i in f for i in range(size))]

    slots = {size: [starts(j, size) for j in range(len(sessions))] for size in (2, 4)}
    # each session's number of free starts, kept up to date: the draw's weights (drawn as
    # rng.choices draws, without summing ~300 weights again for each of ~340 distractors)
    weights = {size: ChangingWeights([len(x) for x in slots[size]]) for size in (2, 4)}
    dropped = 0
    for item in items:
        size = exchange_size(item)
        if weights[size].total <= 0:
            dropped += 1
            continue
        j = weights[size].draw(rng)
        start = rng.choice(slots[size][j])
        free[j] -= set(range(start, start + size))
        for sz in (2, 4):
            slots[sz][j] = starts(j, sz)
            weights[sz].set(j, len(slots[sz][j]))
        sessions[j].distractors.append((start, item))
    for s in sessions:
        s.distractors.sort(key=lambda x: x[0])
    return dropped


def add_distractors(seed: int, plans: list[PersonaPlan], taxonomy: Taxonomy, prof: Profile | None = None) -> None:
    """Plan every persona's distractors (with the build's evidence profile `prof`, by default that
    of `plans`), place them in its sessions' filler and give each its turn id and time (the
    sessions are laid out already; the history's length does not change)."""
    from iba.construct.history import turn_id
    from iba.construct.rng import derive

    if prof is None:
        prof = profile(plans, taxonomy)
    for p in plans:
        rng = derive(seed, p.persona.id, "distractors")
        items = plan_distractors(rng, p.persona.id, p.instances, taxonomy, p.n_relevant, prof)
        place(rng, p.sessions, items)
        for s in p.sessions:
            for k, d in s.distractor_turns():
                d.turn_id, d.timestamp = turn_id(p.persona.id, s.index, k), s.turn_time(k)


@dataclass
class AnchorCounts:
    """Evidence items and anchored distractor exchanges per scenario, for some of a build's personas
    (counts of two groups add up)."""

    evidence: Counter[str] = field(default_factory=Counter)
    named: Counter[str] = field(default_factory=Counter)
    exchanges: int = 0

    def __add__(self, other: AnchorCounts) -> AnchorCounts:
        return AnchorCounts(_sum(self.evidence, other.evidence), _sum(self.named, other.named), self.exchanges + other.exchanges)

    def rates(self) -> dict[str, float]:
        """How often an evidence turn of each scenario names its scenario, so that naming one tells
        evidence from distractors no better than chance: a scenario whose distractors must name it n
        times gets its evidence named so that names and turns keep the build's evidence-to-distractor
        ratio (at most always). Distractors that need not name their scenario never do."""
        total = sum(self.evidence.values())
        if not self.exchanges or not total:
            return {}
        ratio = total / self.exchanges
        return {sid: round(min(1.0, ratio * self.named[sid] / n), 4) for sid, n in sorted(self.evidence.items()) if n}


def anchor_counts(plans: list[PersonaPlan]) -> AnchorCounts:
    c = AnchorCounts()
    for p in plans:
        for inst in p.instances:
            c.evidence[inst.scenario.id] += len(inst.evidence)
        for s in p.sessions:
            for _, d in s.distractors:
                if d.form in ("own_other_topic", "other_person"):
                    c.exchanges += 1
                    c.named[d.scenario.id] += d.anchored
    return c
