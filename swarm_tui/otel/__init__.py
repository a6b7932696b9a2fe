"""OpenTelemetry traces of a run, by the GenAI semantic conventions: live (`--otel`) or from any
journal afterwards (`swarm-tui export-traces`), the same spans with the same ids either way.

One module per concern: `ids` (trace and span ids derived from the run), `spans` (plain span
records), `facts` (what the spans say besides the events: bodies, endpoints, content), `model`
(events -> spans, shared by both exports), `journal_source` (a journal's events and facts),
`sdk` (the `otel` extra, the OTLP/HTTP exporter, records -> SDK spans), `export` (after the
fact), `live` (the engine's listener), `report` (what was delivered). Only `sdk` imports
OpenTelemetry, and only when an export runs: without the extra, the rest imports and the CLI
names the extra (exit 2).
"""
