import pytest

from iba.retrieval.deep import (
    MODEL_FREE,
    CandidatePool,
    content_hash,
    deep_retrieve,
    feedback_queries,
    filter_redundant,
    merge_rankings,
)
from iba.retrieval.expansion import FACETS, FacetQueries, schema_terms, template_queries
from iba.retrieval.index import HistoryIndex
from iba.retrieval.passage import Passage
from iba.retrieval.salience import (
    MAX_PASSAGES,
    RETAIN_AT,
    SalienceScore,
    rank_relevance,
    rule_scores,
    select,
    signal_type,
)
from iba.types import TaskView
from tests.agents.helpers import API_SCHEMA, API_TASK, TEXT_TASK
from tests.retrieval.helpers import HashEmbedder, make_history


def P(cid: str, text: str, turns=None, score=0.0) -> Passage:
    return Passage(chunk_id=cid, text=text, turn_ids=turns or [cid], timestamps=["2025-01-01"], score=score)


def test_template_queries_cover_the_five_facets_and_the_api_options():
    q = template_queries(API_TASK)
    assert [f for f, _ in q.items()] == list(FACETS) == ["style", "structure", "decision", "correction", "habit"]
    assert all(len(text) > 20 for _, text in q.items())
    assert "sichuan japanese italian" in q.decision  # enum values are searchable words
    assert "Food ordering".lower() in q.habit
    assert schema_terms(None) == "" and "spice level" in schema_terms(API_SCHEMA)
    assert template_queries(TEXT_TASK) == template_queries(TEXT_TASK)  # deterministic


def test_facet_queries_contract():
    with pytest.raises(ValueError):
        FacetQueries(style="x", structure="ok ok", decision="ok ok", correction="ok ok", habit="ok ok")


def test_merge_rankings_tracks_best_rank_hits_and_facets():
    a, b, c = P("c1", "one"), P("c2", "two"), P("c3", "three")
    pool = merge_rankings([("task", [a, b]), ("style", [b, c]), ("habit", [c])])
    assert [p.chunk_id for p in pool.passages] == ["c2", "c3", "c1"]  # best rank, then more queries, then first seen
    by = {p.chunk_id: (p, r, h) for p, r, h in zip(pool.passages, pool.best_ranks, pool.hits)}
    assert by["c2"][1:] == (1, 2) and by["c2"][0].facets == ["task", "style"]
    assert by["c3"][1:] == (1, 2) and by["c1"][1:] == (1, 1)
    # ties on best rank: more queries first
    assert [p.chunk_id for p in pool.passages][-1] == "c1"


def test_redundancy_filter_by_hash_and_overlap():
    kept = P("c1", "[2025-01-01 user] I hate spicy food, no chili at all please")
    same = P("c2", "[2025-03-09 user]   i hate spicy food, NO chili at all please")  # same content, other date
    mostly = P("c3", "[2025-01-01 user] I hate spicy food, no chili at all please thanks")
    other = P("c4", "[2025-01-02 user] Sushi is my go-to dinner")
    assert content_hash(kept.text) == content_hash(same.text)
    pool, dropped = filter_redundant(CandidatePool(passages=[kept, same, mostly, other], best_ranks=[1, 1, 2, 3], hits=[1, 1, 1, 1]))
    assert [p.chunk_id for p in pool.passages] == ["c1", "c4"] and dropped == ["c2", "c3"]
    assert pool.best_ranks == [1, 3]
    # the repeats are folded into the kept passage, with their dates
    assert pool.passages[0].turn_ids == ["c1", "c2", "c3"]
    assert pool.passages[0].text.endswith("(the user said the same again on 2025-01-01)") or "2025-03-09" in pool.passages[0].text
    assert pool.hits == [3, 1]


