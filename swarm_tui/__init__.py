"""swarm-tui: run, watch and steer swarms of LLM sub-agents from a terminal."""

__version__ = "0.1.0"
