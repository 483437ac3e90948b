"""Starting Ray: the process environment, a private local Ray on loopback, and Ray's own logs
in a file instead of the console.

- ``prepare_environment()`` sets what must be set before ``import ray`` or ``import mlflow`` (and
  what workers inherit), third-party telemetry off included (``NO_PHONE_HOME``).
- ``ensure_ray()`` joins ``--address`` / ``$RAY_ADDRESS``, or starts a Ray of its own in this
  process. A bare ``ray.init()`` would join whatever cluster ``/tmp/ray`` last named, even a
  dead one. The local one has 127.0.0.1 as its node address, and every listener binds there:
  the dashboard, its agent and the runtime-env agent, and the gRPC servers of the GCS, the
  raylet and the workers, which follow the node address (checked with ``ss -ltnp`` during a
  sweep here; ``tests/sweep/tuner/test_sweep_resume_e2e.py`` checks them; docs/security.md).
- ``console_logs_to(path)``: Ray's, Ray Train's and Tune's Python loggers and warnings go to
  ``path``; workers' output stays in Ray's session logs (not streamed to the console).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

#: Nothing phones home: the libraries' background calls to the internet, off in every process
#: the platform starts (a cluster's nodes usually have none). Set whatever the user's environment
#: says, before MLflow, Ray or huggingface_hub is imported: each reads its switch at import (MLflow
#: starts its telemetry thread there) or when it starts a process. MLflow turns its telemetry off
#: by itself only where it sees a CI variable (``CI``, ``GITHUB_ACTIONS``, ``PYTEST_CURRENT_TEST``,
#: ...): elsewhere its thread once removed ``_MLFLOW_TELEMETRY_SESSION_ID`` from the environment while
#: a request read it (a ``KeyError`` that failed a sweep). Optuna makes no such calls; timm reaches
#: the network only through the Hugging Face hub.
NO_PHONE_HOME = {
    "MLFLOW_DISABLE_TELEMETRY": "true",  # MLflow 3.2+: usage telemetry (client, server and UI)
    "DO_NOT_TRACK": "true",  # the cross-tool switch, read by MLflow and huggingface_hub
    "RAY_USAGE_STATS_ENABLED": "0",  # Ray's usage stats (`ray start`, ray.init, the dashboard)
    "HF_HUB_DISABLE_TELEMETRY": "1",  # huggingface_hub's telemetry
    "HF_HUB_OFFLINE": "1",  # timm (through huggingface_hub) never reaches for the network
}

#: Read when ray is imported (or by the processes Ray starts, which inherit this environment).
_ENVIRONMENT = {
    # Under `uv run`, Ray would start its workers through `uv run` again, in an environment
    # without this project's packages ("No module named 'ray'"); workers use this interpreter.
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
    # Worker-group start on a 2-core machine can pass Ray Train's 60 s default.
    "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "300",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",  # MLflow's own "View run ... at" line after each run, on a server
    "TUNE_MAX_PENDING_TRIALS_PG": "1",
    # Ray starts its workers at nice 15: beside any busy process of normal priority a trial then
    # gets a few percent of a core (measured: 4 % beside two busy loops on 2 cores, 10x slower
    # sweeps). The trials are the work the user asked for; they share the CPU as equals.
    "RAY_worker_niceness": "0",
    "RAY_DEDUP_LOGS": "0",
    # Prestarted idle workers have the default runtime env, each Tune trial its own (class_cache):
    # no trial ran on one (a 2-trial sweep: 26.9, 27.1 CPU-s with them; 25.9, 25.4 without).
    "RAY_prestart_worker_first_driver": "0",
    **{
        # One seed, one result on any x86-64 CPU with AVX2: torch's own kernels, MKL's GEMMs and
        # oneDNN otherwise pick code paths by CPU (AVX-512 or not, Intel or AMD), and a 30-epoch
        # training amplifies their last-bit differences into points of top-1. Pinned here, read
        # when torch loads (and by the Ray workers, which inherit this environment).
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_CBWR": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
    },
}

_LOGGERS = ("ray", "py.warnings", "filelock", "urllib3", "alembic", "mlflow", "optuna", "torch", "timm")


def prepare_environment() -> None:
    """Defaults this process and every Ray process it starts need; the user's values win, except
    ``NO_PHONE_HOME``'s, which are always set. A
    tracking URI's credentials leave ``$MLFLOW_TRACKING_URI`` (``trainables.tracking.credentials``),
    AWS keys the environment (``trainables.launch.aws_keys``)."""
    for key, value in _ENVIRONMENT.items():
        os.environ.setdefault(key, value)
    os.environ.update(NO_PHONE_HOME)
    from trainables.tracking.credentials import scrub_environment

    scrub_environment()  # $MLFLOW_TRACKING_URI's user:password into MLflow's own variables, before anything prints or passes it on
    from trainables.launch.aws_keys import keys_to_private_file

    keys_to_private_file()  # Tune would copy AWS keys into every trial's runtime env, which Ray logs


def console_logs_to(path: Path | None, verbose: bool = False) -> None:
    """Send the libraries' log records and Python warnings to ``path`` (and, verbose, to stderr).

    The handlers sit on the root logger and the libraries' loggers propagate to it: ``ray.init``
    clears the "ray" logger's own handlers, optuna and MLflow install their own console handlers.
    Not verbose, Tune's console output (its experiment banner, progress tables) is off too.
    """
    import ray  # noqa: F401 - its import installs console handlers, replaced below

    if not verbose:
        os.environ["RAY_AIR_NEW_OUTPUT"] = "0"  # the legacy reporter prints nothing at verbose=0
    library_logs_to(path, verbose)


def library_logs_to(path: Path | None, verbose: bool = False) -> None:
    """The libraries' INFO records (MLflow's database set-up, ...) and Python warnings to ``path``
    only (verbose: also to stderr); a command that starts no Ray calls this alone."""
    handlers: list[logging.Handler] = []
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handlers.append(handler)
    if verbose:
        handlers.append(logging.StreamHandler())
    root = logging.getLogger()
    root.handlers = handlers
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers = []
        logger.propagate = True
        if name != "ray":
            logger.setLevel(logging.INFO if verbose else logging.WARNING)


def require_cluster(address: str | None) -> None:
    """``require_gcs`` for the cluster a command was pointed at (``address`` / ``$RAY_ADDRESS``), if any."""
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        require_gcs(address)


def require_gcs(address: str, seconds: float = 5.0) -> None:
    """``ConfigError`` in one line when nothing listens at a cluster's ``host:port`` (Ray would wait
    and retry first): the local twin's exports left set after ``mjp cluster down``, a cluster that
    is down. ``auto`` and ``ray://`` addresses are left to Ray."""
    import socket

    from trainables.errors import ConfigError

    if address == "auto" or "://" in address or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=seconds).close()
    except (OSError, ValueError) as err:
        source = "$RAY_ADDRESS" if os.environ.get("RAY_ADDRESS") == address else "--address"
        raise ConfigError(
            f"no Ray cluster answers at {address} ({source}: {err}); start it (`mjp cluster up --local`, or `ray up cluster.yaml`), "
            "or `unset RAY_ADDRESS` to run on a Ray of this process"
        ) from None


