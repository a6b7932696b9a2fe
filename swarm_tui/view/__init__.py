"""What a front end shows of a run, and drives: no Textual here (a test keeps it so).

* `run_view.RunView` — the run as its events tell it: the board, `RunStats`, the run-wide
  figures (`figures`), the phase (`phase`), the agents' facts (`agents`), the session's pace;
  `apply(events)` / `observe(event)` move it and collect what changed (`Changes`) for a screen.
  The console, an attached view, the headless log and the tests all read one.
* `source.RunSource` — what the console drives; `live.LiveRun` is this process's run
  (`attach.AttachedRun` is another process's, read from its journal).
* `actions` — every action of the console in one table: keys, ids, labels, help, palette, and
  the rules that say when each makes sense.
* `failures.Failure` — the error log's rows, as data.

The console (`swarm_tui/ui`) only paints these.
"""
