"""The console: the Textual front end that watches and steers a run, and the only part of
swarm-tui that imports Textual (the run, the engine and the view below it run without it).

* `app.py`: `SwarmApp`, one App holding its parts, and `make_app`; `app.tcss` its stylesheet.
* The app's parts, each whole in its module: `themes.py` (`ThemeManager`), `keys.py`
  (`KeyManager`), `lifecycle.py` (the run as the app's worker, and leaving), `follow.py` (what
  the grid's cursor follows), `layout.py` (the grid fitted, the panels painted), `painter.py`
  (the drain of the run's view into the widgets) and `steering.py` (what the keys do).
* `screens/`: what opens over the main screen (an agent's detail, confirmations and the help,
  the provider pane, the cost projection, the aggregate).
* `widgets/<area>/`: the main screen's widgets (`grid/`, `errorlog/`, `panels/`, `footer/`).
* App-wide helpers: `format.py` (fixed-width figures), `contrast.py` (WCAG contrast),
  `commands.py` (the command palette), `launch.py` (the CLI's entry points).
* `shadow_view.py`: another app, `swarm-tui shadow`'s live view (not a screen of the console).
"""