def test_line_level_repeats_fold_only_the_repeated_turns():
    a = Passage(chunk_id="a", text="[2025-01-01 user] I hate spicy food\n[2025-01-01 assistant] Noted.\n[2025-01-01 user] Weather?",
                turn_ids=["t1", "t2", "t3"], timestamps=["2025-01-01"] * 3, score=0)
    b = Passage(chunk_id="b", text="[2025-02-01 user] i hate spicy food\n[2025-02-01 assistant] Noted.\n[2025-02-01 user] Weather?\n[2025-02-01 user] New thing",
                turn_ids=["t7", "t8", "t9", "t10"], timestamps=["2025-02-01"] * 4, score=0)
    pool, dropped = filter_redundant(CandidatePool(passages=[a, b], best_ranks=[1, 2], hits=[1, 1]), overlap=0.7)
    # user lines that repeat are folded; the assistant's boilerplate and new lines are not
    assert dropped == ["b"] and pool.passages[0].turn_ids == ["t1", "t2", "t3", "t7", "t9"]
    assert "t10" not in pool.passages[0].turn_ids and "again on 2025-02-01" in pool.passages[0].text


@pytest.mark.parametrize(
    "text, kind",
    [
        ("[2025-01-01 user] Actually, can you make it shorter? Rewrite it.", "explicit_revision"),
        ("[2025-01-01 user] Ugh, this is way too long, I hate walls of text", "complaint"),
        ("[2025-01-01 user] I prefer bullet points in reports.", "direct_statement"),
        ("[2025-01-01 user] Every time I order, sushi on Fridays is my go-to.", "implicit_pattern"),
        ("[2025-01-01 user] What's the capital of Peru?", "none"),
        # the assistant's words are not the user's preference signal
        ("[2025-01-01 assistant] Actually, I prefer to rewrite it.\n[2025-01-01 user] Thanks.", "none"),
    ],
)
def test_signal_types_follow_table_12(text, kind):
    assert signal_type(text) == kind


def test_salience_composes_relevance_and_signal():
    s = SalienceScore(relevance=6, signal=4)
    assert s.total == 10 and SalienceScore(relevance=3, signal=2).total == 5
    with pytest.raises(ValueError):
        SalienceScore(relevance=7, signal=0)
    assert [rank_relevance(r, 1) for r in (1, 2, 3, 4, 5, 7, 10, 11)] == [6, 5, 5, 4, 4, 3, 2, 1]
    assert rank_relevance(2, 3) == 6 and rank_relevance(1, 2) == 6
    cands = [P("a", "[2025-01-01 user] I changed my mind, make it shorter"), P("b", "[2025-01-01 user] hello there"),
             P("c", "[2025-01-01 user] that is my habit"), P("d", "[2025-01-01 user] nice weather")]
    scores = rule_scores(cands, best_ranks=[9, 3, 6, 6], hits=[1, 1, 1, 1])
    assert [(s.relevance, s.signal) for s in scores] == [(2, 4), (5, 0), (3, 1), (3, 0)]
    # a weakly related explicit revision (2+4) and a top-3 hit (5+0) are kept; a deeper habit (3+1)
    # and deeper chit-chat (3+0) are not
    assert [p.chunk_id for p in select(cands, scores)] == ["a", "b"]


def test_select_skips_passages_whose_evidence_is_already_kept():
    a = Passage(chunk_id="a", text="[2025-01-01 assistant] Draft.\n[2025-01-01 user] Actually, shorter please.",
                turn_ids=["t1", "t2"], timestamps=["x", "x"], score=0)
    b = Passage(chunk_id="b", text="[2025-01-01 user] Actually, shorter please.\n[2025-01-01 assistant] Sure.",
                turn_ids=["t2", "t3"], timestamps=["x", "x"], score=0)  # the overlap of two chunks: nothing new
    c = Passage(chunk_id="c", text="[2025-01-02 user] I prefer tables.", turn_ids=["t9"], timestamps=["x"], score=0)
    s = [SalienceScore(relevance=6, signal=4)] * 3
    assert [p.chunk_id for p in select([a, b, c], s)] == ["a", "c"]
    assert [p.chunk_id for p in select([a, b, c], s, novel_only=False)] == ["a", "b", "c"]


def test_select_threshold_and_limit():
    cands = [P(f"c{i}", "x") for i in range(15)]
    scores = [SalienceScore(relevance=6, signal=i % 5) for i in range(15)]
    kept = select(cands, scores)
    assert len(kept) == MAX_PASSAGES and all(p.score >= RETAIN_AT for p in kept)
    assert [p.score for p in kept] == sorted((p.score for p in kept), reverse=True)
    with pytest.raises(ValueError):
        select(cands, scores[:3])


