"""The IBA-Bench taxonomy: domains -> scenarios -> preference dimensions -> values (package data).

`load_taxonomy()` reads `data/<domain>.yaml` (one `Domain` each, see iba.types) and the optional
`data/states.yaml` (transient states), checks everything the pydantic models cannot check on their
own (unique ids, dynamic values that reference static values of their dimension, API slots and
value->parameter mappings, verifier ids and parameters, state constraints) and returns a
`Taxonomy` whose `version` carries a short content hash.

Every problem is raised as a `TaxonomyError` that names the file and the offending key path,
e.g. `writing.yaml: scenarios[3].dimensions[1].values[0].cue: Field required`.

`taxonomy_totals()` counts the taxonomy; `validate_totals()` checks it against the paper's
Table 13 (`PAPER_TABLE13`, `PAPER_DOMAINS`, `PAPER_TOTALS`).

This face only re-exports; docs/ARCHITECTURE.md lists the modules behind it.
"""

from __future__ import annotations

from iba.taxonomy.errors import TaxonomyError
from iba.taxonomy.lint import lint_taxonomy
from iba.taxonomy.load import TAXONOMY_FORMAT, default_data_dir, load_taxonomy, scenario_api
from iba.taxonomy.table13 import DOMAIN_ORDER, PAPER_DOMAINS, PAPER_SCENARIOS, PAPER_TABLE13, PAPER_TOTALS
from iba.taxonomy.totals import table13_problems, taxonomy_totals, validate_totals
from iba.taxonomy.verifier_params import VERIFIER_IDS, VERIFIER_PARAMS

__all__ = [
    "DOMAIN_ORDER",
    "PAPER_DOMAINS",
    "PAPER_SCENARIOS",
    "PAPER_TABLE13",
    "PAPER_TOTALS",
    "TAXONOMY_FORMAT",
    "TaxonomyError",
    "VERIFIER_IDS",
    "VERIFIER_PARAMS",
    "default_data_dir",
    "lint_taxonomy",
    "load_taxonomy",
    "scenario_api",
    "table13_problems",
    "taxonomy_totals",
    "validate_totals",
]
