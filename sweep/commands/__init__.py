"""The `mjp` commands: each parses its arguments, calls the rooms below (study, tuner, cluster, trainables, analysis)
and prints (the cluster commands also hold the probe's Ray job and the store-save loop; mjp evaluate times each
evaluation)."""
