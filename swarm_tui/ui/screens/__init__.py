"""The screens the console opens over its main one, each whole in its module: an agent in full
(`detail`), the confirmations and the help (`dialogs`), the provider pane (`provider`), the cost
projection (`estimate`) and what the aggregator wrote (`aggregate`). Each is handed what it
shows (the run source, the config) when it is pushed; what it asks of the run goes through the
app's parts (the detail's retry: `app.steering`)."""
