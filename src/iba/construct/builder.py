"""`build_dataset`: plan the ground truth, write the text, save the dataset and its statistics.

Ground truth first, text second: every persona is planned (states, instances, evidence, session
layout) before a writer turns sessions into text, so the procedural and the LLM writer give the
same answer key for the same seed. The procedural build is byte-identical for a seed, whatever
the number of worker processes that plan and write its personas (iba.construct.workers).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iba import __version__
from iba.construct import distractors as distractors_mod
from iba.construct import count_histograms, evidence_bank, ground_truth
from iba.construct.history import history_lines
from iba.construct.memory import release_free_memory
from iba.construct.personas import make_personas
from iba.construct.plan_types import PersonaPlan, SessionPlan, StateSpan
from iba.construct.planner import Knobs, instance_id, persona_states, plan_persona
from iba.construct.presets import Preset, get_preset
from iba.construct.procedural_writer import ProceduralWriter
from iba.construct.rng import derive
from iba.construct.stats import write_stats
from iba.construct.tasks import answer_key, distractor_label, task_view
from iba.construct.workers import Shard, can_fork, default_workers, run_shards
from iba.dataset import atomic_write_text, write_jsonl
from iba.llm.base import Backend
from iba.types import Manifest, Persona, PersonaStates, Scenario, Taxonomy

TextFn = Callable[[PersonaPlan, SessionPlan], list[str]]
# 1: the first procedural writer; 2: distractor preferences, noise topics with content, a sentence
# budget, evidence spans, varied evidence forms (issue 24); 3: coherent exchanges, an answer to the
# question asked, one topic through a session, few asides (issue 32, iba.construct.coherent)
GENERATOR_VERSION = 3
GENERATOR_VERSIONS = (2, 3)  # what `build_dataset(generator=...)` builds


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


Work = tuple[Persona, list[Scenario], Knobs, list[StateSpan]]  # a persona, its scenarios, knobs and states


def plan_work(
    taxonomy: Taxonomy, preset: Preset, *, seed: int, noise_ratio: float, history_turns: int | None, personas: int | None,
) -> tuple[list[Work], dict[str, tuple[int, int]]]:
    """The build's personas with their scenarios, knobs and states, and Table 2's targets per
    instance: what planning each persona needs from the whole build."""
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
    return work, counts


def plan_dataset(
    taxonomy: Taxonomy, preset: Preset, *, seed: int, noise_ratio: float, history_turns: int | None, personas: int | None,
    distractors: bool = True,
) -> list[PersonaPlan]:
    """Every persona's plan, in one process (build_dataset plans its shards' personas in each)."""
    work, counts = plan_work(taxonomy, preset, seed=seed, noise_ratio=noise_ratio, history_turns=history_turns, personas=personas)
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


@dataclass
class _Job:
    """What every shard of a build shares (a forked worker inherits it; nothing here is pickled)."""

    out: Path
    taxonomy: Taxonomy
    seed: int
    counts: dict[str, tuple[int, int]]
    distractors: bool
    writer: str
    parts: Path  # the shards' parts of the dataset's files, joined in shard order at the end
    backend: Backend | None = None
    max_rewrites: int = 2
    concurrency: int = 4
    progress: bool = True
    generator: int = GENERATOR_VERSION
    llm_scope: str = "all"
    batch: str | Path | None = None


@dataclass
class _ShardOut:
    """What a shard wrote (its histories in place, its part of each other file) and its counts."""

    files: dict[str, Path]
    counts: dict[str, int]
    scenarios: set[str]
    anchor_rates: dict[str, float] | None
    params: dict[str, Any] = field(default_factory=dict)
    with_states: int = 0  # personas with transient states


def _shard(job: _Job, index: int, work: list[Work], progress: Callable[[int], None]) -> Shard:
    """Plan, write and label the personas of `work` (see iba.construct.workers: the yields are the
    points where the shards agree on the whole build's evidence profile and anchor rates)."""
    seed, taxonomy = job.seed, job.taxonomy
    plans = [plan_persona(p, scen, taxonomy, knobs, job.counts, spans) for p, scen, knobs, spans in work]
    rates = None
    if job.distractors:  # after all personas: distractors follow the whole build's evidence profile
        prof = yield distractors_mod.profile_counts(plans, taxonomy), distractors_mod.ProfileCounts.profile
        distractors_mod.add_distractors(seed, plans, taxonomy, prof)
        rates = yield distractors_mod.anchor_counts(plans), distractors_mod.AnchorCounts.rates
    params: dict[str, Any] = {}
    if job.writer == "procedural":
        proc = ProceduralWriter(seed, anchor_rates=rates, version=job.generator)
        texts: TextFn = proc.texts
        spans = proc.spans  # filled while the histories are written, read after
    else:
        from iba.construct.llm_writer import LLMWriter

        llm = LLMWriter(job.backend, job.out, seed=seed, max_rewrites=job.max_rewrites, concurrency=job.concurrency,  # type: ignore[arg-type]
                        progress=job.progress, scope=job.llm_scope, batch=job.batch, anchor_rates=rates)
        texts = llm.write_all(plans)
        params = llm.manifest_params()
        spans = llm.spans  # where each clause was found in its turn (none where it was not)
    for p in sorted(plans, key=lambda p: p.persona.id):
        write_jsonl(job.out / "histories" / f"{p.persona.id}.jsonl", history_lines(p, lambda s, p=p: texts(p, s)))
        progress(1)
    instances = [i for p in plans for i in p.instances]
    names = ("personas", "persona_states", "instances", "answer_key", *(("distractors",) if job.distractors else ()))
    files = {name: job.parts / f"{index}.{name}" for name in names}
    write_jsonl(files["personas"], (p.persona for p in plans))  # Persona.states is never serialised
    # the transient states go to the hidden persona_states.jsonl (as write_dataset writes them)
    states = [PersonaStates(user_id=p.persona.id, states=p.persona.states) for p in plans if p.persona.states]
    write_jsonl(files["persona_states"], states)
    write_jsonl(files["instances"], (task_view(i) for i in instances))
    write_jsonl(files["answer_key"], (answer_key(i, seed, spans) for i in instances))
    if job.distractors:
        write_jsonl(files["distractors"], (lab for p in plans for s in p.sessions for _, d in s.distractors
                                           for lab in distractor_label(p.persona.id, d, spans)))
    counts = {
        "personas": len(plans),
        "instances": len(instances),
        "sessions": sum(len(p.sessions) for p in plans),
        "turns": sum(p.n_turns for p in plans),
        "relevant_turns": sum(p.n_relevant for p in plans),
        "distractor_turns": sum(len(s.distractors) for p in plans for s in p.sessions),
    }
    return _ShardOut(files, counts, {i.scenario.id for i in instances}, rates, params, len(states))


def _split(work: list[Work], counts: dict[str, tuple[int, int]], n: int) -> list[list[Work]]:
    """`work` in `n` consecutive parts of about equal size (a history's length follows its evidence)."""
    size = [1 + sum(counts[instance_id(p.id, s.id)][1] for s in scen) + sum(len(sp.mentions) for sp in spans)
            for p, scen, _, spans in work]
    total, parts, acc = sum(size), [[] for _ in range(n)], 0
    for w, k in zip(work, size):
        parts[min(n - 1, acc * n // max(1, total))].append(w)
        acc += k
    return [p for p in parts if p]


def _join(target: Path, parts: list[Path]) -> None:
    """The shards' parts of one file, in shard order, moved into place at once (the parts are
    beside it, in the build's temporary folder: a crash leaves the old file or the new one)."""
    first = parts[0]
    with first.open("ab") as out:
        for p in parts[1:]:
            with p.open("rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)
    os.replace(first, target)


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
    workers: int | None = None,
    generator: int = GENERATOR_VERSION,
    llm_scope: str = "all",
    batch: str | Path | None = None,
) -> Manifest:
    """Build an IBA-Bench dataset into `out_dir` and return its manifest.

    noise_ratio: turns per relevant turn (None: the preset's, 100 except demo's 50).
    history_turns: instead, the length of every history (evidence sessions are always kept).
    personas: override the preset's number of personas. writer="llm" needs `backend`.
    distractors_on: False leaves distractor preferences out (to measure what they change).
    workers: processes that plan and write the personas (procedural writer; None: default_workers());
    the dataset is the same, byte for byte, for any number.
    generator: the procedural generator's version (GENERATOR_VERSIONS; recorded as params.generator_version).
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
    if writer not in ("procedural", "llm"):
        raise ValueError(f"unknown writer {writer!r}; choose procedural or llm")
    if writer == "llm" and backend is None:
        raise ValueError("the llm writer needs a model: pass --model (and --base-url for an openai: server)")
    if generator not in GENERATOR_VERSIONS:
        raise ValueError(f"unknown generator version {generator}; choose from {', '.join(map(str, GENERATOR_VERSIONS))}")
    if writer == "llm" and generator != GENERATOR_VERSION:  # its procedural parts are the current version's
        raise ValueError(f"--generator {generator} is for the procedural writer; the llm writer builds with version {GENERATOR_VERSION}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    # the llm writer holds every plan in one process (its requests are batched over the whole build)
    n_workers = 1 if writer == "llm" or not can_fork() else (workers or default_workers())
    out = Path(out_dir)
    work, counts = plan_work(taxonomy, pre, seed=seed, noise_ratio=ratio, history_turns=history_turns, personas=personas)
    _remove_stale_histories(out, {p.id for p, _, _, _ in work})
    parts = _split(work, counts, n_workers)
    (out / "histories").mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out, prefix=".build-"))
    try:
        job = _Job(out=out, taxonomy=taxonomy, seed=seed, counts=counts, distractors=distractors_on, writer=writer, parts=tmp,
                   backend=backend, max_rewrites=max_rewrites, concurrency=concurrency, progress=progress,
                   generator=generator, llm_scope=llm_scope, batch=batch)
        bar = tqdm(total=sum(len(p) for p in parts), desc="writing histories", unit="persona", disable=not progress)
        shards = run_shards(lambda i, report: _shard(job, i, parts[i], report), len(parts), bar.update)
        bar.close()
        rates = shards[0].anchor_rates
        params: dict[str, Any] = {
            "preset": pre.name,
            "noise_ratio": ratio,
            "history_turns": history_turns,
            "scenarios": sorted(set().union(*(s.scenarios for s in shards))),
            "dynamic_prob": ground_truth.DYNAMIC_PROB,
            "state_active_prob": ground_truth.STATE_ACTIVE_PROB,
            # the construction's version: figures measured on a build say which one (README, BENCHMARKS)
            "generator_version": generator,
            "distractors_per_labelled_turn": distractors_mod.DISTRACTORS_PER_LABELLED if distractors_on else 0,
            "evidence_anchor_rates": rates if distractors_on else evidence_bank.ANCHOR_PROB,
        }
        for s in shards:
            params.update(s.params)
        manifest = Manifest(
            name=f"iba-bench-{pre.name}",
            generator="iba.construct",
            writer=writer,
            seed=seed,
            taxonomy_version=taxonomy.version,
            created_by=f"iba {__version__}",
            counts={k: sum(s.counts[k] for s in shards) for k in shards[0].counts},
            params=params,
        )
        # the files write_dataset writes, in its order, the manifest last: its presence marks a
        # complete dataset. A rebuild into the same folder must not leave another build's states
        # or labels where this one has none.
        for name in ("personas", "persona_states", "instances", "answer_key", "distractors"):
            if name in shards[0].files and (name != "persona_states" or any(s.with_states for s in shards)):
                _join(out / f"{name}.jsonl", [s.files[name] for s in shards])
            else:
                (out / f"{name}.jsonl").unlink(missing_ok=True)
        atomic_write_text(out / "manifest.json", manifest.model_dump_json(indent=2) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # the plans and the writer's spans are done with (they were the shards'): free what is left
    # before the statistics (the tell audit) read the dataset back, so the full build's peak is
    # one of the two, not their sum
    del job, parts, shards
    release_free_memory()
    # the style audit (~150 s of CPU and ~400 MB at full size) is `iba stats`'s, not every build's
    write_stats(out, taxonomy, workers=n_workers, style=False)
    return manifest


def _remove_stale_histories(out: Path, keep: set[str]) -> None:
    """A rebuild into the same folder must not leave histories of personas it no longer has (nor
    the temporary folder of a build that was killed)."""
    hist = out / "histories"
    if hist.is_dir():
        for f in hist.glob("*.jsonl"):
            if f.stem not in keep:
                f.unlink()
    for d in out.glob(".build-*"):
        shutil.rmtree(d, ignore_errors=True)
