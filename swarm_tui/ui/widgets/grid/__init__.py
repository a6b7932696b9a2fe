"""The agent grid: the widget (`agent_grid`), how its cells are laid out in the room it is given
(`layout`, pure) and what a cell shows of its agent (`cells`, pure)."""
