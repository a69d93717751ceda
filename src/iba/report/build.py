"""The report of stored runs: the paper's tables and figures as Markdown, CSV, PNG and HTML.

`build_report` (used by `iba report`, `iba demo` and bench/agents.py) writes into out_dir:
  table4.md/.csv          per-domain scores (Table 4 shape), cells.csv with n and unscored per cell,
                          left_out.csv: instances outside the same-instance comparison, and why
  ci.md/.csv, paired.md/.csv  overall score with 95% bootstrap interval; paired differences
  references.md/.csv      each system between the reference rows of its model: null -> system ->
                          oracle, gain over null and gap to the oracle (when null or oracle rows ran)
  attribution.md/.csv     per checkpoint/slot: gold evidence kept x applied, and the retrieved ->
                          named -> applied funnel (with answer keys); attribution_targets.csv per target
  scenarios.md/.csv       per-scenario breakdown
  table5.md/.csv          ablation deltas (when agent specs with options sit beside the plain spec)
  table9*.md/.csv         mean ± sample sd over replicates (when judges repeat or agents have trials)
  agreement.md/.csv       judge agreement (when several judges or repeats exist)
  cost.md/.csv            LLM calls, tokens, wall time per agent x model
  fig4_domains.png, fig5a_evidence.png, fig5b_constraints.png, fig5c_static_dynamic.png,
  fig5d_qa_vs_task.png    (each only when it has data; fig4/fig5*.csv hold the plotted numbers;
                          fig4's bars carry the ci table's 95% bootstrap intervals)
  report.md               every table in one file
  report.html             one self-contained page (tables, figures, per-instance drill-down)
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from iba.dataset import atomic_write_text
from iba.llm.secrets import redact_stored


def _write(path: Path, text: str) -> None:
    """Every text file of a report, scrubbed of the configured secrets (records stored before the
    store scrubbed them, dataset text, anything a reply echoed)."""
    atomic_write_text(path, redact_stored(text))


def build_report(
    store_path: str | Path,
    dataset_dirs: Sequence[str | Path],
    out_dir: str | Path,
    runs: Sequence[str] | None = None,
    judges: Sequence[str] | None = None,
    answer_keys: Sequence[str | Path] | None = None,
) -> Path:
    """Write every table, figure and the HTML page for the stored runs; returns the HTML path."""
    from iba.report import analyses, plots, tables
    from iba.report.data import load_report_data
    from iba.report.html import render_page
    from iba.report.references import reference_table
    from iba.report.table_value import records_to_csv

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = load_report_data(store_path, dataset_dirs, runs=runs, judges=judges, answer_keys=answer_keys)

    all_tables = tables.all_tables(data)
    agreement = analyses.agreement_table(data)
    if agreement is not None:
        all_tables.insert(len(all_tables) - 1, agreement)
    refs = reference_table(data)
    if refs is not None:
        all_tables.insert(1, refs)  # after Table 4: the systems between their references
    for t in all_tables:
        _write(out / f"{t.name}.md", t.to_markdown())
        _write(out / f"{t.name}.csv", t.to_csv())
    _write(out / "cells.csv", records_to_csv(tables.table4_cells(data)))
    if any(t.name == "attribution" for t in all_tables):
        from iba.report.attribution import attribute, target_records

        _write(out / "attribution_targets.csv", records_to_csv(target_records(attribute(data))))
    _write(out / "left_out.csv", records_to_csv(data.left_out) if data.left_out
                      else "row,dataset,instance_id,why\n")

    series = [
        ("fig5a_evidence", "(a) score by number of evidence items", analyses.by_evidence(data), "line", "evidence items"),
        ("fig5b_constraints", "(b) score by number of constraints (sliding window w=2)", analyses.by_constraints(data),
         "line", "constraints"),
        ("fig5c_static_dynamic", "(c) pass rate of static vs dynamic preferences", analyses.static_dynamic(data),
         "bar", ""),
        ("fig5d_qa_vs_task", "(d) QA accuracy vs task score (knowledge-to-action gap)", analyses.qa_vs_task(data),
         "bar", ""),
    ]
    # fig4: Table 4's scores with the ci table's 95% bootstrap intervals (one rule: score_bars)
    domain_series, domain_ci = tables.score_bars(data)
    if data.compared:
        _write(out / "fig4_domains.csv", records_to_csv([
            {"row": label, "x": x, "value": v, "lo": domain_ci[label].get(x, (None, None))[0],
             "hi": domain_ci[label].get(x, (None, None))[1], "n": n}
            for label, pts in domain_series.items() for x, (v, n) in pts.items()]))
    figures: list[tuple[str, str, bytes]] = []
    png = plots.bar_plot(domain_series, "Score by domain and overall (95% bootstrap intervals)",
                         intervals=domain_ci)
    if png:
        figures.append(("fig4_domains.png", "Score by domain and overall, with 95% bootstrap intervals "
                        "(Table 4, ci table)", png))
    for name, caption, s, kind, xlabel in series:
        if s:
            _write(out / f"{name}.csv", records_to_csv(analyses.series_records(s)))
        png = plots.line_plot(s, caption, xlabel) if kind == "line" else plots.bar_plot(s, caption)
        if png:
            figures.append((f"{name}.png", caption, png))
    for name, _, png in figures:
        (out / name).write_bytes(png)

    from iba.report.judges import judge_notes

    # every LLM-judged figure sits beside its judge's calibration (iba judge-check) and a warning
    # when the judge passes known violations, was never checked, or also ran as an agent model
    notes = judge_notes(store_path, data.judge_scorers(), sorted({r.model for r in data.runs}))
    _write(out / "judges.md", "### Judges\n\n" + ("\n".join(f"- {n}" for n in notes) or "No LLM judges.") + "\n")
    md = ["# IBA report", ""]
    md += [f"Dataset {did}: {dataset_line(ds.manifest)}." for did, ds in sorted(data.datasets.items())]
    md += [""] if data.datasets else []
    if data.samples:  # a sample is never mistaken for the whole benchmark
        md += [f"**Sample:** {data.sample_note()}", ""]
    sandbox = sandbox_note(data.runs + data.qa_runs)
    if any(r.sandbox == "none" for r in data.runs + data.qa_runs):
        md += [f"**Warning:** {sandbox}.", ""]
        print(f"warning: {sandbox}", file=sys.stderr)
    md += [t.to_markdown() for t in all_tables]
    md += ["### Judges", ""] + [f"- {n}" for n in notes] + [""]
    md += [f"![{caption}]({name})\n" for name, caption, _ in figures]
    _write(out / "report.md", "\n".join(md))

    n_unscored = sum(1 for i in data.instances if i.score(data.judges) is None)
    n_failed = sum(1 for r in data.runs if r.status == "failed")
    summary = {
        "store": str(store_path),
        "runs": ", ".join(sorted({r.run for r in data.runs})) or "(none)",
        "datasets": "; ".join(f"{did}: {dataset_line(ds.manifest)}" for did, ds in sorted(data.datasets.items()))
                    or "(none given: no answer keys, no analyses)",
        "judges": ", ".join(j.removeprefix("judge:") for j in data.judge_scorers()) or "(none)",
        "task runs": f"{len(data.runs)} ({n_failed} failed by the agent, scored 0; "
                     f"{sum(r.status == 'errored' for r in data.runs)} errored, unscored)",
        "sandbox": sandbox,
        "QA runs": len(data.qa_runs),
        "instances unscored": f"{n_unscored} of {len(data.instances)}",
        "compared": data.left_out_note(),
        "sample": data.sample_note() or "none recorded (no `iba run --sample` in this store)",
        "references": reference_note(data),
        "judge checks": " | ".join(notes) or "(no LLM judges)",
        "scores": "x100; instance score = slot mean (CallAPI) or the mean over judges of each judge's "
                  "mean over repeats of its checkpoint mean (Generate)",
    }
    html = out / "report.html"
    _write(html, render_page(data, all_tables, figures, title="IBA report", summary=summary))
    return html


def dataset_line(m) -> str:
    """What a dataset is, as a report header says it: generator and its version, writer, seed."""
    version = f"generator version {m.generator_version}" if m.generator_version is not None else "no generator version"
    return f"{m.generator} ({version}, writer {m.writer}, seed {m.seed}, taxonomy {m.taxonomy_version})"


def reference_note(data) -> str:
    """Which rows are references (not systems), for the page's header."""
    refs = [r.label for r in data.rows if r.reference]
    if not refs:
        return "none (run `--agent null --agent oracle` beside a system for its floor and ceiling)"
    return ("; ".join(refs) + ". Reference rows are the direct prompt on no history, the history that fits the "
            "context window, or the instance's gold evidence turns; they are not systems and are never ranked")


def sandbox_note(runs: Sequence) -> str:
    """How the third-party commands among the runs were isolated (RunRecord.sandbox)."""
    started = [r for r in runs if r.sandbox is not None]
    if not started:
        return "no third-party command was run (built-in or url= agents only)"
    loose = sum(r.sandbox == "none" for r in started)
    if not loose:
        return f"all {len(started)} runs of third-party commands ran in the bubblewrap sandbox"
    return (f"{loose} of {len(started)} runs of third-party commands ran UNSANDBOXED (they could read the answer "
            "key); their rows are marked [unsandboxed]")
