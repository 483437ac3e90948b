"""The ``mjp`` command line: train, sweep, analyze, evaluate, attack, data, config, cluster, demo.

Importing this module and building the parser costs only argparse: every handler is named as
``module:function`` and imported when its command runs, so ``mjp --help`` answers at once and a
command pays only for what it needs (``mjp sweep status`` reads MLflow, never torch or Ray).
Bad input ends with one ``error:`` line and exit status 2 before anything is launched.
Exit status, the same for every command (``EXIT_STATUS``, also in ``mjp --help``): 0 done,
1 failed, 2 bad input, 130 interrupted (143 by SIGTERM).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from collections.abc import Sequence

EXIT_STATUS = """exit status (every command):
  0    done
  1    failed: a training, a trial or a check failed, or a disk filled (or an unexpected error, with its traceback)
  2    bad input: a config, study, path, key or argument was refused before anything started
  130  interrupted (Ctrl-C): the MLflow run is marked KILLED; `mjp sweep resume DIR` continues a sweep
  143  stopped by SIGTERM (`ray job stop`, systemd, a batch scheduler): as 130"""


def package_version() -> str:
    """This package's version (its installed metadata, else pyproject.toml beside the sources)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mjp-sweep")
    except PackageNotFoundError:
        import tomllib

        from sweep.study.names import PROJECT_DIR

        with open(PROJECT_DIR / "pyproject.toml", "rb") as fh:
            return tomllib.load(fh)["project"]["version"]


