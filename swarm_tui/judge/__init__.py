"""LLM-as-a-judge: sampled live scores of the swarm's answers, and quality drift acted on."""

from swarm_tui.jobs.judge_spec import ACTIONS, JudgeSpec, parse_judge_spec

__all__ = ["ACTIONS", "JudgeSpec", "parse_judge_spec"]
