"""`build_dataset`: plan the ground truth, write the text, save the dataset and its statistics.

Ground truth first, text second: every persona is planned (states, instances, evidence, session
layout) before a writer turns sessions into text, so the procedural and the LLM writer give the
same answer key for the same seed. The procedural build is byte-identical for a seed.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from iba import __version__
from iba.construct import distractors as distractors_mod
from iba.construct import count_histograms, evidence_bank, ground_truth
from iba.construct.history import iter_turns
from iba.construct.personas import make_personas
from iba.construct.plan_types import PersonaPlan, SessionPlan, StateSpan
from iba.construct.planner import Knobs, instance_id, persona_states, plan_persona
from iba.construct.presets import Preset, get_preset
from iba.construct.procedural_writer import ProceduralWriter
from iba.construct.rng import derive
from iba.construct.stats import write_stats
from iba.construct.tasks import answer_key, distractor_label, task_view
from iba.dataset import write_dataset
from iba.llm.base import Backend
from iba.types import Manifest, Persona, Scenario, Taxonomy, Turn

TextFn = Callable[[PersonaPlan, SessionPlan], list[str]]
# 1: the first procedural writer; 2: distractor preferences, noise topics with content, a sentence
# budget, evidence spans, varied evidence forms (issue 24)
GENERATOR_VERSION = 2


def assign_instances(scenarios: list[Scenario], preset: Preset, n_personas: int, seed: int) -> list[list[Scenario]]:
    """Scenarios of each persona. A scenario's instances go to distinct personas, least loaded first."""
    rng = derive(seed, "assign")
    load = [0] * n_personas
    out: list[list[Scenario]] = [[] for _ in range(n_personas)]
    for s in scenarios:
        k = min(preset.instance_count(s), n_personas)
        order = sorted(range(n_personas), key=lambda i: (load[i], rng.random()))
        for i in order[:k]:
            load[i] += 1
            out[i].append(s)
    return out


def plan_dataset(
    taxonomy: Taxonomy, preset: Preset, *, seed: int, noise_ratio: float, history_turns: int | None, personas: int | None,
    distractors: bool = True,
) -> list[PersonaPlan]:
    scenarios = preset.select(taxonomy)
    n = personas or preset.personas or len(scenarios)
    people = make_personas(n, seed)
    assigned = assign_instances(scenarios, preset, n, seed)
    state_scenarios = {c.scenario for st in taxonomy.states for c in st.constrains}
    need_dynamic = need_state = preset.force_examples
    work = []
    for person, scen in zip(people, assigned):
        if not scen:
            continue  # more personas than instances: personas without a task are left out
        force_dynamic = need_dynamic and any(d.dynamic for s in scen for d in ground_truth.selectable_dimensions(s))
        force_state = need_state and any(s.id in state_scenarios for s in scen)
        need_dynamic &= not force_dynamic
        need_state &= not force_state
        knobs = Knobs(seed=seed, noise_ratio=noise_ratio, history_turns=history_turns, force_dynamic=force_dynamic, force_state=force_state)
        work.append((person, scen, knobs, persona_states(person, scen, taxonomy, knobs)))
    counts = table2_counts(taxonomy, [(p, scen, spans) for p, scen, _, spans in work], seed)
    plans = [plan_persona(p, scen, taxonomy, knobs, counts, spans) for p, scen, knobs, spans in work]
    if distractors:  # after all personas: distractors follow the whole build's evidence profile
        distractors_mod.add_distractors(seed, plans, taxonomy)
    return plans


def table2_counts(
    taxonomy: Taxonomy, people: list[tuple[Persona, list[Scenario], list[StateSpan]]], seed: int
) -> dict[str, tuple[int, int]]:
    """Instance id -> (constraints, evidence turns), allocated per domain in Table 2's proportions.

    Minimums: a state-driven dimension is always a constraint, and its state's mentions are
    evidence on top of at least one turn for the other constraints.
    """
    domain_of = {s.id: d.id for d in taxonomy.domains for s in d.scenarios}
    by_domain: dict[str, list[tuple[str, Scenario, int, int]]] = {}
    for person, scen, spans in people:
        for s in scen:
            by_state = ground_truth.state_dimensions(s, spans)
            mentions = {id(m) for span, _, _ in by_state for m in span.mentions}
            item = (instance_id(person.id, s.id), s, len(by_state), len(mentions))
            by_domain.setdefault(domain_of[s.id], []).append(item)
    out: dict[str, tuple[int, int]] = {}
    for dom in sorted(by_domain):
        items = by_domain[dom]
        rng = derive(seed, "table2", dom)
        caps = [len(ground_truth.selectable_dimensions(s)) for _, s, _, _ in items]
        n_con = count_histograms.allocate(rng, count_histograms.row(count_histograms.CONSTRAINTS_HIST, dom), caps, [max(1, k) for _, _, k, _ in items])  # type: ignore[arg-type]
        ev_mins = [max(1, m + (1 if c > k else 0)) for (_, _, k, m), c in zip(items, n_con)]
        n_ev = count_histograms.allocate(rng, count_histograms.row(count_histograms.EVIDENCE_HIST, dom), [None] * len(items), ev_mins)
        for (iid, _, _, _), c, e in zip(items, n_con, n_ev):
            out[iid] = (c, e)
    return out


class _LazyHistory:
    """A persona's turns, written only when iterated (the full build never holds all histories)."""

    def __init__(self, plan: PersonaPlan, texts: TextFn, on_done: Callable[[], None]) -> None:
        self.plan, self.texts, self.on_done = plan, texts, on_done

    def __iter__(self) -> Iterator[Turn]:
        yield from iter_turns(self.plan, lambda s: self.texts(self.plan, s))
        self.on_done()


