"""Where Deep Retrieval misses gold evidence: per missed turn, its signal type and whether it
reached the candidate pool at all (a query problem) or was dropped by salience selection (a
ranking problem). Uses the index cache of `iba eval-retrieval`.

  python bench/retrieval_misses.py DATASET [--users 8] [--seed 42] [--show 10] [--cache-dir .iba-cache]
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

from iba.dataset import Dataset
from iba.retrieval.evaluate import sample_users
from iba.retrieval.deep import deep_retrieve
from iba.retrieval.evaluate import gold_turns, recall_at
from iba.retrieval.index import HistoryIndex


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset")
    p.add_argument("--users", type=int, default=None, help="a seeded sample of N users (default: all)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--show", type=int, default=10, help="print this many missed turns")
    p.add_argument("--cache-dir", type=Path, default=Path(".iba-cache"))
    a = p.parse_args()
    ds = Dataset(a.dataset)
    keys = ds.answer_keys()
    tasks = sample_users(list(ds.instances), a.users, a.seed) if a.users else list(ds.instances)
    recalls: list[float] = []
    by_type: collections.Counter[str] = collections.Counter()
    reached: collections.Counter[str] = collections.Counter()
    shown = 0
    for task in tasks:
        key = keys[task.instance_id]
        gold = gold_turns(key)
        if not gold:
            continue
        history = ds.history(task.user_id)
        result = deep_retrieve(HistoryIndex.build(history, "minilm", a.cache_dir), task)
        recalls.append(recall_at(result.passages, gold, 10))
        covered = {t for p in result.passages[:10] for t in p.turn_ids}
        pool = {t for p in result.candidates for t in p.turn_ids}
        text = {t.id: t.text for t in history}
        for e in key.evidence:
            if e.superseded or e.turn_id in covered:
                continue
            by_type[e.signal_type] += 1
            reached["in the candidate pool, not selected" if e.turn_id in pool else "never retrieved"] += 1
            if shown < a.show:
                shown += 1
                print(f"{task.instance_id} | {task.query[:100]}\n  missed {e.signal_type} {e.dimension}={e.value}: {text[e.turn_id][:160]}")
    print(f"\nDeep R@10 {sum(recalls) / len(recalls):.3f} over {len(recalls)} instances")
    print("missed turns by signal type:", dict(by_type))
    print("missed turns by stage:", dict(reached))


if __name__ == "__main__":
    main()
