"""The panels around the grid, each a few lines drawn with the line API (`text_panel`): the run
panel beside it (`run_panel`, with a routed run's `endpoint_rows`), the provider bar above it
(`provider_bar`) and the lane panel under it while the run has provider batches (`lane_panel`)."""
