"""The error log: one row per failed attempt, to triage from (`error_log`)."""
