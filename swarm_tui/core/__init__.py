"""The vocabulary every layer speaks, stdlib only: tasks, attempts and their errors and usage,
the events of a run, the one task state machine (`board`), the event log's codec, the retry
decision, the lane names, the stall-aware clock, and the journal's port (`ports`: what the engine
writes to, and what an engine can do).

Nothing here imports another part of swarm-tui: the engine, the journal, the providers, the
views and the UI all import from here (an import-linter contract keeps it so).
"""