class Parser(argparse.ArgumentParser):
    """argparse with "did you mean" for a mistyped command."""

    def error(self, message: str) -> None:  # type: ignore[override]
        if "invalid choice:" in message:
            word = message.split("invalid choice: ", 1)[1].split("'")[1]
            choices = [c.strip(" '") for c in message.split("choose from", 1)[-1].strip(" )").split(",")]
            close = difflib.get_close_matches(word, choices, n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
        super().error(message)


def _sets(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. optim.epochs=3 (a mapping merges into its section)",
    )


def _verbose(p: argparse.ArgumentParser) -> None:
    p.add_argument("--verbose", action="store_true", help="show Ray's, Ray Train's and Tune's own logs on the console")


def _uri(p: argparse.ArgumentParser) -> None:
    p.add_argument("--uri", help="MLflow tracking URI (default $MLFLOW_TRACKING_URI or ./mlflow.db)")


def _store(p: argparse.ArgumentParser) -> None:
    """``--uri`` of a command that trains: the store its runs are written to."""
    p.add_argument(
        "--uri",
        help="MLflow tracking URI the runs are written to (default: the config's tracking.uri, $MLFLOW_TRACKING_URI or ./mlflow.db)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="mjp",
        description="Masked Jigsaw Puzzle (CVPR 2023): training, sweeps, evaluation and analysis on Ray + Optuna + MLflow",
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}", help="print the package version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)

    train = sub.add_parser("train", help="one training run (local Ray, or the cluster at --address / $RAY_ADDRESS)")
    train.add_argument("config", help="a TrainConfig YAML, e.g. trainables/configs/digits_vit_tiny.yaml")
    _sets(train)
    train.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS, else a private local Ray)")
    _store(train)
    _verbose(train)
    train.set_defaults(handler="sweep.commands.train:cmd_train")

    sweep = sub.add_parser("sweep", help="run, resume, list and inspect sweeps").add_subparsers(
        dest="sweep_command", required=True, metavar="SWEEP_COMMAND", parser_class=Parser
    )
    run = sweep.add_parser("run", help="run a study (a YAML file or a shipped name; `mjp sweep list` shows them)")
    run.add_argument("study", help="a study YAML file or a shipped study name (`mjp sweep list`)")
    run.add_argument("--smoke", action="store_true", help="the study's small version, for one machine")
    _sets(run)
    run.add_argument("--data", help="dataset root (same as --set data.root=PATH)")
    run.add_argument("--storage", help="Tune storage: a directory or s3:// / gs:// URI (default ./ray_results, or $MJP_SWEEP_STORAGE)")
    run.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS, else a private local Ray)")
    run.add_argument(
        "--max-trials",
        type=int,
        default=None,
        metavar="N",
        help="run a study of up to N trials (default 1000: more is refused; `mjp sweep plan` prices it)",
    )
    _store(run)
    _verbose(run)
    run.set_defaults(handler="sweep.commands.sweeps:cmd_sweep_run")

    plan = sweep.add_parser("plan", help="what a study will cost: trials, epochs, resources, concurrency, wall time and GPU-hours")
    plan.add_argument("study", help="a study YAML file or a shipped study name (`mjp sweep list`)")
    plan.add_argument("--smoke", action="store_true", help="plan the study's small version")
    _sets(plan)
    plan.add_argument("--cluster", help="a `ray up` cluster file (e.g. cluster.yaml): plan for it at its largest (default: this machine)")
    plan.add_argument(
        "--img-per-s",
        type=float,
        help="training throughput of one trial, images per second (default: measured here for CPU trials, BENCHMARKS.md for GPU ones)",
    )
    plan.set_defaults(handler="sweep.commands.plan:cmd_sweep_plan")

    resume = sweep.add_parser("resume", help="continue an interrupted sweep from its experiment directory")
    resume.add_argument(
        "experiment_dir", help="the sweep's directory that `mjp sweep run` printed (under ray_results/, or an s3:// / gs:// URI)"
    )
    resume.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS, else a private local Ray)")
    resume.add_argument(
        "--uri",
        help=(
            "the sweep's MLflow store at a new address (its server moved: a new head or twin); "
            "checked to hold the sweep's parent run (default: the URI the sweep recorded)"
        ),
    )
    _verbose(resume)
    resume.set_defaults(handler="sweep.commands.sweeps:cmd_sweep_resume")

    status = sweep.add_parser("status", help="sweeps recorded in MLflow and each trial: state, metrics, MLflow run id")
    status.add_argument(
        "target",
        nargs="?",
        metavar="STUDY_OR_SWEEP_DIR",
        help="a study name (its sweeps), a sweep's name as `mjp sweep run` printed it, or its directory under ray_results/ "
        "(that sweep); default: every sweep",
    )
    status.add_argument("--study", help="same as a study name for STUDY_OR_SWEEP_DIR")
    _uri(status)
    status.add_argument("--limit", type=int, default=10, help="show at most this many sweeps, newest first (default 10)")
    status.set_defaults(handler="sweep.commands.status:cmd_sweep_status")

    listing = sweep.add_parser("list", help="the shipped studies: description, trials, epochs, smoke size")
    listing.set_defaults(handler="sweep.commands.listing:cmd_sweep_list")

    config = sub.add_parser("config", help="inspect configs").add_subparsers(
        dest="config_command", required=True, metavar="CONFIG_COMMAND", parser_class=Parser
    )
    show = config.add_parser("show", help="print the fully resolved TrainConfig (defaults, variant, derived seeds)")
    show.add_argument("config", help="a TrainConfig YAML, or a study (file or shipped name) for its base config")
    _sets(show)
    show.add_argument("--smoke", action="store_true", help="with a study: its smoke-size base")
    show.set_defaults(handler="sweep.commands.listing:cmd_config_show")

    analyze = sub.add_parser("analyze", help="paper-shaped tables, figures and reports from MLflow").add_subparsers(
        dest="analyze_command", required=True, metavar="ANALYZE_COMMAND", parser_class=Parser
    )
    for name, helptext in (  # one handler: `tables` is the report with the table files named at the end
        ("tables", "tables (Markdown, CSV, LaTeX) and figures of a study's latest sweep"),
        ("report", "one self-contained HTML report of a study's latest sweep (tables, figures, paper, links)"),
    ):
        p = analyze.add_parser(name, help=helptext)
        p.add_argument("--study", required=True, help="the study's name (its MLflow sweeps; `mjp sweep status` lists them)")
        p.add_argument("--all", action="store_true", help="pool every sweep of the study, not only the latest")
        p.add_argument("--paper", action="store_true", help="print the paper's numbers beside ours for the same rows")
        _uri(p)
        p.add_argument("--out", help="the report goes to OUT/<study> (default OUT: $MJP_REPORTS_DIR, else ./reports)")
        p.set_defaults(handler="sweep.commands.analyze:cmd_analyze")
    results = analyze.add_parser(
        "results",
        help="write results/<study>.json from the study's latest sweep "
        "(the results tables of README.md and docs/ are made from these files)",
    )
    results.add_argument("--study", required=True, help="a study name (its newest sweep in MLflow is read)")
    results.add_argument(
        "--command",
        help="the command that ran the sweep, as the results table should say "
        "(default: the one the sweep recorded, e.g. `mjp demo`; else `mjp sweep run <study>`)",
    )
    _uri(results)
    results.set_defaults(handler="sweep.commands.results:cmd_analyze_results")
    readme = analyze.add_parser("readme", help="render the results tables of README.md and docs/*.md from results/*.json")
    readme.add_argument("--check", action="store_true", help="change nothing; exit 1 when README.md or docs/ disagrees with results/")
    readme.set_defaults(handler="sweep.commands.results:cmd_analyze_readme")

    attack = sub.add_parser("attack", help="gradient-inversion attacks (Table 5 settings a/b/c) on a trained model")
    source = attack.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help="an MLflow run id (its params and checkpoint/model.pt)")
    source.add_argument("--checkpoint", help="a model or training checkpoint file (with --config)")
    attack.add_argument("--config", help="the TrainConfig YAML of --checkpoint")
    attack.add_argument("--images", type=int, default=4, help="how many validation images to attack (default 4)")
    attack.add_argument("--setting", choices=["a", "b", "c"], action="append", help="repeatable; default: all three")
    attack.add_argument(
        "--attack",
        choices=["auto", "april", "inversion"],
        default="auto",
        help=(
            "auto (default): april where the model was built with april_block=True, else inversion; "
            "april: the analytic attack; inversion: gradient matching"
        ),
    )
    attack.add_argument("--steps", type=int, default=200, help="optimisation steps per image of the inversion attack (default 200)")
    attack.add_argument("--ratio", type=float, default=0.5, help="shuffle ratio of x~ (settings b, c)")
    attack.add_argument(
        "--client-dtype", choices=["float32", "float64"], default="float32", help="precision of the simulated client's gradients"
    )
    attack.add_argument("--lpips-backbone", help="torchvision AlexNet state dict; LPIPS is absent without it")
    attack.add_argument("--seed", type=int, default=0, help="seed of the images' choice, the shuffles and the attack (default 0)")
    _uri(attack)
    attack.set_defaults(handler="sweep.commands.attack:cmd_attack")

    evaluate = sub.add_parser("evaluate", help="the paper's evaluations on an existing model (`mjp evaluate --help` lists them)")
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help="an MLflow run id: evaluates its logged model and logs into that run")
    source.add_argument("--checkpoint", help="a model or training checkpoint file (with --config)")
    source.add_argument("--timm", metavar="NAME", help="a timm model (with --pretrained-file for local weights)")
    evaluate.add_argument("--config", help="the TrainConfig YAML of --checkpoint / the data for --timm")
    evaluate.add_argument("--pretrained-file", help="local timm weights for --timm (nothing is downloaded)")
    from sweep.commands.evaluate import WhatOption  # its help lists the registry's evaluations, read only when a help is shown

    evaluate.add_argument("--what", default="robustness,pe,shuffle", action=WhatOption)
    _sets(evaluate)
    _uri(evaluate)
    evaluate.set_defaults(handler="sweep.commands.evaluate:cmd_evaluate")

    data = sub.add_parser("data", help="check or prepare image data").add_subparsers(
        dest="data_command", required=True, metavar="DATA_COMMAND", parser_class=Parser
    )
    check = data.add_parser("check", help="scan an ImageNet-style folder: unreadable, zero-byte and non-RGB images, class balance")
    check.add_argument("root", help="an ImageNet-style folder: ROOT/{train,val}/<class>/*")
    check.add_argument("--workers", type=int, default=None, help="processes for the header scan (default: all cores)")
    check.add_argument(
        "--manifest",
        action="store_true",
        help="when every image reads, write ROOT/mjp_folder.json (classes, counts) for a sweep driver on a node without the images",
    )
    check.set_defaults(handler="sweep.commands.data:cmd_data_check")
    prepare = data.add_parser("prepare", help="pack an ImageNet-style folder into Parquet shards for the Ray Data loader")
    prepare.add_argument("root", help="an ImageNet-style folder: ROOT/{train,val}/<class>/*")
    prepare.add_argument("out", help="the output folder for the Parquet shards (data.root for data.loader: ray_data)")
    prepare.add_argument("--images-per-shard", type=int, default=1000, help="images per Parquet file (default 1000)")
    prepare.add_argument("--workers", type=int, default=None, help="processes that read the images (default: all cores)")
    prepare.set_defaults(handler="sweep.commands.data:cmd_data_prepare")

    cluster = sub.add_parser("cluster", help="the Ray cluster launcher config").add_subparsers(
        dest="cluster_command", required=True, metavar="CLUSTER_COMMAND", parser_class=Parser
    )
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
    store = cluster.add_parser(
        "store", help="keep the MLflow store beyond the cluster: a consistent copy of its SQLite file in the bucket"
    ).add_subparsers(dest="store_command", required=True, metavar="STORE_COMMAND", parser_class=Parser)
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

    demo = sub.add_parser("demo", help="the quickstart study on this machine, then its table and HTML report")
    demo.add_argument("--smoke", action="store_true", help="3 epochs instead of 30")
    _sets(demo)
    _store(demo)
    _verbose(demo)
    demo.set_defaults(handler="sweep.commands.sweeps:cmd_demo")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from trainables.errors import UserError, one_line
    from trainables.launch.ray_runtime import prepare_environment
    from trainables.launch.signals import interrupted_status, sigterm_as_ctrl_c

    sigterm_as_ctrl_c()  # SIGTERM (`ray job stop`, systemd) stops as Ctrl-C does: runs closed KILLED, exit 143
    module, _, name = args.handler.partition(":")
    try:
        prepare_environment()  # (refuses a database password in $MLFLOW_TRACKING_URI in one line)
        if getattr(args, "set", None):
            from trainables.tracking.credentials import scrub_overrides

            args.set = scrub_overrides(args.set)  # `--set tracking.uri=http://user:password@...`: credentials to the environment only
        handler = getattr(importlib.import_module(module), name)
        return handler(args)
    except UserError as err:
        print(f"error: {one_line(str(err))}", file=sys.stderr)  # one line, whatever the input held
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return interrupted_status()
    except Exception as err:
        from trainables.errors import disk_full_reason

        full = disk_full_reason(err)
        if full is None:
            raise
        print(
            f"error: a disk this command writes to is full ({full}); free some space and run it again "
            f"(`mjp sweep resume DIR` continues a sweep)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