def ensure_ray(address: str | None = None, *, num_cpus: int | None = None, verbose: bool = False, dashboard: bool = False) -> None:
    """Connect to ``address`` / ``$RAY_ADDRESS``, or start a private local Ray in this process.

    ``dashboard``: start Ray's dashboard, whose state API frees the placement groups of Ray Train
    runs that Tune stopped early (ray#54305): needed when trials use several workers, or to
    look at Ray itself (``--verbose``). Without it a local Ray starts in about 9 s instead of 12.
    """
    prepare_environment()
    import ray

    from trainables.launch.ray_cleanup import watch_local_ray
    from trainables.launch.signals import sigterm_as_ctrl_c
    from trainables.process_start import ray_job_runtime_env

    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS")
    job: dict[str, Any] = dict(log_to_driver=verbose, configure_logging=False, runtime_env=ray_job_runtime_env(address))
    if address:
        require_gcs(address)
        ray.init(address=address, **job)
        sigterm_as_ctrl_c()  # ray.init's own SIGTERM handler exits at once, leaving MLflow runs RUNNING
        if not verbose:
            raylet_messages_to_log()
        return
    _node_address_is_loopback()
    _private_ray_token()
    ray.init(
        address="local",
        num_cpus=num_cpus,
        _node_ip_address="127.0.0.1",
        include_dashboard=dashboard or verbose,
        dashboard_host="127.0.0.1",
        **job,
    )
    sigterm_as_ctrl_c()
    if not verbose:
        raylet_messages_to_log()
    watch_local_ray()


def _private_ray_token() -> None:
    """The token of a private local Ray (Ray turns token authentication on for a local cluster),
    in a process secret file (``process_secrets``: mode 0600, ends with this process) named by
    ``RAY_AUTH_TOKEN_PATH``, unless a token is set already. Ray would otherwise write a fresh one to
    ``~/.ray/auth_token`` readable by every user (mode 0644) and leave it there."""
    import secrets

    from trainables.launch.process_secrets import process_secret_file, readable_secret

    if os.environ.get("RAY_AUTH_MODE", "token").lower() != "token" or "RAY_AUTH_TOKEN" in os.environ:
        return
    if "RAY_AUTH_TOKEN_PATH" in os.environ and readable_secret(os.environ["RAY_AUTH_TOKEN_PATH"]):
        return
    # none, or one this process cannot open: another process's secret file, inherited with the
    # environment from a parent that has ended or sits in another user namespace (``unshare -r``)
    path = process_secret_file("ray-token", secrets.token_hex(32))  # 256 bits, as `ray get-auth-token --generate`
    if path is not None:
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(path)


