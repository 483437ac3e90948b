"""The `mjp` commands: each parses its arguments, calls the rooms below (study, tuner, cluster, trainables, analysis) and prints; no logic of its own."""
