"""One self-contained HTML page: inline CSS, PNGs as base64 data URIs, no script, no network.

Sections: summary, tables (best value of a ranked column bold, second underlined), figures, and
a drill-down per instance run (query, action, trace, verdicts with rationales, and the gold
evidence turns highlighted inside a window of the user's history). All text goes through
html.escape; nothing from a run is trusted as markup.
"""

from __future__ import annotations

import base64
import json
from html import escape
from typing import Any

from iba.report.data import Instance, ReportData
from iba.report.table_value import Table, fmt, is_reference
from iba.types import AnswerKey, RunRecord, ScoreRecord, Turn

HISTORY_WINDOW = 2  # turns shown before and after each gold evidence turn
MAX_DRILLDOWN = 400  # instance runs with a drill-down; the rest are counted, not shown
MAX_TEXT = 6000  # characters of one response / trace output shown

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d5d9e0;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px} nav a{margin-right:14px}
table{border-collapse:collapse;margin:6px 0 4px;background:#fff;font-size:13px}
th,td{border:1px solid #d5d9e0;padding:4px 8px;vertical-align:top} th{background:#eef1f5;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.best{font-weight:700;color:#0a7a3d} td.second{text-decoration:underline}
col.overall, td.overall{background:#eef8f0}
.note{color:#5b6572;font-size:12px;margin:2px 0 10px}
figure{display:inline-block;margin:8px 16px 8px 0;background:#fff;border:1px solid #d5d9e0;padding:6px}
figure img{max-width:560px;height:auto;display:block} figcaption{font-size:12px;color:#5b6572}
details.inst{background:#fff;border:1px solid #d5d9e0;border-radius:4px;margin:6px 0;padding:4px 10px}
details.inst>summary{cursor:pointer;font-weight:600}
pre{white-space:pre-wrap;word-break:break-word;background:#f3f5f8;border:1px solid #e1e5ea;padding:6px 8px;
    font-size:12.5px;max-height:420px;overflow:auto}
.pass{color:#0a7a3d;font-weight:600} .fail{color:#b3261e;font-weight:600} .unscored{color:#8a6d00;font-weight:600}
.turn{border-left:3px solid #d5d9e0;padding:2px 8px;margin:2px 0;font-size:12.5px}
.turn.gold{border-left-color:#0a7a3d;background:#e9f6ee} .turn.old{border-left-color:#b08800;background:#fff8e1}
.turn .who{color:#5b6572;font-size:11px} .gap{color:#8b949e;font-size:11px;margin:4px 0 4px 12px}
.tag{display:inline-block;font-size:11px;padding:0 5px;border-radius:3px;background:#e1e5ea;margin-left:4px}
.kv{color:#5b6572;font-size:12px}
tr.reference>*{background:#f1f1f4;color:#4a5058;font-style:italic} tr.reference>th:first-child{border-left:3px solid #7a7f87}
"""


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _cut(text: str, n: int = MAX_TEXT) -> str:
    return text if len(text) <= n else text[:n] + f"\n... [{len(text) - n} more characters]"


# --------------------------------------------------------------------------- tables


def table_html(t: Table, table_id: str | None = None) -> str:
    ranks = {c: t.ranks(c) for c in t.rank_columns} if len(t.rows) > 1 else {}
    out = [f'<h3>{escape(t.title)}</h3>', f'<table id="{escape(table_id or t.name)}" class="tbl-{escape(t.name)}">']
    out.append("<thead><tr>" + "".join(f"<th>{escape(c)}</th>" for c in t.columns) + "</tr></thead><tbody>")
    for i, row in enumerate(t.rows):
        cells = []
        for j, v in enumerate(row):
            cls = [] if j < t.label_columns else ["num"]
            r = ranks.get(j, {}).get(i)
            if r == 1:
                cls.append("best")
            elif r == 2:
                cls.append("second")
            if t.columns[j] == "Overall":
                cls.append("overall")
            tag = "th" if j == 0 else "td"
            attr = f' class="{" ".join(cls)}"' if cls else ""
            cells.append(f"<{tag}{attr}>{escape(t.text(v))}</{tag}>")
        ref = ' class="reference" title="a reference row, not a system"' if is_reference(row[0]) else ""
        out.append(f"<tr{ref}>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    if t.note:
        out.append(f'<p class="note">{escape(t.note)}</p>')
    return "\n".join(out)


# --------------------------------------------------------------------------- drill-down


def _passed(p: bool | None) -> str:
    if p is None:
        return '<span class="unscored">unscored</span>'
    return '<span class="pass">pass</span>' if p else '<span class="fail">fail</span>'


def _action_html(run: RunRecord) -> str:
    if run.status != "ok" or run.action is None:
        return f"<h4>Action</h4><p class=\"fail\">errored</p><pre>{escape(_cut(run.error or ''))}</pre>"
    a = run.action
    if a.kind == "generate":
        return f"<h4>Action: generate</h4><pre class=\"response\">{escape(_cut(a.text or ''))}</pre>"
    params = json.dumps(a.params, indent=2, ensure_ascii=False, sort_keys=True)
    return f"<h4>Action: call_api {escape(a.api_name or '')}</h4><pre class=\"response\">{escape(params)}</pre>"


def _trace_html(run: RunRecord) -> str:
    steps = run.action.trace if run.action else []
    if not steps:
        return ""
    rows = []
    for i, s in enumerate(steps, 1):
        prompt = f"{s.prompt or ''}{' #' + s.prompt_hash[:8] if s.prompt_hash else ''}"
        out = s.outputs if isinstance(s.outputs, str) else json.dumps(s.outputs, ensure_ascii=False, default=str)
        detail = f"<details><summary>outputs</summary><pre>{escape(_cut(out or '', 1500))}</pre></details>" if s.outputs else ""
        rows.append(
            f"<tr><td class=num>{i}</td><td>{escape(s.step)}</td><td>{escape(prompt)}</td><td class=num>{s.llm_calls}</td>"
            f"<td class=num>{s.prompt_tokens}+{s.completion_tokens}</td><td class=num>{s.latency_s:.2f}</td>"
            f"<td>{escape(s.error or '')}{detail}</td></tr>"
        )
    return ("<h4>Trace</h4><table class=trace><thead><tr><th>#</th><th>step</th><th>prompt</th><th>LLM calls</th>"
            "<th>tokens</th><th>s</th><th>error / outputs</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _requirement(key: AnswerKey | None, target: str) -> tuple[str, str]:
    if key is None:
        return "", ""
    for c in key.checkpoints:
        if c.id == target:
            return c.expected, c.kind
    for s in key.slots:
        if s.id == target:
            return f"{s.param} in {s.accepted}", s.kind
    for q in key.qa:
        if q.id == target:
            return q.question, "qa"
    return "", ""


def _verdicts_html(recs: list[ScoreRecord], key: AnswerKey | None) -> str:
    if not recs:
        return '<h4>Verdicts</h4><p class="unscored">not scored</p>'
    rows = []
    for r in sorted(recs, key=lambda r: (r.scorer, r.repeat)):
        for v in r.verdicts:
            req, kind = _requirement(key, v.target)
            rows.append(
                f"<tr><td>{escape(v.target)}</td><td>{escape(req)}</td><td>{escape(kind)}</td><td>{escape(r.scorer)}"
                f"{' #' + str(r.repeat) if r.repeat else ''}{' / ' + escape(v.judge) if v.judge != r.scorer.removeprefix('judge:') else ''}"
                f"</td><td>{_passed(v.passed)}</td><td>{escape(v.rationale)}</td></tr>"
            )
    scores = ", ".join(f"{escape(r.scorer)}{'#' + str(r.repeat) if r.repeat else ''}: {escape(fmt(None if r.score is None else 100 * r.score))}"
                       f"{' (invalid action)' if r.invalid_action else ''}" for r in sorted(recs, key=lambda r: (r.scorer, r.repeat)))
    return ("<h4>Verdicts</h4>" + f'<p class="kv">{scores}</p>'
            "<table class=verdicts><thead><tr><th>target</th><th>requirement</th><th>kind</th><th>scorer</th>"
            "<th>verdict</th><th>rationale</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _gap(n: int) -> str:
    return f'<div class="gap">... {n} turn{"s" if n != 1 else ""} ...</div>'


def history_window(history: list[Turn], gold: dict[str, str], old: set[str], width: int = HISTORY_WINDOW) -> str:
    """The gold turns with `width` turns around each; skipped stretches are counted, not shown."""
    index = {t.id: i for i, t in enumerate(history)}
    marks = sorted(index[g] for g in gold if g in index)
    if not marks:
        return '<p class="kv">no gold evidence turn found in the history</p>' if gold else ""
    keep: set[int] = set()
    for m in marks:
        keep.update(range(max(0, m - width), min(len(history), m + width + 1)))
    for i in sorted(keep):  # a one-turn gap costs as much space as the turn: show it
        if i + 2 in keep and i + 1 not in keep:
            keep.add(i + 1)
    if 1 in keep:
        keep.add(0)
    if len(history) - 2 in keep:
        keep.add(len(history) - 1)
    out, last = [], -1
    for i in sorted(keep):
        if i > last + 1:
            out.append(_gap(i - last - 1))
        t = history[i]
        cls = "turn old" if t.id in old else "turn gold" if t.id in gold else "turn"
        tag = f'<span class="tag">{escape(gold[t.id])}</span>' if t.id in gold else ""
        out.append(f'<div class="{cls}" id="turn-{escape(t.id)}"><div class="who">{escape(t.timestamp)} '
                   f'{escape(t.role)} {escape(t.id)}{tag}</div>{escape(t.text)}</div>')
        last = i
    if last < len(history) - 1:
        out.append(_gap(len(history) - 1 - last))
    return "".join(out)


def _evidence_html(inst: Instance, history: list[Turn] | None) -> str:
    key = inst.key
    if key is None or history is None:
        return ""
    gold: dict[str, str] = {}
    old: set[str] = set()
    for e in key.evidence:
        label = f"{e.dimension}={e.value} ({e.signal_type.replace('_', ' ')})" + (", superseded" if e.superseded else "")
        gold[e.turn_id] = f"{gold[e.turn_id]}; {label}" if e.turn_id in gold else label
        if e.superseded:
            old.add(e.turn_id)
    for ref in [*(c.evidence for c in key.checkpoints), *(s.evidence for s in key.slots)]:
        for t in ref:
            gold.setdefault(t, "evidence")
    body = history_window(history, gold, old)
    return (f"<h4>Gold evidence in the history ({len(gold)} turns of {len(history)}; "
            f"green = current evidence, amber = superseded)</h4>{body}")


def instance_html(inst: Instance, run: RunRecord, history: list[Turn] | None, judges, *, open_: bool = False) -> str:
    score = inst.trial_score(run, judges)
    anchor = f"run-{run.key}"
    head = (f"{escape(inst.instance_id)} &middot; {escape(inst.row.label)}"
            f"{' &middot; trial ' + str(run.trial) if len(inst.trials) > 1 else ''} &middot; "
            f"{escape(inst.domain)}/{escape(inst.scenario)} &middot; score {escape(fmt(None if score is None else 100 * score))}")
    query = inst.task.query if inst.task else ""
    meta = (f'<p class="kv">dataset {escape(inst.dataset)} &middot; user {escape(run.user_id)} &middot; {escape(inst.kind)} '
            f'&middot; status {escape(run.status)} &middot; {run.latency_s:.1f}s &middot; {run.usage.llm_calls} LLM calls, '
            f'{run.usage.prompt_tokens}+{run.usage.completion_tokens} tokens</p>')
    parts = [f'<details class="inst" id="{escape(anchor)}"{" open" if open_ else ""}><summary>{head}</summary>', meta]
    if query:
        parts.append(f"<h4>Query</h4><pre>{escape(query)}</pre>")
    parts += [_action_html(run), _trace_html(run), _verdicts_html(inst.scores.get(run.key, []), inst.key),
              _evidence_html(inst, history), "</details>"]
    return "\n".join(p for p in parts if p)


# --------------------------------------------------------------------------- page


def render_page(
    data: ReportData, tables: list[Table], figures: list[tuple[str, str, bytes]], *, title: str, summary: dict[str, Any],
) -> str:
    """figures: (file name, caption, png bytes)."""
    nav = ('<nav><a href="#tables">Tables</a><a href="#figures">Figures</a>'
           '<a href="#instances">Instances</a></nav>')
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
             f"<meta name=viewport content='width=device-width,initial-scale=1'><style>{CSS}</style></head><body><main>",
             f"<h1>{escape(title)}</h1>", nav, "<table class=summary>"]
    for k, v in summary.items():
        parts.append(f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>")
    parts.append("</table>")
    parts.append('<h2 id="tables">Tables</h2>')
    parts += [table_html(t) for t in tables]
    parts.append('<h2 id="figures">Figures</h2>')
    if not figures:
        parts.append('<p class="note">No figure: the analyses need answer keys (pass --dataset) and scored runs.</p>')
    for name, caption, png in figures:
        parts.append(f'<figure><img src="{data_uri(png)}" alt="{escape(caption)}" data-file="{escape(name)}">'
                     f"<figcaption>{escape(caption)}</figcaption></figure>")
    parts.append('<h2 id="instances">Instances</h2>')
    parts.append('<p class="note">Open an instance to see the query, the action, its trace, every verdict with its '
                 "rationale, and the gold evidence turns highlighted in the user's history.</p>")
    histories: dict[tuple[str, str], list[Turn] | None] = {}
    runs = [(inst, run) for inst in data.instances for run in inst.trials]
    for shown, (inst, run) in enumerate(runs[:MAX_DRILLDOWN]):
        hk = (inst.dataset, run.user_id)
        if hk not in histories:
            ds = data.datasets.get(inst.dataset)
            try:
                histories[hk] = ds.history(run.user_id) if ds is not None else None
            except Exception:  # a missing history file should cost a section, not the report
                histories[hk] = None
        # the first one starts open, so a reader sees what a drill-down holds
        parts.append(instance_html(inst, run, histories[hk], data.judges, open_=shown == 0))
    if len(runs) > MAX_DRILLDOWN:
        parts.append(f'<p class="note">{len(runs) - MAX_DRILLDOWN} more instance runs are not shown '
                     f'(limit {MAX_DRILLDOWN}).</p>')
    parts.append("</main></body></html>")
    return "\n".join(parts)
