"""``mjp cluster``: cluster.yaml checked, the local twin, the head's MLflow gate and store, the AWS account, the probe,
and a sweep as one Slurm job."""

from __future__ import annotations

import argparse

from sweep.cli.options import add_sets, group


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
    add_slurm(cluster)


def add_slurm(cluster: argparse._SubParsersAction) -> None:
    slurm = cluster.add_parser(
        "slurm",
        help="a study as one Slurm batch job: Ray's head, a worker per other node, MLflow, the sweep; sbatch'd (docs/cluster-slurm.md)",
    )
    slurm.add_argument("study", help="a study YAML file or a shipped study name (`mjp sweep list`)")
    slurm.add_argument("--nodes", type=int, required=True, help="nodes of the job (Ray's head trains on the first too)")
    slurm.add_argument(
        "--gpus-per-node", type=int, required=True, metavar="G", help="GPUs on each node (0 for a study that trains on CPUs)"
    )
    slurm.add_argument("--cpus-per-node", type=int, required=True, metavar="C", help="CPUs on each node (one task per node)")
    slurm.add_argument("--partition", required=True, help="the Slurm partition")
    slurm.add_argument("--time", required=True, help="the job's time limit in Slurm's form (e.g. 24:00:00, 2-00); the next start resumes")
    slurm.add_argument("--account", help="the Slurm account to charge (when your cluster asks for one)")
    slurm.add_argument("--mem", help="memory per node in Slurm's form (e.g. 256G; default: the partition's)")
    slurm.add_argument("--smoke", action="store_true", help="the study's small version")
    add_sets(slurm)
    slurm.add_argument("--data", help="dataset root on the shared filesystem (same as --set data.root=PATH)")
    slurm.add_argument(
        "--shared",
        help="a folder every node mounts (default $MJP_SLURM_DIR): the job's folder, its sweep, logs and the MLflow store go there",
    )
    slurm.add_argument("--store", help="the MLflow store's folder (default SHARED/mlflow): one job at a time serves it")
    slurm.add_argument(
        "--signal-lead", type=int, default=180, metavar="SECONDS", help="SIGTERM this long before the time limit (default 180)"
    )
    slurm.add_argument("--max-restarts", type=int, default=20, metavar="N", help="requeue at the time limit at most N times (default 20)")
    slurm.add_argument("--dry-run", action="store_true", help="check everything and print the batch script; submit nothing")
    slurm.set_defaults(handler="sweep.commands.cluster:cmd_cluster_slurm")
    job = cluster.add_parser("slurm-job", help="inside a Slurm job (its batch script runs it): the job's Ray, MLflow and sweep")
    job.add_argument("job_dir", help="the job's folder that `mjp cluster slurm` wrote")
    job.set_defaults(handler="sweep.commands.cluster:cmd_cluster_slurm_job")
    node = cluster.add_parser("slurm-node", help="inside a Slurm job step: this node joins the job's Ray head")
    node.add_argument("job_dir", help="the job's folder")
    node.add_argument("--head", required=True, metavar="IP:PORT", help="the job's Ray head")
    node.set_defaults(handler="sweep.commands.cluster:cmd_cluster_slurm_node")
