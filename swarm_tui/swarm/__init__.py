"""L2 planner and L4 aggregator around the engine's fan-out, with rolling memory and robust JSON.

Imports nothing from Textual.
"""
