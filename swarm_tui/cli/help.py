"""What several commands' `--help` share: the formatter that keeps the descriptions' and epilogs'
lines (examples, job formats), and the job formats themselves."""

from __future__ import annotations

import argparse

HELP_FORMAT = argparse.RawDescriptionHelpFormatter
"""Every parser's formatter: the descriptions and epilogs keep their lines (examples, job formats)."""

JOB_FORMATS = """\
job formats (by extension):
  .jsonl  the OpenAI Batch API input format, one request a line:
            {"custom_id": "q1", "method": "POST", "url": "/v1/chat/completions",
             "body": {"model": "gpt-4.1-mini",
                      "messages": [{"role": "user", "content": "Say hello"}]}}
  .toml   a swarm job: a model, a system template and tasks, e.g.
            name = "hello"
            model = "gpt-4.1-mini"
            system = "You are agent {agent} of {total}."
            [tasks]
            count = 10
            prompt = "Say hello to agent {agent}."
          optional: [context], [request], [[task]], [plan], [judge], [[tools.mcp]]
  .csv, .parquet, a .jsonl of records, a dataset directory (save_to_disk): a table, each row
          a task: --prompt "Classify: {text}" [--system ...] [--id "{ticket_id}"]
  more: sample_jobs/ and the documentation's "Your first job" (docs/first-job.md)
"""
