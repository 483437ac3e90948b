"""``mjp cluster ...``: check cluster.yaml, set up the AWS account for it, probe its nodes, keep its
MLflow store in the bucket, start or end the local twin, and run a study as one Slurm job
(``slurm``, and ``slurm-job`` / ``slurm-node`` inside it) (the work is in ``sweep/cluster/``)."""

from __future__ import annotations

import argparse
import os
import shlex
import time
from pathlib import Path

from sweep.cluster.aws_setup import prepare_account, read_plan
from sweep.cluster.check import placeholders_left, validate_cluster_config
from sweep.cluster.probe import probe_here
from sweep.cluster.processes import session_processes
from sweep.cluster.store_copy import fingerprint, restore_store, save_store
from sweep.cluster.twin import DEFAULT_SESSION, STATE_FILE, down, kept_store_of, up
from trainables.config.yaml_files import read_yaml_mapping
from trainables.errors import ConfigError


def cmd_cluster_check(args: argparse.Namespace) -> int:
    prepared = validate_cluster_config(args.path)
    workers = {name: t.get("max_workers", 0) for name, t in prepared.get("available_node_types", {}).items()}
    print(f"{args.path}: valid for `ray up` (provider {prepared['provider']['type']}, node types {workers})")
    left = placeholders_left(Path(args.path))
    if left:
        print("set before `mjp cluster aws-setup` and `ray up`: " + "; ".join(left))
    return 0


def cmd_cluster_up(args: argparse.Namespace) -> int:
    if not args.local:
        raise ConfigError("`mjp cluster up` starts only the local twin (--local); a real cluster: `ray up cluster.yaml`")
    cluster = up(args.session, gpu_workers=args.gpu_workers, cpu_workers=args.cpu_workers, bucket=args.bucket)
    print(
        f"local cluster up in {cluster.session_dir}: Ray at {cluster.address}, jobs at {cluster.dashboard}, "
        f"MLflow at {cluster.tracking_uri} "
        f"(its store kept in {cluster.kept_store} at `down`)"
    )
    print("use it from this shell:")
    for key, value in cluster.environment().items():
        shown = f'"$(cat {cluster.token_path})"' if key == "MLFLOW_TRACKING_TOKEN" else value  # the secret stays in its file
        print(f"  export {key}={shown}")
    return 0


def cmd_cluster_down(args: argparse.Namespace) -> int:
    session = Path(args.session).resolve()
    if not session.is_dir():
        raise ConfigError(
            f"--session {session}: no such directory, so no local cluster to end (`mjp cluster up --local` starts one in {DEFAULT_SESSION})"
        )
    if not (session / STATE_FILE).is_file() and not session_processes(session):
        raise ConfigError(f"--session {session}: no local cluster is up there (no {STATE_FILE}, no process of it); nothing to end")
    kept = kept_store_of(session)  # `down` saves it there first (and says so in one line if it cannot)
    ended = down(session)
    left = session_processes(args.session)
    print(
        f"local cluster in {session} down: {len(ended)} process{'es' * (len(ended) != 1)} ended"
        + (f", MLflow's store saved to {kept}" if kept is not None else ", no MLflow store to save")
        + (f"; still running: {left}" if left else "")
    )
    return 1 if left else 0


def cmd_cluster_mlflow_gate(args: argparse.Namespace) -> int:
    from sweep.cluster.gate.mlflow_gate import read_token, serve

    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--listen {args.listen!r}: allowed HOST:PORT, e.g. 10.0.1.5:5000")
    read_token(args.token_file)  # refused in one line before anything listens
    serve(host, int(port), args.upstream, args.token_file)
    return 0


def cmd_cluster_aws_setup(args: argparse.Namespace) -> int:
    plan = read_plan(args.path)
    try:
        import boto3  # noqa: F401
    except ImportError:
        raise ConfigError("boto3 is not installed: `uv sync --group aws` (Ray's AWS launcher needs it too)") from None
    for line in prepare_account(plan, read_yaml_mapping(Path(args.path), "cluster config")):
        print(line)
    return 0


def cmd_cluster_probe(args: argparse.Namespace) -> int:
    address = os.environ.get("RAY_ADDRESS")
    if not address:
        raise ConfigError(
            "`mjp cluster probe` runs on a cluster: submit it as a Ray job (docs/cluster-aws.md, step 7), or set RAY_ADDRESS "
            "(the local twin's exports)"
        )
    if args.timeout <= 0:
        raise ConfigError(f"--timeout {args.timeout:g}: allowed more than 0 seconds")
    from trainables.launch.ray_runtime import ensure_ray

    ensure_ray(address)
    import ray

    storage, tracking = os.environ.get("MJP_SWEEP_STORAGE"), os.environ.get("MLFLOW_TRACKING_URI")
    probe = ray.remote(probe_here)
    gpu = {"num_gpus": 1} if args.gpu_resource == "GPU" else {"resources": {args.gpu_resource: 1}}
    asks = {
        f"GPU node ({args.gpu_resource}: 1)": (gpu, args.gpu_resource == "GPU"),
        f"CPU node ({args.cpu_resource}: 1)": ({"resources": {args.cpu_resource: 1}}, False),
    }
    refs = {
        what: probe.options(num_cpus=1, max_retries=0, **options).remote(args.data, storage, tracking, cuda)
        for what, (options, cuda) in asks.items()
    }
    print(f"probing {', '.join(refs)}: the autoscaler starts them if none is up (up to {args.timeout:.0f} s)", flush=True)
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=args.timeout)
    failed = 0
    for what, ref in refs.items():
        if ref not in ready:
            print(
                f"{what}: did not start within {args.timeout:.0f} s "
                f"(`ray status` shows what the autoscaler waits for: an instance quota, a capacity error)"
            )
            failed += 1
            continue
        node, checks = ray.get(ref)
        print(f"{what} on {node}:")
        for check in checks:
            print(f"  {check.name:<7} {'ok' if check.ok else 'FAILED':<7} {check.detail}")
            failed += not check.ok
    print("probe: every check held" if not failed else f"probe: {failed} check(s) failed")
    return 1 if failed else 0


