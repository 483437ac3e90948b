"""The `mjp` command line and the sweeps: studies, the Ray Tune experiment, its live view, the signatures
of what a resume unpickles, and the cluster (rooms: commands, study, tuner, console, security, cluster)."""
