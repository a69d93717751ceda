"""Batch files for cheap large runs: model calls as OpenAI Batch API request lines, answers replayed.

`iba run DATASET ... --batch DIR` runs as usual except that no model is called: each call of an
agent step or a judge becomes one request line (`custom_id`, `method`, `url`, `body`) and the work
that made it stops there (llm.base.CallDeferred: not stored, not an error). At the end of the run
the new requests are written as a round, one JSONL file per model (the Batch API takes one model
per batch). Answers come back as Batch API output lines, by `iba batch collect` (the OpenAI SDK's
files and batches calls), `iba batch import` (any results file) or `iba batch answer` (an offline
model here). Rerunning the same `iba run ... --batch DIR` replays every answered call and writes the
next round: a multi-step agent takes one round per step, judging one more; the run is done when a
rerun writes no new round.

    DIR/batch.json                          what the folder is for (format, models)
    DIR/round-0001/<model>.requests.jsonl   Batch API input, one file per model
    DIR/round-0001/<model>.submitted.json   the provider's batch id and state (`iba batch submit`)
    DIR/results/*.jsonl                     Batch API output lines (collect, import, answer)
"""
