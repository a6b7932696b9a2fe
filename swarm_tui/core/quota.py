"""What a run does when the provider cannot serve the account (quota or spend limit spent):
`--on-quota wait` suspends it until a probe is answered, `stop` stops it at once, resumable.

A constant of its own (the engine's `pacing.suspension` acts on it) so that the command line can
offer the choices without importing the engine."""

from __future__ import annotations

WAIT = "wait"
STOP = "stop"
ON_QUOTA = (WAIT, STOP)