def test_feedback_queries_take_cue_lines_of_the_best_candidates():
    pool = merge_rankings([("task", [
        P("c1", "[2025-01-01 assistant] Here is a draft.\n[2025-01-01 user] Actually, I want full runnable code examples."),
        P("c2", "[2025-01-02 user] How tall is Everest?"),
    ])])
    assert feedback_queries(pool) == [("feedback", "Actually, I want full runnable code examples.")]


def _history_with_repeats():
    def noise(start):
        return [t for i in range(start, start + 12) for t in (("user", f"Tell me about topic number {i} in history and science"), ("assistant", "Here is some general info."))]

    signal = [("user", "Actually, please always write my docs with complete runnable code examples!"), ("assistant", "Will do.")]
    return make_history(noise(0) + signal + noise(12) + signal + noise(24), per_session=6)


def test_deep_retrieve_contract(tmp_path):
    history = _history_with_repeats()
    index = HistoryIndex.build(history, HashEmbedder(), tmp_path, unit="turn")
    task = TaskView(**{**TEXT_TASK.model_dump(), "query": "Write docs for the cache library"})
    result = deep_retrieve(index, task)
    assert len(result.scores) == len(result.candidates)
    assert 0 < len(result.passages) <= MAX_PASSAGES and all(p.score >= RETAIN_AT for p in result.passages)
    assert {f for p in result.candidates for f in p.facets} >= {"task", "style"}
    gold = {t.id for t in history if "runnable" in t.text}
    assert gold <= {t for p in result.passages for t in p.turn_ids}
    assert result.passages == deep_retrieve(index, task).passages  # deterministic


def test_history_repeats_fold_in_with_dates():
    """A kept passage's cue sentence said again elsewhere brings those turns in, with their dates."""
    from iba.retrieval.deep import REPEAT_NOTE, fold_history_repeats
    from iba.retrieval.passage import Chunk, Passage

    said = "I always want the summary table first, then the detailed breakdown below it."
    chunks = [
        Chunk(id="c0", text=f"[2025-01-02 user] {said}", turn_ids=["t1"], timestamps=["2025-01-02T10:00"]),
        Chunk(id="c1", text="[2025-02-03 user] Any good films this weekend?", turn_ids=["t2"], timestamps=["2025-02-03T10:00"]),
        Chunk(id="c2", text=f"[2025-03-04 user] Same as before: {said} Thanks!", turn_ids=["t3"], timestamps=["2025-03-04T10:00"]),
        Chunk(id="c3", text="[2025-04-05 user] I always want the weather first.", turn_ids=["t4"], timestamps=["2025-04-05T10:00"]),
    ]

    class Index:  # the members fold_history_repeats reads
        memo: dict = {}

        def derived(self, name, build):
            if name not in self.memo:
                self.memo[name] = build()
            return self.memo[name]

        def __len__(self):
            return len(chunks)

        def passage(self, i, score, query=None):
            c = chunks[i]
            return Passage(chunk_id=c.id, text=c.text, turn_ids=c.turn_ids, timestamps=c.timestamps, score=score)

    kept = [Index().passage(0, 1.0)]
    folded = fold_history_repeats(Index(), kept)
    assert folded[0].turn_ids == ["t1", "t3"]  # not the chatter, not the short look-alike
    assert folded[0].text.endswith(f"{REPEAT_NOTE} 2025-03-04)")
    # chatter without a preference cue is never followed
    assert fold_history_repeats(Index(), [Index().passage(1, 1.0)])[0].turn_ids == ["t2"]


def test_cue_scan_only_returns_passages_with_a_preference_cue(tmp_path):
    from iba.retrieval.deep import cue_scan

    history = make_history([
        ("user", "Tell me about the history of food ordering apps."),
        ("assistant", "They started with phone orders."),
        ("user", "I hate it when the food arrives cold, next time pick somewhere close."),
        ("assistant", "Noted."),
        ("user", "What is the capital of Peru?"),
        ("assistant", "Lima."),
    ])
    index = HistoryIndex.build(history, HashEmbedder(), tmp_path, unit="turn")
    found = cue_scan(index, ["order food for tonight"], k=5)
    assert [p.turn_ids for p in found] == [[history[2].id]]  # the one line with a Table 12 cue
    assert found[0].query == "cue_scan"
    assert cue_scan(index, [], k=5) == []