def check_local_resources(cfg: Any, address: str | None) -> None:
    """Refuse, before anything starts, what a private local Ray cannot offer: it has this machine's
    CPUs and GPUs only, and a trial asking for ``mjp_gpu``, or for a GPU this machine lacks, would
    wait there forever; one asking for more CPUs than the machine has would get a Ray that pretends
    to have them and as many threads per trial. Raises ``ConfigError`` naming the key; on a cluster
    (``address`` / ``$RAY_ADDRESS``) the nodes, or the autoscaler, provide them, so nothing is refused."""
    if address or os.environ.get("RAY_ADDRESS"):
        return
    from trainables.errors import ConfigError

    elsewhere = "or run on the cluster (--address, or $RAY_ADDRESS after `mjp cluster up --local`)"
    for key, wanted in (
        ("scaling.worker_resources", cfg.scaling.worker_resources),
        ("data.ray_data_resources", cfg.data.ray_data_resources),
    ):
        if wanted:
            raise ConfigError(
                f"{key}={dict(wanted)} asks for custom resources that only a cluster's nodes declare, and this command "
                f"starts its own Ray on this machine: remove {key}, {elsewhere}"
            )
    s = cfg.scaling
    if s.use_gpu:
        import torch

        have = torch.cuda.device_count() if torch.cuda.is_available() else 0
        need = s.num_workers * s.gpus_per_worker
        if need > have:
            raise ConfigError(
                f"scaling.use_gpu=true asks for {need:g} GPU(s) per trial "
                f"(scaling.num_workers={s.num_workers} x scaling.gpus_per_worker={s.gpus_per_worker:g}), "
                f"but this machine has {have} (torch sees {have if have else 'no'} CUDA device{'' if have == 1 else 's'}) "
                f"and this command starts its own Ray here, "
                f"where the trial would wait forever: set scaling.use_gpu=false, {elsewhere}"
            )
    cores = os.cpu_count() or 1
    threads = s.num_workers * s.cpus_per_worker
    if threads > cores:
        raise ConfigError(
            f"scaling.num_workers={s.num_workers} x scaling.cpus_per_worker={s.cpus_per_worker:g} = {threads:g} CPUs per trial, "
            f"but this machine has {cores} "
            f"and this command starts its own Ray here (it would train with {threads:g} threads on {cores} cores): "
            f"allowed: at most {cores} in all, {elsewhere}"
        )


def raylet_messages_to_log() -> None:
    """The raylet's messages to the driver ("(raylet) A worker died or was killed while executing
    a task ...", a lost worker that the trial's retry survives) go to the log file, not the
    console: Ray's driver prints them from a thread of its own whatever ``log_to_driver`` says.
    Replaces ``ray._private.worker.print_to_stdstream``, which that thread calls; the trial's
    own line on the console says what happened to it."""
    from ray._private import worker

    original = worker.print_to_stdstream
    if getattr(original, "mjp_to_log", False):
        return
    log = logging.getLogger("ray.raylet")

    def to_log(data: dict, ignore_prefix: bool) -> None:
        if data.get("pid") == "raylet":
            for line in data.get("lines", []):
                log.warning("(raylet) %s", line)
        else:
            original(data, ignore_prefix)

    to_log.mjp_to_log = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_log


def _node_address_is_loopback() -> None:
    """Make a local Ray's node address 127.0.0.1 in fact. Ray 2.60 replaces a loopback
    ``_node_ip_address`` with the machine's outward address unless its "no cluster" switch is off
    (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, read when ray is imported, and the constant it sets
    in this already-importing process; Ray's services read it at call time). With the node at
    127.0.0.1 the dashboard agent's and the runtime-env agent's HTTP servers bind loopback too.
    The processes Ray starts inherit the variable. ``tests/sweep/tuner/test_sweep_resume_e2e.py`` checks the listeners."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False


def ray_session_logs() -> Path | None:
    """The folder of this Ray session's process logs (workers, raylet, GCS), when Ray runs here."""
    import ray

    node = getattr(ray._private.worker, "_global_node", None) if ray.is_initialized() else None
    return Path(node.get_logs_dir_path()) if node is not None else None
