"""Where `iba?align=slots` loses a slot: the evidence lines it shows, and the model's choice over them.

For every CallAPI instance of the sampled users (the `bench/agents.py` sample: `--users`, `--seed`,
`--n-api`), run the agent's model-free Deep Retrieval (`expansion=template&reranker=rules`, plus
`--spec` options), take the user's dated lines of the kept passages (`dated_user_lines`) and, per
gold slot:

  lines   is one of the slot's gold evidence turns among the lines shown for its parameter: all kept
          lines, and the nearest k (the `slot_lines` rule) for each `--k`; no model involved
  choice  (with --model) the model's answer to the agent's own `agent_align_slot` prompt, over the
          nearest `--show-k` lines (`--show nearest`) or over the slot's gold lines alone (`--show gold`:
          can the model map the evidence to the value at all, retrieval aside)

  python bench/slot_probe.py --dataset /tmp/cur-full --seed 101 --n-api 25 --cache-dir C
  python bench/slot_probe.py --dataset /tmp/cur-full --seed 101 --n-api 6 --cache-dir C --model local:qwen2.5-coder-1.5b --show gold

Read-only except for the index cache. Prints one line per slot and the totals.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agents import draw_sample  # noqa: E402  (bench/agents.py: the same sample as the agent tables)

from iba.agents.alignment_tools import choice_params, param_query, slot_prompt  # noqa: E402
from iba.agents.base import AgentEnv, parse_agent_spec, parse_options  # noqa: E402
from iba.agents.iba_options import IBAOptions  # noqa: E402
from iba.agents.passage_views import dated_user_lines  # noqa: E402
from iba.agents.replies import UNKNOWN, slot_reply_model  # noqa: E402
from iba.agents.toolkit import Toolkit  # noqa: E402
from iba.agents.trace import Trace  # noqa: E402
from iba.dataset import Dataset  # noqa: E402
from iba.eval.slots import synonym_map, value_matches  # noqa: E402
from iba.llm import resolve_backend  # noqa: E402
from iba.llm.structured import complete_json  # noqa: E402
from iba.run.runner import api_template  # noqa: E402


class _NoModel:
    """Deep Retrieval with template queries and the rule scorer calls no model."""

    model_id = "none"
    context_window = 32768


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, required=True, help="IBA-Bench dataset dir (e.g. a --preset full build)")
    p.add_argument("--users", type=int, default=8)
    p.add_argument("--seed", type=int, default=101, help="sample seed (101: the tuning sample of session 8)")
    p.add_argument("--n-api", type=int, default=24, help="CallAPI instances of the sample")
    p.add_argument("--spec", default="unit=mixed", help="extra iba options for retrieval (default: unit=mixed)")
    p.add_argument("--k", type=int, action="append", help="nearest-k line rules to score (default: 3 and 8)")
    p.add_argument("--cache-dir", type=Path, default=Path(".iba-cache"))
    p.add_argument("--model", default=None, help="also ask this model the agent's slot prompt (e.g. local:qwen2.5-coder-1.5b)")
    p.add_argument("--show", choices=["nearest", "gold"], default="nearest", help="lines the model sees (default: nearest)")
    p.add_argument("--show-k", type=int, default=3, help="nearest lines the model sees with --show nearest (default: 3)")
    a = p.parse_args(argv)
    a.k = a.k or [3, 8]
    return a


def _hit(shown: list[str], gold: list[str]) -> bool:
    return any(g[:100] in t or t[:100] in g for t in shown for g in gold)


async def main(a: argparse.Namespace) -> None:
    ds = Dataset(a.dataset)
    keys, tasks = ds.answer_keys(), {t.instance_id: t for t in ds.instances}
    opts = parse_options(IBAOptions, {"expansion": "template", "reranker": "rules",
                                      **parse_agent_spec("iba?" + a.spec)[1]}, "iba")
    backend = resolve_backend(a.model, use_cache=False) if a.model else None
    totals: dict[str, list[int]] = {}
    for iid in draw_sample(ds, users=a.users, seed=a.seed, n_api=a.n_api, n_generate=0):
        task, key = tasks[iid], keys[iid]
        history = ds.history(task.user_id)
        turns = {t.id: t for t in history}
        tools = Toolkit(AgentEnv(backend=_NoModel(), cache_dir=a.cache_dir), opts, task, history, Trace())  # type: ignore[arg-type]
        await tools.deep_retrieve()
        lines = dated_user_lines(tools.evidence, limit=60)
        params = {name: (name, desc, values) for name, desc, values in choice_params(task.api_schema)}
        for slot in key.slots:
            if slot.param not in params:
                continue
            gold = [turns[e].text.strip()[:240] for e in slot.evidence if e in turns]
            texts = [line.split(" | ", 1)[1] for line in lines]
            row = {"all": _hit(texts, gold)}
            if texts:
                name, desc, values = params[slot.param]
                vec = tools.index.embedder.encode([param_query(task, name, desc, values)] + texts)  # type: ignore[union-attr]
                order = list(np.argsort(-(vec[1:] @ vec[0]), kind="stable"))
            else:
                order = []
            for k in a.k:
                row[f"nearest {k}"] = _hit([texts[j] for j in order[:k]], gold)
            if backend is not None:
                name, desc, values = params[slot.param]
                if a.show == "gold":
                    shown = [f"{turns[e].timestamp[:10]} | {turns[e].text.strip()[:240]}" for e in slot.evidence if e in turns]
                else:
                    shown = [lines[j] for j in sorted(order[: a.show_k])]
                prompt = slot_prompt(task, shown, name, desc, values)
                reply, _ = await complete_json(backend, prompt.messages, slot_reply_model(values), max_tokens=24, seed=42)
                row["choice"] = value_matches(reply.value, slot.accepted, synonym_map(api_template(task))) if reply.value != UNKNOWN else False  # type: ignore[attr-defined]
                row["unknown"] = reply.value == UNKNOWN  # type: ignore[attr-defined]
            for k, v in row.items():
                totals.setdefault(k, []).append(int(v))
            print(f"{iid} {slot.param}: " + " ".join(f"{k}={int(v)}" for k, v in row.items()), flush=True)
    n = len(totals.get("all", []))
    print(f"\n{n} slots: " + ", ".join(f"{k} {sum(v) / n:.3f}" for k, v in totals.items()) if n else "no slots")


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
