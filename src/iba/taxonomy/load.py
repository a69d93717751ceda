"""Loading a taxonomy folder: `data/<domain>.yaml` (one `Domain` each, see iba.types) and the
optional `data/states.yaml`, validated by the pydantic models and `iba.taxonomy.checks`, into a
`Taxonomy` whose `version` carries a short content hash (recorded in datasets as `taxonomy_version`).
"""

from __future__ import annotations

import functools
from importlib.resources import as_file, files
from pathlib import Path

from pydantic import ValidationError

from iba.taxonomy.checks import check_scenario, check_state, duplicates
from iba.taxonomy.errors import TaxonomyError, validation_problems
from iba.taxonomy.table13 import DOMAIN_ORDER
from iba.taxonomy.yaml_reader import read_yaml
from iba.types import ApiTemplate, Domain, Scenario, Taxonomy, TransientState, stable_hash

TAXONOMY_FORMAT = "iba-taxonomy/1"
STATES_FILE = "states.yaml"


def default_data_dir() -> Path:
    # __package__ is "iba.taxonomy" here too: the data stays next to the package face
    with as_file(files(__package__) / "data") as p:
        return Path(p)


def load_taxonomy(data_dir: str | Path | None = None) -> Taxonomy:
    """Load and check the taxonomy in `data_dir` (default: the shipped data, loaded once and cached).

    The returned object is shared when cached: treat it as read-only.
    """
    if data_dir is None:
        return _load_default()
    return _load_dir(Path(data_dir))


def scenario_api(scenario: str) -> ApiTemplate | None:
    """The scenario's ApiTemplate in the shipped taxonomy (its synonyms matter for slot matching);
    None for scenarios it does not know (imported datasets: exact matching, no schema check)."""
    try:
        return _load_default().scenario(scenario).api
    except KeyError:
        return None


@functools.cache
def _load_default() -> Taxonomy:
    return _load_dir(default_data_dir())


def _order_key(path: Path) -> tuple[int, str]:
    stem = path.stem
    return (DOMAIN_ORDER.index(stem) if stem in DOMAIN_ORDER else len(DOMAIN_ORDER), stem)


def _load_dir(data_dir: Path) -> Taxonomy:
    if not data_dir.is_dir():
        raise TaxonomyError(f"{data_dir}: not a directory of taxonomy files (<domain>.yaml, states.yaml)")
    domain_files = sorted((p for p in data_dir.glob("*.yaml") if p.name != STATES_FILE), key=_order_key)
    if not domain_files:
        raise TaxonomyError(f"{data_dir}: no domain files (*.yaml); expected e.g. writing.yaml")
    problems: list[str] = []
    domains: list[Domain] = []
    seen_scenarios: dict[str, Path] = {}
    for path in domain_files:
        try:
            domain = _load_domain(path)
        except TaxonomyError as e:
            problems.extend(e.problems)
            continue
        for i, s in enumerate(domain.scenarios):
            if s.id in seen_scenarios:
                problems.append(
                    f"{path}: scenarios[{i}].id: duplicate scenario id {s.id!r} (also in {seen_scenarios[s.id]})"
                )
            seen_scenarios.setdefault(s.id, path)
        domains.append(domain)
    states: list[TransientState] = []
    states_path = data_dir / STATES_FILE
    if states_path.exists() and not problems:
        try:
            states = _load_states(states_path, {s.id: s for d in domains for s in d.scenarios})
        except TaxonomyError as e:
            problems.extend(e.problems)
    if problems:
        raise TaxonomyError(problems)
    content = {"domains": [d.model_dump(mode="json") for d in domains], "states": [s.model_dump(mode="json") for s in states]}
    return Taxonomy(version=f"{TAXONOMY_FORMAT}+{stable_hash(content, 12)}", domains=domains, states=states)


def _load_domain(path: Path) -> Domain:
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise TaxonomyError(f"{path}: (top level): expected a mapping with id, name, short, scenarios; got {type(data).__name__}")
    if data.get("id") != path.stem:
        raise TaxonomyError(f"{path}: id: domain id {data.get('id')!r} must equal the file name {path.stem!r}")
    problems: list[str] = []
    scenarios = data.get("scenarios")
    if isinstance(scenarios, list):
        for i, s in enumerate(scenarios):
            if isinstance(s, dict):
                if "domain" not in s:
                    s["domain"] = path.stem
                elif s["domain"] != path.stem:
                    problems.append(f"{path}: scenarios[{i}].domain: {s['domain']!r} differs from the file's domain {path.stem!r}; leave it out")
    try:
        domain = Domain.model_validate(data)
    except ValidationError as e:
        raise TaxonomyError(problems + validation_problems(path, e)) from None
    for i, s in enumerate(domain.scenarios):
        problems.extend(f"{path}: {p}" for p in check_scenario(s, f"scenarios[{i}]"))
    if problems:
        raise TaxonomyError(problems)
    return domain


def _load_states(path: Path, scenarios: dict[str, Scenario]) -> list[TransientState]:
    data = read_yaml(path)
    if isinstance(data, dict) and set(data) == {"states"}:
        data = data["states"]
    if data is None:
        return []
    if not isinstance(data, list):
        raise TaxonomyError(f"{path}: (top level): expected a list of states (or a mapping with one key 'states')")
    problems: list[str] = []
    states: list[TransientState] = []
    for i, item in enumerate(data):
        try:
            states.append(TransientState.model_validate(item))
        except ValidationError as e:
            problems.extend(validation_problems(path, e, f"states[{i}]"))
            continue
        problems.extend(check_state(states[-1], f"{path}: states[{i}]", scenarios))
    for sid in sorted(duplicates([s.id for s in states])):
        problems.append(f"{path}: states: duplicate state id {sid!r}")
    if problems:
        raise TaxonomyError(problems)
    return states