def build_dataset(
    out_dir: str | Path,
    *,
    preset: str | Preset = "demo",
    seed: int = 42,
    writer: str = "procedural",
    backend: Backend | None = None,
    noise_ratio: float | None = None,
    history_turns: int | None = None,
    personas: int | None = None,
    progress: bool = True,
    taxonomy: Taxonomy | None = None,
    max_rewrites: int = 2,
    concurrency: int = 4,
    distractors_on: bool = True,
    llm_scope: str = "all",
    batch: str | Path | None = None,
) -> Manifest:
    """Build an IBA-Bench dataset into `out_dir` and return its manifest.

    noise_ratio: turns per relevant turn (None: the preset's, 100 except demo's 50).
    history_turns: instead, the length of every history (evidence sessions are always kept).
    personas: override the preset's number of personas. writer="llm" needs `backend`.
    distractors_on: False leaves distractor preferences out (to measure what they change).
    llm_scope, batch: the llm writer's scope and batch folder (iba.construct.llm_writer); a batch
    build raises llm_writer.BatchPending, and writes no dataset, while calls await answers.
    """
    from tqdm import tqdm

    if taxonomy is None:
        from iba.taxonomy import load_taxonomy

        taxonomy = load_taxonomy()
    pre = preset if isinstance(preset, Preset) else get_preset(preset)
    ratio = pre.noise_ratio if noise_ratio is None else float(noise_ratio)
    if ratio < 1:
        raise ValueError(f"noise ratio must be >= 1 (turns per relevant turn), got {ratio}")
    if history_turns is not None and history_turns < 1:
        raise ValueError(f"--history-turns must be positive, got {history_turns}")
    out = Path(out_dir)
    plans = plan_dataset(taxonomy, pre, seed=seed, noise_ratio=ratio, history_turns=history_turns, personas=personas,
                         distractors=distractors_on)

    anchor_rates = distractors_mod.anchor_rates(plans)
    params: dict[str, Any] = {
        "preset": pre.name,
        "noise_ratio": ratio,
        "history_turns": history_turns,
        "scenarios": sorted({i.scenario.id for p in plans for i in p.instances}),
        "dynamic_prob": ground_truth.DYNAMIC_PROB,
        "state_active_prob": ground_truth.STATE_ACTIVE_PROB,
        # the construction's version: figures measured on a build say which one (README, BENCHMARKS)
        "generator_version": GENERATOR_VERSION,
        "distractors_per_labelled_turn": distractors_mod.DISTRACTORS_PER_LABELLED if distractors_on else 0,
        "evidence_anchor_rates": anchor_rates if distractors_on else evidence_bank.ANCHOR_PROB,
    }
    if writer == "procedural":
        proc = ProceduralWriter(seed, anchor_rates=anchor_rates if distractors_on else None)
        texts: TextFn = proc.texts
        spans = proc.spans  # filled while the histories are written; read after (keys are lazy)
    elif writer == "llm":
        if backend is None:
            raise ValueError("the llm writer needs a model: pass --model (and --base-url for an openai: server)")
        from iba.construct.llm_writer import LLMWriter

        llm = LLMWriter(backend, out, seed=seed, max_rewrites=max_rewrites, concurrency=concurrency, progress=progress,
                        scope=llm_scope, batch=batch, anchor_rates=anchor_rates if distractors_on else None)
        texts = llm.write_all(plans)
        params.update(llm.manifest_params())
        spans = llm.spans  # where each clause was found in its turn (none where it was not)
    else:
        raise ValueError(f"unknown writer {writer!r}; choose procedural or llm")

    manifest = Manifest(
        name=f"iba-bench-{pre.name}",
        generator="iba.construct",
        writer=writer,
        seed=seed,
        taxonomy_version=taxonomy.version,
        created_by=f"iba {__version__}",
        counts={
            "personas": len(plans),
            "instances": sum(len(p.instances) for p in plans),
            "sessions": sum(len(p.sessions) for p in plans),
            "turns": sum(p.n_turns for p in plans),
            "relevant_turns": sum(p.n_relevant for p in plans),
            "distractor_turns": sum(len(s.distractors) for p in plans for s in p.sessions),
        },
        params=params,
    )
    instances = [i for p in plans for i in p.instances]
    bar = tqdm(total=len(plans), desc="writing histories", unit="persona", disable=not progress)
    histories = {p.persona.id: _LazyHistory(p, texts, lambda: bar.update(1)) for p in plans}
    _remove_stale_histories(out, set(histories))
    write_dataset(
        out,
        manifest,
        [p.persona for p in plans],
        histories,  # type: ignore[arg-type]  # iterables of turns, written one persona at a time
        [task_view(i) for i in instances],
        # generators: consumed after the histories are written, when the writer knows the spans
        (answer_key(i, seed, spans) for i in instances),
        (lab for p in plans for s in p.sessions for _, d in s.distractors for lab in distractor_label(p.persona.id, d, spans))
        if distractors_on else None,
    )
    bar.close()
    # the plans and the writer's spans are done with: free them before the statistics (the tell
    # audit) read the dataset back, so the full build's peak is one of the two, not their sum
    del plans, instances, histories, texts, spans
    if writer == "procedural":
        del proc
    gc.collect()
    _release_free_memory()
    write_stats(out, taxonomy)
    return manifest


def _release_free_memory() -> None:
    """Hand freed heap pages back to the OS (glibc keeps them otherwise), so the statistics that
    follow do not stack on the writer's high-water mark. A no-op where there is no glibc."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _remove_stale_histories(out: Path, keep: set[str]) -> None:
    """A rebuild into the same folder must not leave histories of personas it no longer has."""
    hist = out / "histories"
    if hist.is_dir():
        for f in hist.glob("*.jsonl"):
            if f.stem not in keep:
                f.unlink()