def test_slot_queries_one_per_choice_parameter_and_only_when_asked():
    from iba.retrieval.deep import labelled_queries, slot_queries

    slots = slot_queries(API_TASK)
    assert slots == [("slot", "Cuisine. sichuan, japanese, italian"), ("slot", "How spicy. none, mild, hot")]  # not servings
    assert slot_queries(TEXT_TASK) == []
    queries = template_queries(API_TASK)
    assert labelled_queries(API_TASK, queries) == [("task", API_TASK.query), *queries.items()]
    assert labelled_queries(API_TASK, queries, slots=True)[-2:] == slots


def test_value_queries_one_per_allowed_value_and_only_when_asked():
    from iba.retrieval.deep import DeepRetrieval, MODEL_FREE, labelled_queries, value_queries

    values = value_queries(API_TASK)
    assert values == [("value", f"Cuisine. {v}") for v in ("sichuan", "japanese", "italian")] + [
        ("value", f"How spicy. {v}") for v in ("none", "mild", "hot")]
    assert value_queries(TEXT_TASK) == []
    yes_no = {"type": "boolean", "enum": [True, False], "description": "Whether a parking space is included."}
    schema = {**API_TASK.api_schema, "properties": {**API_TASK.api_schema["properties"], "parking": yes_no}}
    assert value_queries(API_TASK.model_copy(update={"api_schema": schema}))[-1:] == [("value", yes_no["description"])]
    queries = template_queries(API_TASK)
    assert labelled_queries(API_TASK, queries, values=True)[-6:] == values
    assert [q for _, q in labelled_queries(API_TASK, queries, slots=True, values=True)[6:8]] == [
        q for _, q in slot_queries_of(API_TASK)]

    async def nothing():
        raise AssertionError("view_queries needs no index")

    # the views rank turns by the queries the pool was searched with: the value queries only when on
    for on in (False, True):
        deep = DeepRetrieval(API_TASK, MODEL_FREE.model_copy(update={"values": on}), nothing)
        deep.queries = queries
        got = deep.view_queries()
        assert got[0] == f"Food ordering: {API_TASK.query}" and got[1:6] == [q for _, q in queries.items()]
        assert got[6:] == ([q for _, q in values] if on else [])


def slot_queries_of(task):
    from iba.retrieval.deep import slot_queries
    return slot_queries(task)


def test_contrast_scores_move_relevance_by_at_most_two_within_the_scale():
    import numpy as np

    from iba.retrieval.deep import contrast_scores

    scores = [SalienceScore(relevance=r, signal=2) for r in (6, 3, 0, 5, 1)]
    assert contrast_scores(scores, np.zeros(5), 2.0) == scores  # no spread: nothing to tell apart
    assert contrast_scores(scores, np.array([1.0, 2, 3, 4, 5]), 0.0) == scores  # weight 0: off
    moved = contrast_scores(scores, np.array([5.0, -5, -5, 0, 0]), 2.0)
    assert [s.relevance for s in moved] == [6, 1, 0, 5, 1]  # capped at 6, floored at 0, the median stays
    assert all(a.signal == b.signal for a, b in zip(scores, moved))


