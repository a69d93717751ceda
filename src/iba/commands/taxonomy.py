"""`iba taxonomy`: show the taxonomy's domains and totals, or check them against Table 13."""

from __future__ import annotations

import argparse
import json
import sys

from iba.commands import fail
from iba.taxonomy import (
    PAPER_TABLE13,
    TaxonomyError,
    load_taxonomy,
    table13_problems,
    taxonomy_totals,
)
from iba.types import Taxonomy


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object with the totals")
    parser.add_argument("--domain", metavar="ID", help="show one domain, scenario by scenario")
    parser.add_argument("--data", metavar="DIR", help="a taxonomy folder (<domain>.yaml, states.yaml); default: the shipped one")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the taxonomy matches the paper's Table 13")


def _scenario_rows(tax: Taxonomy, domain_id: str) -> list[dict]:
    rows = []
    for s in next(d for d in tax.domains if d.id == domain_id).scenarios:
        values = [v for d in s.dimensions for v in d.values]
        rows.append(
            {
                "id": s.id,
                "name": s.name,
                "D": len(s.dimensions),
                "P": len(values),
                "I": s.paper_instances,
                "dynamic": s.dynamic,
                "action": s.action,
                "verifiable_values": sum(v.verifier is not None for v in values),
                "table13": s.id in PAPER_TABLE13 and PAPER_TABLE13[s.id] == (len(s.dimensions), len(values), s.paper_instances, s.dynamic, s.action),
            }
        )
    return rows


def main(args: argparse.Namespace) -> int:
    try:
        tax = load_taxonomy(args.data)
    except TaxonomyError as e:
        return fail(f"invalid taxonomy data:\n{e}", "iba taxonomy")
    if args.domain is not None:
        ids = [d.id for d in tax.domains]
        if args.domain not in ids:
            return fail(f"unknown domain {args.domain!r}; choose one of: {', '.join(ids)}", "iba taxonomy")
        sub = Taxonomy(version=tax.version, domains=[d for d in tax.domains if d.id == args.domain], states=[])
        totals = taxonomy_totals(sub)
        del totals["states"]
        problems = table13_problems(sub, partial=True)
        rows = _scenario_rows(tax, args.domain)
        if args.json:
            print(json.dumps({**totals, "version": tax.version, "by_scenario": rows}, indent=2))
        else:
            print(f"{'scenario':<34} {'D':>3} {'P':>3} {'I':>5}  dyn  {'action':<9} verif  Table 13")
            for r in rows:
                print(
                    f"{r['id']:<34} {r['D']:>3} {r['P']:>3} {r['I']:>5}  {'yes' if r['dynamic'] else 'no ':<3}  "
                    f"{r['action']:<9} {r['verifiable_values']:>5}  {'ok' if r['table13'] else 'DIFFERS'}"
                )
            print(f"{'total':<34} {totals['dimensions']:>3} {totals['values']:>3} {totals['instances']:>5}")
    else:
        totals = taxonomy_totals(tax)
        problems = table13_problems(tax)
        if args.json:
            print(json.dumps({**totals, "version": tax.version, "matches_table13": not problems}, indent=2))
        else:
            print(f"taxonomy {tax.version}")
            print(f"{'domain':<16} {'name':<24} {'S':>3} {'D':>4} {'P':>5} {'I':>6}")
            for d in tax.domains:
                t = taxonomy_totals(Taxonomy(version=tax.version, domains=[d]))
                print(f"{d.id:<16} {d.name:<24} {t['scenarios']:>3} {t['dimensions']:>4} {t['values']:>5} {t['instances']:>6}")
            print(f"{'total':<16} {'':<24} {totals['scenarios']:>3} {totals['dimensions']:>4} {totals['values']:>5} {totals['instances']:>6}")
            print(
                f"{totals['generate_scenarios']} Generate(text) and {totals['call_api_scenarios']} CallAPI(params) scenarios, "
                f"{totals['dynamic_scenarios']} with dynamic preferences; {totals['dynamic_values']} dynamic values; "
                f"{totals['verifiable_values']} values with a verifier; {totals['states']} transient states"
            )
            print("matches Table 13" if not problems else f"differs from Table 13 in {len(problems)} way(s); see --check")
    if args.check and problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    return 0
