"""The dataset card (README.md) of an export: YAML metadata the Hub and `datasets` read, then prose.

The YAML holds the configs and their parquet files, the features of each config (from `datasets`
when it is installed; without it the Hub and `datasets` infer them from the parquet), the
license, and an `iba:` block with the generator, its version (`params.generator_version`) and seed
and the taxonomy version. The body says what agents may see and which configs a public release
holds back, then Table 2's statistics, the tell audit (the lexical one: can a TF-IDF classifier
find the evidence by wording), the feature audit (how well one surface feature of a turn locates
the evidence), the limitations and how to cite.
"""

from __future__ import annotations

from typing import Any

import yaml

from iba.hf.tables import CONFIGS, SPLIT, parquet_path
from iba.types import Manifest

# the data PrefEval imports are made of is CC BY-NC 4.0; what `iba build` writes is the toolkit's own
PREFEVAL_LICENSE = "cc-by-nc-4.0"
BUILT_LICENSE = "mit"


def default_license(manifest: Manifest) -> str:
    return PREFEVAL_LICENSE if "prefeval" in manifest.generator else BUILT_LICENSE


def _features(schema: Any) -> list[dict[str, Any]] | None:
    try:
        from datasets import Features
    except ImportError:
        return None
    return Features.from_arrow_schema(schema)._to_yaml_list()


def _tell_audit(stats: dict[str, Any]) -> str:
    """The lexical tell audit (README's meaning of the name), or why it was not run."""
    audit = stats.get("tell_audit")
    if not audit:
        return "Not run (`iba stats --no-audit`)."
    c = audit.get("classifier") or {}
    if not c.get("available"):
        return f"Not run: {c.get('reason', 'no classifier result')}."
    vs_d = c.get("auc_evidence_vs_distractors")
    few = (f" With {c['test_evidence_turns']} test evidence turn(s) these are too few to read as rates: audit a "
           "larger build." if c["test_evidence_turns"] < MIN_READABLE_EVIDENCE else "")
    return (
        "Can wording alone find the evidence? A TF-IDF word 1-2-gram logistic regression is trained on the user "
        f"turns of {c['train_personas']} persona(s) and tested on {c['test_personas']} other(s) "
        f"({c['test_user_turns']:,} test user turns, {c['test_evidence_turns']:,} of them evidence). Of the "
        f"{c['test_evidence_turns']:,} turns it ranks highest, **{c['precision_at_n']:.0%}** are evidence "
        f"(precision at N; random ranking: {c['evidence_share']:.0%}). It separates evidence from distractor "
        f"preferences with AUC **{'not measured (no distractors)' if vs_d is None else f'{vs_d:.2f}'}**, and "
        f"evidence from every other user turn with AUC {c['auc_evidence_vs_rest']:.2f} (split seed "
        f"{audit.get('seed')}).{few}"
    )


def _feature_audit(stats: dict[str, Any]) -> str:
    tells = stats.get("tells")
    if not tells:
        return ""
    flagged = [k for k, v in tells["auc"].items() if v > tells["limit"]]
    return ("\n## Feature audit\n\nHow well one surface feature of a user turn separates evidence turns from the "
            "other user turns, as max(AUC, 1 − AUC) (0.5: not at all; above "
            f"{tells['limit']} would be a tell): "
            + ", ".join(f"{k} {v:.3f}" for k, v in tells["auc"].items())
            + f" ({tells['evidence_turns']:,} evidence turns, {tells['noise_user_turns']:,} other user turns). "
            + (f"**Above the limit: {', '.join(flagged)}.**" if flagged else "None is above the limit.") + "\n")


MIN_READABLE_EVIDENCE = 20  # test evidence turns below which the audit's rates are noise (demo: 2)
CITATION = """@misc{iba_bench,
  title  = {From Profiling to Synthesis: Benchmarking Implicit Behavioral Alignment in Personalized LLM Agents},
  author = {Song, Jiajia and Li, Bobo and Yi, Haiwen and Ji, Zibo and Zhang, Meishan and Fei, Hao and
            Zhang, Min and Lee, Mong-Li and Hsu, Wynne},
}"""
PREFEVAL_CITATION = """@inproceedings{prefeval,
  title     = {Do LLMs Recognize Your Preferences? Evaluating Personalized Preference Following in LLMs},
  author    = {Zhao, Siyan and Hong, Mingyi and Liu, Yang and Hazarika, Devamanyu and Lin, Kaixiang},
  booktitle = {ICLR},
  year      = {2025},
}"""


