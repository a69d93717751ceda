"""A tiny PrefEval-format folder with invented text (PrefEval's own text must not enter the repo)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# topic -> items; each item gives every form's fields for one invented preference
ITEMS = {
    "kitchen_tools": [
        {
            "preference": "I only cook with cast iron pans and refuse to use nonstick coatings.",
            "question": "Which pan should I buy for making omelettes this weekend?",
            "explanation": "Omelette advice usually points to nonstick pans, which this user rejects.",
            "options": ["A well-seasoned cast iron skillet.", "A nonstick aluminium pan.", "A ceramic-coated nonstick pan.", "A disposable foil tray."],
            "persona": "A retired ferry mechanic who restores old boats",
            "persona_turns": [
                "Hello! I am fixing up a wooden dinghy this month. Which varnish lasts longest outdoors?",
                "Good tip. I usually prefer cast iron pans for cooking on the boat and avoid nonstick coatings entirely. Anyway, how do I keep brass fittings shiny?",
                "Thanks. Any ideas for keeping the cabin dry in winter?",
            ],
        },
        {
            "preference": "I avoid electric kitchen gadgets and prefer hand-powered tools.",
            "question": "What is a good way to make whipped cream for a party?",
            "explanation": "The obvious answer is an electric mixer, which the user avoids.",
            "options": ["Whisk it by hand with a balloon whisk.", "Use a stand mixer on high.", "Use an electric hand mixer.", "Buy an aerosol can."],
            "persona": "A primary school music teacher",
            "persona_turns": [
                "Hi, I need a song for thirty children to sing at the spring concert. Any suggestions?",
                "Lovely. Do you know simple rhythm games for seven year olds?",
            ],
        },
    ],
    "garden_plans": [
        {
            "preference": "I never use chemical pesticides in my vegetable garden.",
            "question": "Aphids are eating my lettuce; how do I get rid of them?",
            "explanation": "Many guides suggest spraying insecticide, which conflicts with the preference.",
            "options": ["Release ladybirds and spray soapy water.", "Spray a synthetic insecticide.", "Dust the plants with a chemical powder.", "Call a pest control firm for fumigation."],
            "persona": "A night-shift nurse who bakes sourdough",
            "persona_turns": [
                "Morning! My sourdough starter smells like nail polish. Is it ruined?",
                "Phew. By the way, I never use chemical pesticides in the vegetable garden I keep behind the hospital flats, I tend to avoid them. What flour gives the best crust?",
                "Great, and how long should the dough rest in the fridge?",
                "Thanks for all the help today!",
            ],
        },
    ],
}

FILLER = [
    ["How many legs does a spider have?", "Eight.", "And an insect?", "Six."],
    ["Translate hello into Spanish.", "Hola.", "And goodbye?", "Adios.", "Thanks!", "You're welcome."],
    ["What is 12 times 12?", "144."],
]


def write_prefeval(root: Path, items: dict = ITEMS, filler: list = FILLER) -> Path:
    """Write the fixture in PrefEval's benchmark_dataset layout and return `root`."""

    def dump(rel: str, obj: object) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(obj, indent=1), encoding="utf-8")

    for topic, recs in items.items():
        base = [{k: r[k] for k in ("preference", "question", "explanation")} for r in recs]
        dump(f"explicit_preference/{topic}.json", base)
        choice = []
        for b, r in zip(base, recs):
            opts = r["options"]
            choice.append(
                {
                    **b,
                    "implicit_query": "Can you suggest something for me?",
                    "options": opts,
                    "conversation": {
                        "query": "Can you suggest something for me?",
                        "assistant_options": "Here are some ideas. " + " ".join(f"{i + 1}. {o}" for i, o in enumerate(opts)),
                        "user_selection": f"I'll go with this: {opts[0]} The rest are not for me.",
                        "assistant_acknowledgment": "Sounds good, noted.",
                    },
                    "aligned_op": opts[0],
                }
            )
        dump(f"implicit_preference/choice-based/{topic}.json", choice)
        persona = []
        for b, r in zip(base, recs):
            conv = {str(i): {"user": u, "assistant": f"Here is my answer to part {i}."} for i, u in enumerate(r["persona_turns"])}
            persona.append({**b, "persona": r["persona"], "conversation": conv})
        dump(f"implicit_preference/persona-driven/{topic}.json", persona)
        dump(f"mcq_options/{topic}.json", [{**b, "classification_task_options": r["options"]} for b, r in zip(base, recs)])
    dump(
        "filtered_inter_turns.json",
        [
            {
                "conversation_id": f"c{i}",
                "model": "x",
                "conversation": [{"role": "user" if j % 2 == 0 else "assistant", "content": m} for j, m in enumerate(c)],
                "turn": len(c) // 2,
                "language": "English",
                "redacted": False,
            }
            for i, c in enumerate(filler)
        ],
    )
    return root


@pytest.fixture
def prefeval_dir(tmp_path: Path) -> Path:
    return write_prefeval(tmp_path / "prefeval")
