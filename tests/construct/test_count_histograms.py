"""Table 2's histograms drive the number of constraints and evidence turns per instance."""

from __future__ import annotations

import random

from iba.construct import count_histograms
from iba.construct.builder import assign_instances, table2_counts
from iba.construct.personas import make_personas
from iba.construct.presets import get_preset
from iba.taxonomy import load_taxonomy


def test_rows_are_the_papers():
    # spot checks against the paper's Table 2, and each row sums to the domain's I
    assert count_histograms.EVIDENCE_HIST["overall"] == (3041, 2064, 1149, 336, 372)
    assert count_histograms.CONSTRAINTS_HIST["overall"] == (268, 1092, 2416, 2051, 1135)
    assert sum(count_histograms.EVIDENCE_HIST["overall"]) == sum(count_histograms.CONSTRAINTS_HIST["overall"]) == 6962
    for dom in count_histograms.EVIDENCE_HIST:
        assert sum(count_histograms.EVIDENCE_HIST[dom]) == sum(count_histograms.CONSTRAINTS_HIST[dom])
    domains = [d for d in count_histograms.EVIDENCE_HIST if d != "overall"]
    for i in range(5):
        assert sum(count_histograms.EVIDENCE_HIST[d][i] for d in domains) == count_histograms.EVIDENCE_HIST["overall"][i]
        assert sum(count_histograms.CONSTRAINTS_HIST[d][i] for d in domains) == count_histograms.CONSTRAINTS_HIST["overall"][i]


def _hist(counts):
    h = count_histograms.empty_hist()
    for c in counts:
        h[count_histograms.bin_of(c)] += 1
    return tuple(h.values())


def test_allocate_meets_the_row_exactly_at_its_size():
    row = count_histograms.CONSTRAINTS_HIST["work"]
    counts = count_histograms.allocate(random.Random(1), row, [None] * sum(row))
    assert _hist(counts) == row


def test_allocate_respects_caps_and_minimums_and_fills_high_bins_from_capable_instances():
    row = (10, 10, 10, 10, 10)
    caps = [2] * 20 + [9] * 30
    mins = [1] * 45 + [4] * 5
    counts = count_histograms.allocate(random.Random(2), row, caps, mins)
    assert all(c <= cap for c, cap in zip(counts, caps))
    assert all(c >= m for c, m in zip(counts, mins))
    assert _hist(counts) == row  # feasible, so met exactly


def test_allocate_passes_shortfall_down_when_caps_forbid():
    counts = count_histograms.allocate(random.Random(3), (0, 0, 0, 0, 10), [3] * 10)
    assert counts == [3] * 10


def test_scaled_counts_sum_to_n_and_follow_the_row():
    rng = random.Random(0)
    row = count_histograms.EVIDENCE_HIST["daily"]
    for n in (1, 7, 66, 1086):
        c = count_histograms.scaled_counts(rng, row, n)
        assert sum(c) == n
    assert count_histograms.scaled_counts(rng, row, 1086) == list(row)


def test_full_preset_allocation_reproduces_table2_per_domain():
    tax = load_taxonomy()
    pre = get_preset("full")
    scen = pre.select(tax)
    people = make_personas(400, 42)
    assigned = assign_instances(scen, pre, 400, 42)
    counts = table2_counts(tax, [(p, s, []) for p, s in zip(people, assigned)], 42)
    domain_of = {s.id: d.id for d in tax.domains for s in d.scenarios}
    for dom in {d.id for d in tax.domains}:
        items = [v for k, v in counts.items() if domain_of[k.split("-", 1)[1]] == dom]
        if sum(count_histograms.CONSTRAINTS_HIST[dom]) != len(items):
            continue  # taxonomy instance counts differ from Table 2 (incomplete taxonomy)
        assert _hist([c for c, _ in items]) == count_histograms.CONSTRAINTS_HIST[dom], dom
        assert _hist([e for _, e in items]) == count_histograms.EVIDENCE_HIST[dom], dom


def test_every_scenario_instance_goes_to_a_different_persona():
    tax = load_taxonomy()
    pre = get_preset("full")
    assigned = assign_instances(pre.select(tax), pre, 400, 42)
    for scen in assigned:
        assert len({s.id for s in scen}) == len(scen)
    total = sum(len(s) for s in assigned)
    assert total == sum(min(400, s.paper_instances) for s in tax.scenarios())
    loads = [len(s) for s in assigned]
    assert max(loads) - min(loads) <= 1  # balanced
