"""A run, from what the user asked to what it leaves, below any front end and above the engine.

request.py     what a run or a resume is asked to do (typed, front-end neutral)
resolve.py     the request, the config and the job (or the stored run) made one plan
preflight.py   every problem of the plan, said at once, before anything is written or sent
stored.py      a stored run held to go on: its lock, journal and meta, each once
session.py     the plan opened: journal, endpoint, engine, judge; run, outputs, close
plan.py        what a session runs besides its plan: Ray, the demo's simulator, its contents
               (the plan itself and summary.json are `swarm_tui.records`: the traces read them too)
outputs.py     results.jsonl, errors.jsonl, transcripts.jsonl and summary.json, from the journal
cost.py        where a run's money went (summary.json's cost fields)
directory.py   the run directory: one writer, never over a user's files
judge.py       the judge's side lane of a session
exit_codes.py  0, 1, 2, 130, and how a run that ended maps to one
"""
