"""``mjp cluster``: cluster.yaml checked, the local twin, the head's MLflow gate and store, the AWS account, the probe."""

from __future__ import annotations

import argparse

from sweep.cli.options import group


def add(sub: argparse._SubParsersAction) -> None:
    cluster = group(sub, "cluster", "the Ray cluster launcher config")
    ccheck = cluster.add_parser("check", help="validate cluster.yaml offline against Ray's schema (as `ray up` will)")
    ccheck.add_argument("path", nargs="?", default="cluster.yaml", help="the cluster launcher YAML (default cluster.yaml)")
    ccheck.set_defaults(handler="sweep.commands.cluster:cmd_cluster_check")
    cup = cluster.add_parser(
        "up", help="--local: a twin of cluster.yaml on this machine (autoscaling fake nodes, token auth, an MLflow server)"
    )
    cup.add_argument(
        "--local", action="store_true", help="the local twin (Ray's fake_multinode provider); a real cluster is `ray up cluster.yaml`"
    )
    cup.add_argument(
        "--session",
        default="/tmp/mjp-local-cluster",
        help="the twin's directory: Ray's session, the MLflow store, sweeps (default /tmp/mjp-local-cluster)",
    )
    cup.add_argument("--gpu-workers", type=int, default=2, help='most "GPU" worker nodes (1-4, default 2)')
    cup.add_argument("--cpu-workers", type=int, default=1, help="most CPU-only worker nodes for Ray Data (0-4, default 1)")
    cup.add_argument(
        "--bucket",
        help=(
            "the folder standing in for cluster.yaml's S3 bucket: sweeps, MLflow's artifacts, "
            "the store kept at `down` (default SESSION/bucket)"
        ),
    )
    cup.set_defaults(handler="sweep.commands.cluster:cmd_cluster_up")
    cdown = cluster.add_parser("down", help="end every process of the local twin (those whose command line names its --session)")
    cdown.add_argument("--session", default="/tmp/mjp-local-cluster", help="the twin's directory (default /tmp/mjp-local-cluster)")
    cdown.set_defaults(handler="sweep.commands.cluster:cmd_cluster_down")
    cgate = cluster.add_parser(
        "mlflow-gate", help="on cluster.yaml's head: the MLflow server behind the cluster's Ray token (401 without it)"
    )
    cgate.add_argument(
        "--listen", required=True, metavar="HOST:PORT", help="where the gate listens (the head's private address, port 5000)"
    )
    cgate.add_argument(
        "--upstream", default="http://127.0.0.1:5001", help="the MLflow server on the head's loopback (default http://127.0.0.1:5001)"
    )
    cgate.add_argument(
        "--token-file",
        default="~/.ray/auth_token",
        help="the token a request must carry as MLFLOW_TRACKING_TOKEN (default ~/.ray/auth_token)",
    )
    cgate.set_defaults(handler="sweep.commands.cluster:cmd_cluster_mlflow_gate")
    caws = cluster.add_parser(
        "aws-setup",
        help="make what cluster.yaml needs in your AWS account before `ray up`: the nodes' instance profiles, the security group",
    )
    caws.add_argument(
        "path",
        nargs="?",
        default="cluster.yaml",
        help="the cluster launcher YAML (default cluster.yaml): its bucket, SSH address, profiles and region",
    )
    caws.set_defaults(handler="sweep.commands.cluster:cmd_cluster_aws_setup")
    cprobe = cluster.add_parser(
        "probe",
        help=(
            "on the cluster (a Ray job): a GPU node's driver and CUDA, a CPU node, the images and the bucket from each, before a full study"
        ),
    )
    cprobe.add_argument(
        "--data",
        default="/data/imagenet",
        help="the image folder every node holds (default /data/imagenet; none: a study of bundled data, no folder to check)",
    )
    cprobe.add_argument(
        "--gpu-resource", default="GPU", help="what a GPU node offers (default GPU; the local twin: mjp_gpu, where CUDA is not checked)"
    )
    cprobe.add_argument("--cpu-resource", default="mjp_data", help="what a CPU-only node offers (default mjp_data)")
    cprobe.add_argument(
        "--timeout", type=float, default=3600, help="seconds to wait for the nodes to start, copy the images and answer (default 3600)"
    )
    cprobe.set_defaults(handler="sweep.commands.cluster:cmd_cluster_probe")
    store = group(cluster, "store", "keep the MLflow store beyond the cluster: a consistent copy of its SQLite file in the bucket")
    ssave = store.add_parser("save", help="copy the SQLite store DB to DEST (s3://... or a path), consistent while the server writes")
    ssave.add_argument("db", help="the MLflow server's SQLite file (on the head: /data/mjp/mlflow/mlflow.db)")
    ssave.add_argument("dest", help="where the copy is kept (on the head: $MJP_BUCKET/mlflow/mlflow.db)")
    ssave.add_argument(
        "--every", type=float, default=None, metavar="SECONDS", help="keep saving, every SECONDS while the store changes (the head's loop)"
    )
    ssave.set_defaults(handler="sweep.commands.cluster:cmd_store_save")
    srestore = store.add_parser("restore", help="a new head's store: copy SRC to DB unless DB exists (a kept disk holds the newer store)")
    srestore.add_argument("src", help="the kept copy (s3://... or a path)")
    srestore.add_argument("db", help="the MLflow server's SQLite file to make")
    srestore.set_defaults(handler="sweep.commands.cluster:cmd_store_restore")
