"""The machines: cluster.yaml checked against Ray's schema and AWS, the account set up for it, a probe of its nodes,
what a study will cost on them, the MLflow store kept beyond them, and the local twin of the cluster (start it, end it,
lose nodes)."""
