"""A submission format for IBA-Bench results (after tau2-bench's submission.json).

`iba submit prepare STORE --dataset DIR --out FILE.json` gathers, per agent and model, Table 4 per
domain with 95% intervals and n, pass^k where trials > 1, tokens and cost, the dataset's generator,
seed and tell audit, the judges and their judge-check, and flags for modified prompts and omitted
instances; `iba submit validate FILE.json` checks a file against the schema (iba.submit.schema).
"""
