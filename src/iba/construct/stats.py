"""Dataset statistics in the shape of the paper's Table 2, plus noise, dynamics and signal mix.

Counted over the dataset directory itself (not the build's intentions): instances by number of
evidence items (distinct non-superseded evidence turns) and of constraints (checkpoints + slots),
per domain and overall; S, D and P come from the taxonomy entries of the scenarios present.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from json.decoder import scanstring
from pathlib import Path
from typing import Any

import numpy as np

from iba.construct import style_audit, tell_audit
from iba.construct.count_histograms import BINS, bin_of, empty_hist
from iba.construct.memory import release_free_memory
from iba.construct.workers import can_fork
from iba.dataset import Dataset, DatasetError, dump_json
from iba.types import SIGNAL_TYPES, Taxonomy


def _count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


TELL_FEATURES = ("session_length", "turn_length", "time_of_day", "history_position", "session_position")
TELL_LIMIT = 0.6  # a feature separating evidence from noise better than this is a tell


def auc(pos: Any, neg: Any) -> float:
    """ROC AUC of a score separating `pos` from `neg`: the Mann-Whitney U over |pos| x |neg|, from
    average ranks (ties count one half). 1.0: every pos scores above every neg; 0.5: chance."""
    pos, neg = np.asarray(pos, dtype=float), np.asarray(neg, dtype=float)
    if len(pos) == 0 or len(neg) == 0:
        return 0.5
    x = np.concatenate([pos, neg])
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    # average rank (1-based) of each run of equal values
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    ends = np.r_[starts[1:], len(xs)]
    avg = (starts + ends + 1) / 2.0
    ranks = np.empty(len(x))
    ranks[order] = np.repeat(avg, ends - starts)
    u = ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2.0
    return float(u / (len(pos) * len(neg)))


# the head of a line as Turn.model_dump_json writes it, up to the text: ids and timestamps hold no
# quote or backslash, so this matches only that exact shape
_TURN_HEAD = re.compile(r'\{"id":"([^"\\]*)","session_id":"([^"\\]*)","timestamp":"([^"\\]*)","role":"(\w+)","text":"')


def _turn_fields(path: Path) -> tuple[list[str], list[int], list[str], list[str], list[int]]:
    """A history file's session ids (every turn), and for its user turns: their indices, ids,
    timestamps and text lengths. Fast path (the full build has ~2M turns): a line in the builder's
    exact format has its head matched and its text read by json's own string scanner, the line
    ending right after it; any other line (another field order, spacing, more fields) is parsed as JSON."""
    sids: list[str] = []
    where: list[int] = []
    ids: list[str] = []
    stamps: list[str] = []
    lengths: list[int] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            m = _TURN_HEAD.match(line)
            if m:
                text, end = scanstring(line, m.end())
                tid, sid, stamp, role = m.groups()
            if not m or line[end:].rstrip() != "}":
                if not line.strip():
                    continue
                t = json.loads(line)
                tid, sid, stamp, role, text = t["id"], t["session_id"], t["timestamp"], t["role"], t["text"]
            sids.append(sid)
            if role == "user":
                where.append(len(sids) - 1)
                ids.append(tid)
                stamps.append(stamp)
                lengths.append(len(text))
    return sids, where, ids, stamps, lengths


def tell_aucs(root: str | Path, evidence: dict[str, set[str]]) -> dict[str, Any]:
    """How well simple surface features tell evidence turns (`evidence`: user id -> turn ids the
    answer key cites) from the other user turns of the histories, as max(AUC, 1 - AUC): 0.5 is
    chance. Only user turns are compared (evidence turns are always the user's). Features: the
    number of turns in the turn's session, the turn's length in characters, the hour of its
    timestamp, its place in the history (0 first .. 1 last) and its index inside its session."""
    feats: dict[str, list[list[np.ndarray]]] = {f: [[], []] for f in TELL_FEATURES}
    for user, cited in sorted(evidence.items()):
        path = Path(root) / "histories" / f"{user}.jsonl"
        if not path.exists():
            continue
        sid, where, ids, stamps, lengths = _turn_fields(path)
        n = len(sid)
        if not n or not where:
            continue
        at = np.array(where)
        first = np.r_[True, np.array([a != b for a, b in zip(sid[1:], sid[:-1])], dtype=bool)]
        starts = np.flatnonzero(first)  # histories are in session order: a session is one run
        sizes = np.diff(np.r_[starts, n])
        run = (np.cumsum(first) - 1)[at]
        is_ev = np.array([i in cited for i in ids], dtype=bool)
        columns = {
            "session_length": sizes[run],
            "turn_length": np.array(lengths),
            "time_of_day": np.array([int(t[11:13]) + int(t[14:16]) / 60 for t in stamps]),
            "history_position": at / max(1, n - 1),
            "session_position": at - starts[run],
        }
        for name, col in columns.items():
            feats[name][0].append(col[is_ev])
            feats[name][1].append(col[~is_ev])
    out: dict[str, Any] = {}
    n_pos = n_neg = 0
    for name, (pos, neg) in feats.items():
        p, q = (np.concatenate(pos) if pos else np.zeros(0)), (np.concatenate(neg) if neg else np.zeros(0))
        a = auc(p, q)
        out[name] = round(max(a, 1 - a), 4)
        n_pos, n_neg = len(p), len(q)
    return {"auc": out, "evidence_turns": n_pos, "noise_user_turns": n_neg, "limit": TELL_LIMIT}


def _distractor_forms(root: Path) -> dict[str, dict[str, str]]:
    """User id -> distractor turn id -> its form, read as plain JSON (the full build has ~135,000
    labels; validated models would cost a hundred MB the statistics do not need; `iba validate` and
    Dataset.check validate them)."""
    path = root / "distractors.jsonl"
    out: dict[str, dict[str, str]] = {}
    if path.exists():
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    d = json.loads(line)
                    out.setdefault(d["user_id"], {})[d["turn_id"]] = d["form"]
    return out


def compute_stats(root: str | Path, taxonomy: Taxonomy | None = None, *, audit: bool = True, workers: int = 1,
                  style: bool | None = None) -> dict[str, Any]:
    """Table 2 statistics and the rest; `audit` adds the tell audit (iba.construct.tell_audit),
    run in a worker process beside the rest when `workers` > 1 (the same figures either way), and
    the style audit (iba.construct.style_audit) unless `style` is False (None: as `audit`)."""
    style = audit if style is None else style
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

    del keys
    release_free_memory()  # the answer keys: not kept, nor inherited by the audit's worker
    users = sorted(ds.personas)
    for u in users:  # a user id must name a file in histories/ (not ../x), and the file must be there
        if not ds.history_path(u).exists():
            raise DatasetError(f"{ds.history_path(u)}: file not found (persona {u!r} of personas.jsonl has no history)")
    # the tell audit's training (its longest part) in a worker, beside everything else here
    pending = tell_audit.PendingAudit(ds.root, relevant, worker=workers > 1 and can_fork()) if audit else None
    try:
        distractors = _distractor_forms(ds.root)
        turns = {u: _count_lines(ds.history_path(u)) for u in users}
        tells = tell_aucs(ds.root, relevant)
        # here while the tell audit trains in its worker
        styled = style_audit.audit(ds.root, relevant, distractors) if style else None
        audited = pending.result(distractors) if pending else None
    finally:
        if pending:
            pending.close()
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
        "distractor_turns": sum(len(v) for v in distractors.values()),
        # preference-shaped turns that are not evidence, per evidence-carrying turn
        "distractors_per_relevant": round(sum(len(v) for v in distractors.values()) / total_relevant, 2) if total_relevant else None,
        "tells": tells,
        **({"tell_audit": audited} if audit else {}),
        **({"style_audit": styled} if style else {}),
    }


def write_stats(root: str | Path, taxonomy: Taxonomy | None = None, *, audit: bool = True, workers: int = 1,
                style: bool | None = None) -> dict[str, Any]:
    stats = compute_stats(root, taxonomy, audit=audit, workers=workers, style=style)
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
    if stats.get("distractor_turns"):
        lines.append(f"distractor preferences {stats['distractor_turns']} turns ({stats['distractors_per_relevant']} per relevant turn)")
    tells = stats.get("tells")
    if tells:
        flagged = [k for k, v in tells["auc"].items() if v > tells["limit"]]
        lines.append(
            "feature audit (max(AUC, 1-AUC) of a surface feature separating evidence from other user turns; 0.5 = chance): "
            + ", ".join(f"{k} {v:.3f}" for k, v in tells["auc"].items())
            + (f"; above {tells['limit']}: {', '.join(flagged)}" if flagged else f"; all <= {tells['limit']}")
        )
    if stats.get("tell_audit"):
        lines += tell_audit.format_audit(stats["tell_audit"])
    if stats.get("style_audit"):
        lines += style_audit.format_audit(stats["style_audit"])
    return "\n".join(lines)
