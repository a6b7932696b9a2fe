"""The widgets of the console's main screen, one package an area: `grid/` (the agents, drawn line
by line), `errorlog/` (the failures to triage from), `panels/` (the run panel beside the grid,
the provider bar above it, the lane panel under it) and `footer/` (the figures and the keys).

Widgets paint what they are given (`update_from`, `update_cells`...) and post messages for what
the user asks; they never read the engine and never steer: the app's parts do (`ui/app.py`)."""
