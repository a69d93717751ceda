"""A submission format for IBA-Bench results (after tau2-bench's submission.json).

`iba submit prepare STORE --dataset DIR --out FILE.json` gathers, per agent and model, every
trial's result (verdicts, score, tokens, wall time) and what follows from them: Table 4 per domain
with 95% intervals and n, pass^k where trials > 1, tokens and cost; the sample the numbers come
from; the dataset's generator, version, seed, tell audit and feature audit; the judges and their
judge-check; flags for modified prompts and omitted instances. `iba submit validate FILE.json`
checks a file against the schema (iba.submit.schema) and recomputes every aggregate from its
per-instance results (iba.submit.recompute).
"""
