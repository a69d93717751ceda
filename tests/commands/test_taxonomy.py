"""`iba taxonomy`."""

from __future__ import annotations

import json

import yaml

from iba.cli import main as iba_main
from iba.taxonomy import DOMAIN_ORDER, default_data_dir, load_taxonomy, taxonomy_totals

KEYS = {"domains", "scenarios", "dimensions", "values", "call_api_scenarios", "dynamic_scenarios",
        "generate_scenarios", "verifiable_values"}


def test_json_totals_match_the_loader(capsys):
    assert iba_main(["taxonomy", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert KEYS <= set(out)
    totals = taxonomy_totals(load_taxonomy())
    assert {k: out[k] for k in KEYS} == {k: totals[k] for k in KEYS}
    assert out["version"] == load_taxonomy().version
    complete = all((default_data_dir() / f"{d}.yaml").exists() for d in DOMAIN_ORDER)
    if complete:
        assert (out["domains"], out["scenarios"], out["dimensions"], out["values"],
                out["call_api_scenarios"], out["dynamic_scenarios"]) == (9, 66, 262, 997, 16, 43)
        assert out["matches_table13"] is True


def test_human_table_lists_domains_and_totals(capsys):
    assert iba_main(["taxonomy"]) == 0
    out = capsys.readouterr().out
    tax = load_taxonomy()
    for d in tax.domains:
        assert d.id in out
    assert "total" in out and tax.version in out


def test_one_domain(capsys):
    assert iba_main(["taxonomy", "--domain", "writing", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["domains"] == 1
    rows = {r["id"]: r for r in out["by_scenario"]}
    assert rows["technical_documentation"]["D"] == 4 and rows["technical_documentation"]["P"] == 12
    assert all(r["table13"] for r in rows.values())
    assert iba_main(["taxonomy", "--domain", "writing"]) == 0
    assert "technical_documentation" in capsys.readouterr().out


def test_unknown_domain_and_bad_data(tmp_path, capsys):
    assert iba_main(["taxonomy", "--domain", "nope"]) == 2
    assert "unknown domain 'nope'" in capsys.readouterr().err
    (tmp_path / "writing.yaml").write_text("id: writing\nname: W\nshort: W\nscenarios:\n  - id: x\n")
    assert iba_main(["taxonomy", "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "writing.yaml: scenarios[0].name: Field required" in err


def test_check_fails_on_partial_taxonomy(tmp_path, capsys):
    src = yaml.safe_load((default_data_dir() / "writing.yaml").read_text())
    (tmp_path / "writing.yaml").write_text(yaml.safe_dump(src, sort_keys=False, allow_unicode=True))
    assert iba_main(["taxonomy", "--data", str(tmp_path), "--check"]) == 1
    assert "missing domains: work" in capsys.readouterr().err
    assert iba_main(["taxonomy", "--data", str(tmp_path), "--domain", "writing", "--check"]) == 0
