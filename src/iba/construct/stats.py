"""Dataset statistics in the shape of the paper's Table 2, plus noise, dynamics and signal mix.

Counted over the dataset directory itself (not the build's intentions): instances by number of
evidence items (distinct non-superseded evidence turns) and of constraints (checkpoints + slots),
per domain and overall; S, D and P come from the taxonomy entries of the scenarios present.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from iba.construct.table2 import BINS, bin_of, empty_hist
from iba.dataset import Dataset, dump_json
from iba.types import SIGNAL_TYPES, Taxonomy


def _count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def compute_stats(root: str | Path, taxonomy: Taxonomy | None = None) -> dict[str, Any]:
    ds = Dataset(root)
    if taxonomy is None:
        from iba.taxonomy import load_taxonomy

        taxonomy = load_taxonomy()
    scen_tax = {s.id: s for s in taxonomy.scenarios()}
    domain_names = {d.id: d.name for d in taxonomy.domains}
    keys = ds.answer_keys()
    instances = ds.instances

    per_domain: dict[str, dict[str, Any]] = {}
    overall_ev, overall_con = empty_hist(), empty_hist()
    relevant: dict[str, set[str]] = {}
    labels: set[tuple[str, str, str, str, bool]] = set()
    n_constraints = n_dynamic = n_state = n_checkpoints = n_slots = n_qa = 0
    for tv in instances:
        key = keys.get(tv.instance_id)
        if key is None:
            raise ValueError(f"{ds.root}/answer_key.jsonl: no answer key for instance {tv.instance_id!r}")
        row = per_domain.setdefault(
            tv.domain,
            {"name": domain_names.get(tv.domain, tv.domain), "scenarios": set(), "I": 0, "evidence_hist": empty_hist(), "constraints_hist": empty_hist()},
        )
        row["scenarios"].add(tv.scenario)
        row["I"] += 1
        e, c = bin_of(key.n_evidence), bin_of(key.n_constraints)
        row["evidence_hist"][e] += 1
        row["constraints_hist"][c] += 1
        overall_ev[e] += 1
        overall_con[c] += 1
        targets = [*key.checkpoints, *key.slots]
        n_constraints += len(targets)
        n_dynamic += sum(t.kind == "dynamic" for t in targets)
        n_state += sum(t.source == "state" for t in targets)
        n_checkpoints += len(key.checkpoints)
        n_slots += len(key.slots)
        n_qa += len(key.qa)
        rel = relevant.setdefault(tv.user_id, set())
        for lab in key.evidence:
            rel.add(lab.turn_id)
            labels.add((lab.turn_id, lab.dimension, lab.value, lab.signal_type, lab.superseded))

    users = sorted(ds.personas)
    turns = {u: _count_lines(ds.root / "histories" / f"{u}.jsonl") for u in users if (ds.root / "histories" / f"{u}.jsonl").exists()}
    total_turns = sum(turns.values())
    total_relevant = sum(len(v) for v in relevant.values())
    signal = Counter(t for _, _, _, t, _ in labels)

    domains_out: dict[str, Any] = {}
    order = [x.id for x in taxonomy.domains]
    for dom in sorted(per_domain, key=lambda d: (order.index(d) if d in order else len(order), d)):
        row = per_domain[dom]
        row["order"] = len(domains_out)  # the taxonomy's domain order (JSON keys get sorted)
        ids = sorted(row.pop("scenarios"))
        known = [scen_tax[s] for s in ids if s in scen_tax]
        row["S"] = len(ids)
        row["D"] = sum(len(s.dimensions) for s in known) if known else None
        # P: integer-truncated mean number of values per scenario (Table 2's definition)
        row["P"] = int(sum(sum(len(d.values) for d in s.dimensions) for s in known) / len(known)) if known else None
        domains_out[dom] = row
    all_ids = sorted({tv.scenario for tv in instances})
    known_all = [scen_tax[s] for s in all_ids if s in scen_tax]
    return {
        "dataset": ds.name,
        "domains": len(per_domain),
        "scenarios": len(all_ids),
        "dimensions": sum(len(s.dimensions) for s in known_all),
        "values_per_scenario": int(sum(sum(len(d.values) for d in s.dimensions) for s in known_all) / len(known_all)) if known_all else None,
        "personas": len(ds.personas),
        "instances": len(instances),
        "evidence_hist": overall_ev,
        "constraints_hist": overall_con,
        "checkpoints": n_checkpoints,
        "slots": n_slots,
        "qa_probes": n_qa,
        "dynamic_checkpoint_share": round(n_dynamic / n_constraints, 4) if n_constraints else 0.0,
        "state_constraints": n_state,
        "signal_types": {t: signal.get(t, 0) for t in SIGNAL_TYPES},
        "history_turns": total_turns,
        "relevant_turns": total_relevant,
        # noise turns per relevant (evidence-carrying) turn; turns_per_relevant is the paper's "once per N turns"
        "noise_ratio": round((total_turns - total_relevant) / total_relevant, 2) if total_relevant else None,
        "turns_per_relevant": round(total_turns / total_relevant, 2) if total_relevant else None,
        "turns_per_persona": round(total_turns / len(turns), 1) if turns else 0,
        "per_domain": domains_out,
    }


def write_stats(root: str | Path, taxonomy: Taxonomy | None = None) -> dict[str, Any]:
    stats = compute_stats(root, taxonomy)
    dump_json(Path(root) / "stats.json", stats)
    return stats


def format_table2(stats: dict[str, Any]) -> str:
    """Table 2's columns per domain and overall, then the extra figures, as aligned text."""
    head = ["Domain", "S", "D", "P", "I", *(f"E{b}" for b in BINS), *(f"C{b}" for b in BINS)]
    rows = []
    for r in sorted(stats["per_domain"].values(), key=lambda r: r.get("order", 0)):
        rows.append([r["name"], r["S"], r["D"], r["P"], r["I"], *r["evidence_hist"].values(), *r["constraints_hist"].values()])
    rows.append(
        ["Overall", stats["scenarios"], stats["dimensions"], stats["values_per_scenario"], stats["instances"],
         *stats["evidence_hist"].values(), *stats["constraints_hist"].values()]
    )
    cells = [[str("-" if v is None else v) for v in r] for r in [head, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    sig = ", ".join(f"{k} {v}" for k, v in stats["signal_types"].items())
    lines += [
        "",
        "E1..E5+: instances by number of evidence items; C1..C5+: by number of constraints (Table 2).",
        f"personas {stats['personas']}; history turns {stats['history_turns']} ({stats['turns_per_persona']} per persona); "
        f"relevant turns {stats['relevant_turns']}",
        f"noise ratio {stats['noise_ratio']} noise turns per relevant turn (one relevant turn per {stats['turns_per_relevant']} turns)",
        f"dynamic checkpoint share {stats['dynamic_checkpoint_share']}; state-driven constraints {stats['state_constraints']}",
        f"signal types: {sig}",
    ]
    return "\n".join(lines)