def test_scenario_contrast_demotes_a_preference_about_another_scenario(tmp_path):
    from iba.retrieval.deep import scenario_contrast

    history = make_history([
        ("user", "For food ordering I prefer the hot sichuan dishes, always."),
        ("assistant", "Noted."),
        ("user", "For commute route planning I prefer the quiet metro line, always."),
        ("assistant", "Noted."),
    ], per_session=4)
    index = HistoryIndex.build(history, HashEmbedder(), tmp_path, unit="turn")
    names = ["Food ordering", "Commute route planning", "Parking"]
    food, commute = (index.passage(i, 0.0) for i in range(len(index.chunks)) if index.chunks[i].text.count("prefer"))
    z = scenario_contrast(index, [food, commute], "Food ordering", names)
    assert z is not None and z[0] > 0 > z[1]
    assert scenario_contrast(index, [food, commute], "Food ordering", names[:2]) is None  # one other: no contrast
    plain = deep_retrieve(index, API_TASK)
    contrasted = deep_retrieve(index, API_TASK, MODEL_FREE.model_copy(update={"contrast": True}), scenarios=names)
    rel = {r.chunk_id: s.relevance for r, s in zip(contrasted.candidates, contrasted.scores)}
    base = {r.chunk_id: s.relevance for r, s in zip(plain.candidates, plain.scores)}
    assert rel[commute.chunk_id] - base[commute.chunk_id] < rel[food.chunk_id] - base[food.chunk_id]


def test_repeat_search_equals_counting_every_posting():
    """The sentence index reads only the rarest words' postings (and remembers probes): the turns it
    finds are exactly those a count over every posting finds, for probes of any size and any overlap."""
    import random
    from collections import Counter

    from iba.retrieval.deep import _SentenceIndex
    from iba.retrieval.passage import Chunk, Passage

    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(40)] + ["the", "a", "and"] * 10  # common words post to most sentences
    chunks = [Chunk(id=f"c{i}", text=f"[2025-01-01 user] {' '.join(rng.choices(vocab, k=rng.randint(6, 14)))}.",
                    turn_ids=[f"t{i}"], timestamps=["2025-01-01T10:00"]) for i in range(300)]

    class Index:
        def __len__(self):
            return len(chunks)

        def passage(self, i, score, query=None):
            c = chunks[i]
            return Passage(chunk_id=c.id, text=c.text, turn_ids=c.turn_ids, timestamps=c.timestamps, score=score)

    sentences = _SentenceIndex(Index())
    found = 0
    for _ in range(300):
        probe = set(rng.sample(vocab, rng.randint(6, 12)))
        overlap = rng.choice([0.5, 0.8, 0.9, 1.0])
        shared = Counter(sid for w in probe for sid in sentences.postings.get(w, ()))
        want = {sentences.turn_of[sid] for sid, n in shared.items() if n / len(probe) >= overlap}
        assert sentences.repeating(probe, overlap) == want
        assert sentences.repeating(set(probe), overlap) == want  # remembered
        found += bool(want)
    assert found > 30  # the probes do find repeats (the comparison is not of empty sets)


async def test_state_queries_are_searched_and_rank_the_views_only_when_on(tmp_path):
    """states=true: the writer's sentences are searched like the facets (labelled "state") and join
    the view queries; off, or with no writer plugged in, nothing changes and the writer is not asked."""
    from iba.retrieval.deep import DeepRetrieval

    history = make_history([
        ("user", "My dentist pulled a molar yesterday and chewing hurts."),
        ("assistant", "Sorry to hear that."),
        ("user", "The weather is grey again."),
        ("assistant", "Indeed."),
    ], per_session=4)
    index = HistoryIndex.build(history, HashEmbedder(), tmp_path, unit="turn")
    asked: list[str] = []

    async def load():
        return index

    async def write(task, step):
        asked.append(task.query)
        return ["my dentist pulled a molar and chewing hurts", "I am short of money this month"]

    for on in (False, True):
        asked.clear()
        deep = DeepRetrieval(API_TASK, MODEL_FREE.model_copy(update={"states": on}), load, states=write)
        await deep.run()
        labels = [label for label, _ in deep.rankings]
        assert (labels.count("state") == 2) is on and (asked == [API_TASK.query]) is on
        assert deep.view_queries()[6:] == (["my dentist pulled a molar and chewing hurts", "I am short of money this month"] if on else [])
        if on:
            found = dict(deep.rankings[labels.index("state")][1][0].__dict__)
            assert "molar" in found["text"]
            assert "states" in deep.queries.model_dump()
        else:
            assert "states" not in deep.queries.model_dump()  # dumps without it read as before
    # no writer (an eval without a model): states=true has nothing to search with
    deep = DeepRetrieval(API_TASK, MODEL_FREE.model_copy(update={"states": True}), load)
    await deep.run()
    assert "state" not in [label for label, _ in deep.rankings]
