"""Where `iba?align=slots` loses a slot: the evidence view it shows a parameter, and the model's choice over it.

For every CallAPI instance of the sampled users (the `bench/agents.py` sample: `--users`, `--seed`,
`--n-api`), run the agent's model-free Deep Retrieval (`expansion=template&reranker=rules`, plus
`--spec` options), build each parameter's evidence view (`slot_views`, within the spec's budget) and,
per gold slot:

  shown   is one of the slot's gold evidence turns, whole, in the view of its parameter (no model)
  choice  (with --model) the model's answer to the agent's own `agent_align_slot` prompt, over that
          view (`--show view`) or over the slot's gold turns alone (`--show gold`: can the model map
          the evidence to the value at all, retrieval aside)

  python bench/slot_probe.py --dataset /tmp/cur-full --seed 101 --n-api 25 --cache-dir C
  python bench/slot_probe.py --dataset /tmp/cur-full --seed 101 --n-api 6 --cache-dir C --model local:qwen2.5-coder-1.5b --show gold

Read-only except for the index cache. Prints one line per slot and the totals.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agents import bench_sample  # noqa: E402  (bench/agents.py: the same sample as the agent tables)

from iba.agents.alignment_tools import slot_prompt  # noqa: E402
from iba.agents.base import AgentEnv, parse_agent_spec, parse_options  # noqa: E402
from iba.agents.iba_options import IBAOptions  # noqa: E402
from iba.agents.replies import UNKNOWN, slot_reply_model  # noqa: E402
from iba.agents.toolkit import Toolkit  # noqa: E402
from iba.agents.trace import Trace  # noqa: E402
from iba.dataset import Dataset  # noqa: E402
from iba.eval.slots import synonym_map, value_matches  # noqa: E402
from iba.llm import resolve_backend  # noqa: E402
from iba.llm.structured import complete_json  # noqa: E402
from iba.taxonomy import scenario_api  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, required=True, help="IBA-Bench dataset dir (e.g. a --preset full build)")
    p.add_argument("--users", type=int, default=8)
    p.add_argument("--seed", type=int, default=101, help="sample seed (101: the tuning sample of session 8)")
    p.add_argument("--n-api", type=int, default=24, help="CallAPI instances of the sample")
    p.add_argument("--spec", default="budget=4000", help="extra iba options (default: budget=4000)")
    p.add_argument("--cache-dir", type=Path, default=Path(".iba-cache"))
    p.add_argument("--model", default=None, help="also ask this model the agent's slot prompt (e.g. local:qwen2.5-coder-1.5b)")
    p.add_argument("--show", choices=["view", "gold"], default="view", help="what the model sees (default: the view)")
    return p.parse_args(argv)


async def main(a: argparse.Namespace) -> None:
    ds = Dataset(a.dataset)
    keys, tasks = ds.answer_keys(), {t.instance_id: t for t in ds.instances}
    opts = parse_options(IBAOptions, {"expansion": "template", "reranker": "rules",
                                      **parse_agent_spec("iba?" + a.spec)[1]}, "iba")
    backend = resolve_backend(a.model, use_cache=False) if a.model else None
    totals: dict[str, list[int]] = {}
    for iid in bench_sample(ds, users=a.users, seed=a.seed, n_api=a.n_api, n_generate=0):
        task, key = tasks[iid], keys[iid]
        history = ds.history(task.user_id)
        turns = {t.id: t for t in history}
        tools = Toolkit(AgentEnv(backend=None, cache_dir=a.cache_dir), opts, task, history, Trace())  # type: ignore[arg-type]
        await tools.deep_retrieve()
        views = {name: (name, desc, values, view) for (name, desc, values), view in await tools.slot_views()}
        for slot in key.slots:
            if slot.param not in views:
                continue
            name, desc, values, view = views[slot.param]
            gold = [" ".join(turns[e].text.split()) for e in slot.evidence if e in turns]
            row = {"shown": any(line.split(" | ", 1)[1].startswith(g) for line in view.lines for g in gold)}
            if backend is not None:
                if a.show == "gold":
                    shown = [f"{turns[e].timestamp[:10]} | {' '.join(turns[e].text.split())}" for e in slot.evidence if e in turns]
                else:
                    shown = view.lines
                prompt = slot_prompt(task, shown, name, desc, values)
                reply, _ = await complete_json(backend, prompt.messages, slot_reply_model(values), max_tokens=24, seed=42)
                row["choice"] = value_matches(reply.value, slot.accepted, synonym_map(scenario_api(task.scenario))) if reply.value != UNKNOWN else False  # type: ignore[attr-defined]
                row["unknown"] = reply.value == UNKNOWN  # type: ignore[attr-defined]
            for k, v in row.items():
                totals.setdefault(k, []).append(int(v))
            print(f"{iid} {slot.param}: " + " ".join(f"{k}={int(v)}" for k, v in row.items()), flush=True)
    n = len(totals.get("shown", []))
    print(f"\n{n} slots: " + ", ".join(f"{k} {sum(v) / n:.3f}" for k, v in totals.items()) if n else "no slots")


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