def cmd_store_save(args: argparse.Namespace) -> int:
    if args.every is None:
        size = save_store(args.db, args.dest)
        print(f"saved {args.db} to {args.dest} ({size:,} bytes)")
        return 0
    if args.every < 10:
        raise ConfigError(f"--every {args.every:g}: allowed 10 seconds or more")
    last = None
    while True:  # the head's loop: ended with the head (or `pkill`), never by an error
        now = fingerprint(Path(args.db))
        if now != last:
            try:
                size = save_store(args.db, args.dest)
                print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} saved {args.db} to {args.dest} ({size:,} bytes)", flush=True)
                last = now
            except Exception as err:  # noqa: BLE001 - a failed save is retried next time, and said
                print(
                    f"{time.strftime('%Y-%m-%d %H:%M:%S')} could not save {args.db} to {args.dest}: {str(err).splitlines()[0][:200]}",
                    flush=True,
                )
        time.sleep(args.every)


def cmd_store_restore(args: argparse.Namespace) -> int:
    print(restore_store(args.src, args.db))
    return 0


def cmd_cluster_slurm(args: argparse.Namespace) -> int:
    from sweep.cluster.slurm.job_spec import SCRIPT_FILE, JobSpec
    from sweep.cluster.slurm.shape import SlurmShape
    from sweep.cluster.slurm.submit import submit
    from sweep.study.cli_overrides import set_overrides
    from sweep.study.load import load_study
    from sweep.study.names import PROJECT_DIR

    shared = args.shared or os.environ.get("MJP_SLURM_DIR")
    if not shared:
        raise ConfigError(
            "no shared folder: give --shared DIR or set $MJP_SLURM_DIR (a folder every node mounts: the job's sweep, logs and MLflow store)"
        )
    if args.max_restarts < 0:
        raise ConfigError(f"--max-restarts {args.max_restarts}: allowed is 0 or more")
    shape = SlurmShape(
        args.nodes, args.gpus_per_node, args.cpus_per_node, args.partition, args.time, args.account, args.mem, args.signal_lead
    )
    study = load_study(args.study, smoke=args.smoke, overrides=set_overrides(args), files=False)  # as `sweep plan`: data on the nodes
    path = Path(args.study)
    study_arg = str(path.resolve()) if path.suffix in (".yaml", ".yml") or path.exists() else args.study
    shared_dir = Path(shared).expanduser().absolute()
    store = str(Path(args.store).expanduser().absolute()) if args.store else str(shared_dir / "mlflow")
    spec = JobSpec(study_arg, args.smoke, shape, store, list(args.set), args.data, args.max_restarts)
    done = submit(study, spec, shared_dir, PROJECT_DIR, dry_run=args.dry_run)
    if done.job_id is None:
        print(done.script, end="")
        return 0
    j, d = done.job_id, shlex.quote(str(done.job_dir))
    gpus = f"{shape.gpus_per_node} GPUs" if shape.gpus_per_node else "no GPU"
    uri = shlex.quote(f"sqlite:///{store}/mlflow.db")
    print(
        "\n".join(
            [
                f"submitted Slurm job {j}: study {study.name}, {shape.nodes} nodes x ({shape.cpus_per_node} CPUs, {gpus}), "
                f"partition {shape.partition}, {shape.time}",
                f"  its folder: {d}",
                f"  follow it:  squeue -j {j}; tail -f {d}/slurm-{j}.out",
                f"  stop it:    scancel {j}   (then `sbatch {d}/{SCRIPT_FILE}` resumes the sweep)",
                f"  its runs:   mjp sweep status {study.name} --uri {uri}   (the UI while it runs: docs/cluster-slurm.md)",
            ]
        )
    )
    return 0


def cmd_cluster_slurm_job(args: argparse.Namespace) -> int:
    from sweep.cluster.slurm.job import run_job

    return run_job(Path(args.job_dir))


def cmd_cluster_slurm_node(args: argparse.Namespace) -> int:
    from sweep.cluster.slurm.node import join

    return join(Path(args.job_dir).resolve(), args.head)
