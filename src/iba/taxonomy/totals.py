"""Counting a taxonomy (`taxonomy_totals`) and comparing the counts with the paper's Table 13
(`table13_problems`, `validate_totals`)."""

from __future__ import annotations

from iba.taxonomy.errors import TaxonomyError
from iba.taxonomy.table13 import DOMAIN_ORDER, PAPER_DOMAINS, PAPER_SCENARIOS, PAPER_TABLE13, PAPER_TOTALS
from iba.types import Scenario, Taxonomy


def _scenario_counts(s: Scenario) -> tuple[int, int]:
    return len(s.dimensions), sum(len(d.values) for d in s.dimensions)


def taxonomy_totals(tax: Taxonomy) -> dict[str, int]:
    """Counts of the taxonomy (the keys of PAPER_TOTALS plus value kinds, verifiable values, states)."""
    scen = tax.scenarios()
    values = [v for s in scen for d in s.dimensions for v in d.values]
    return {
        "domains": len(tax.domains),
        "scenarios": len(scen),
        "dimensions": sum(len(s.dimensions) for s in scen),
        "values": len(values),
        "static_values": sum(not v.dynamic for v in values),
        "dynamic_values": sum(v.dynamic for v in values),
        "call_api_scenarios": sum(s.action == "call_api" for s in scen),
        "generate_scenarios": sum(s.action == "generate" for s in scen),
        "dynamic_scenarios": sum(s.dynamic for s in scen),
        "verifiable_values": sum(v.verifier is not None for v in values),
        "instances": sum(s.paper_instances for s in scen),
        "states": len(tax.states),
    }


def table13_problems(tax: Taxonomy, partial: bool = False) -> list[str]:
    """Differences between the taxonomy and Table 13 (empty when it matches).

    With `partial=True` only the domains present are checked (each must still be complete), and
    the overall totals are not.
    """
    p: list[str] = []
    present = [d.id for d in tax.domains]
    if not partial:
        missing = [d for d in DOMAIN_ORDER if d not in present]
        if missing:
            p.append(f"missing domains: {', '.join(missing)} (add data/<domain>.yaml)")
    for d in tax.domains:
        if d.id not in PAPER_DOMAINS:
            p.append(f"{d.id}: not a domain of Table 13 ({', '.join(DOMAIN_ORDER)})")
            continue
        name, short = PAPER_DOMAINS[d.id]
        if (d.name, d.short) != (name, short):
            p.append(f"{d.id}: name/short are {d.name!r}/{d.short!r}, Table 13 has {name!r}/{short!r}")
        ids = [s.id for s in d.scenarios]
        if ids != PAPER_SCENARIOS[d.id]:
            p.append(f"{d.id}: scenarios are {ids}, Table 13 has (in order) {PAPER_SCENARIOS[d.id]}")
        for s in d.scenarios:
            if s.id not in PAPER_TABLE13:
                continue
            got = (*_scenario_counts(s), s.paper_instances, s.dynamic, s.action)
            want = PAPER_TABLE13[s.id]
            if got != want:
                p.append(f"{d.id}/{s.id}: (D, P, I, dyn, action) = {got}, Table 13 has {want}")
    if not partial:
        totals = taxonomy_totals(tax)
        for key, want in PAPER_TOTALS.items():
            if totals[key] != want:
                p.append(f"total {key} = {totals[key]}, the paper has {want}")
    return p


def validate_totals(tax: Taxonomy) -> None:
    """Raise TaxonomyError unless the taxonomy matches Table 13 scenario by scenario and in total."""
    problems = table13_problems(tax)
    if problems:
        raise TaxonomyError(["the taxonomy does not match the paper's Table 13:", *problems])