def dataset_card(manifest: Manifest, stats: dict[str, Any], written: list[dict[str, Any]], held_back: list[str], *,
                 license: str | None = None, pretty_name: str | None = None) -> str:
    from iba import __version__
    from iba.construct.stats import format_table2

    configs, infos = [], []
    for w in written:
        configs.append({"config_name": w["name"], "data_files": [{"split": SPLIT, "path": parquet_path(w["name"])}],
                        **({"default": True} if w["name"] == "instances" else {})})
        features = _features(w["schema"])
        if features is not None:
            infos.append({"config_name": w["name"], "features": features,
                          "splits": [{"name": SPLIT, "num_bytes": w["memory_bytes"], "num_examples": w["rows"]}],
                          "download_size": w["bytes"], "dataset_size": w["memory_bytes"]})
    meta: dict[str, Any] = {
        "license": license or default_license(manifest),
        "pretty_name": pretty_name or f"IBA-Bench: {manifest.name}",
        "language": ["en"],
        "tags": ["personalization", "agents", "implicit-preferences", "iba-bench"],
        "task_categories": ["text-generation"],
        "configs": configs,
        **({"dataset_info": infos} if infos else {}),
        "iba": {
            "format": manifest.format, "name": manifest.name, "generator": manifest.generator,
            "generator_version": manifest.generator_version,
            "writer": manifest.writer, "seed": manifest.seed, "taxonomy_version": manifest.taxonomy_version,
            "created_by": manifest.created_by, "exported_by": f"iba {__version__}", "held_back": held_back,
        },
    }
    descriptions = {c.name: c.description for c in CONFIGS}
    rows = "\n".join(f"| `{w['name']}` | {w['rows']:,} | {descriptions[w['name']]} |" for w in written)
    held = "".join(f"\n| `{name}` | held back | {descriptions[name]} |" for name in held_back)
    version = manifest.generator_version
    hidden_note = (
        "This release holds back " + ", ".join(f"`{h}`" for h in held_back) + ": score runs with the key kept "
        "elsewhere, `iba run THIS_FOLDER_OR_REPO --answer-key DIR/answer_key.jsonl`, where DIR holds the hidden "
        "files side by side (the dataset folder this release was exported from: `answer_key.jsonl`, "
        "`distractors.jsonl`, `persona_states.jsonl`)." if held_back else
        "The evaluator-only configs (`answer_key`; `distractors` and `persona_states` where the dataset has them) "
        "are included; a public release with a hidden test split exports with `--hold-back` instead."
    )
    writer = ("iba's procedural writer from template banks and noise topics" if manifest.writer == "procedural"
              else f"iba's `{manifest.writer}` writer")
    if "prefeval" in manifest.generator:
        writer = "PrefEval's preferences and queries, placed among filler turns by iba's importer"
    cite = CITATION + ("\n\nThe histories' preferences and queries come from PrefEval:\n\n" + PREFEVAL_CITATION
                       if "prefeval" in manifest.generator else "")
    body = f"""
# {meta['pretty_name']}

An IBA-Bench dataset (*From Profiling to Synthesis: Benchmarking Implicit Behavioral Alignment in
Personalized LLM Agents*): personas with long, noisy, timestamped histories in which preferences show
only implicitly, and tasks whose correct execution depends on them. Generated by `{manifest.generator}`
(generator version {version if version is not None else "not recorded"}, writer `{manifest.writer}`, seed
{manifest.seed}, taxonomy `{manifest.taxonomy_version}`, {manifest.created_by}); exported by iba {__version__}.

| config | rows | what it holds |
|---|---|---|
{rows}{held}

{hidden_note} Agents must only ever see `instances`, `histories` and `personas`. Of a persona, agents see
its background, traits and role (what a user would tell an assistant about themselves); its transient
states (an illness, a deadline) and their dates decide some slots and checkpoints and are evaluator-only,
as the answer key is: the history hints at them, an agent has to find them there.

## Loading

```python
from datasets import load_dataset
tasks = load_dataset("THIS_REPO", "instances", split="{SPLIT}")
turns = load_dataset("THIS_REPO", "histories", split="{SPLIT}")   # filter on user_id
```

or with pyarrow alone: `pyarrow.parquet.read_table("instances/{SPLIT}-00000-of-00001.parquet")`. Columns
holding JSON text: `instances.api_schema`, `personas.background`, `answer_key.fixed_params`,
`answer_key.checkpoints[].verifier`, `answer_key.slots[].accepted`. Evidence labels carry `span`
(character offsets into the turn's text) and `clause` where the writer knows them.

To run agents on it: `pip install iba` then `iba run THIS_FOLDER_OR_REPO --agent rag` (the folder is read
back into an IBA dataset folder; `iba_manifest.json` is the original manifest, `stats.json` the
statistics below).

## Statistics (Table 2)

```
{format_table2(stats)}
```

## Tell audit

{_tell_audit(stats)}
{_feature_audit(stats)}
## Limitations

- The histories are synthetic ({writer}), in English: not real users' conversations; the
  preferences come from a fixed set of scenarios and dimensions.
- Generate(text) tasks are scored by LLM judges: a score depends on the judge (`iba judge-check` measures
  one on known compliant and violating responses; small local models are not reliable judges).
- The audits above bound how much wording and surface features give away on this build; they do not
  prove that nothing else does.
- A score is comparable only on the same generator version, seed and instances (`iba_manifest.json`; a
  submission names them).

## Citation

```bibtex
{cite}
```
"""
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000) + "---\n" + body
