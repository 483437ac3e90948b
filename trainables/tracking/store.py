"""The MLflow store: its URI (SQLite file or tracking server), checked readable and writable before
any work, created once with its schema, the experiment and its note, the Optuna storage beside it,
and the git commit runs record."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import mlflow
from mlflow.tracking import MlflowClient

from trainables.tracking import schema
from trainables.tracking.credentials import without_credentials
from trainables.tracking.sqlite_sweeps import absolute_sqlite, configured_uri
from trainables.tracking.store_file import TrackingError, check_store_file, store_lock
from trainables.tracking.store_schema import engine_disposed, open_schema, schema_work_unlogged, scratch_writes


def tracking_uri(configured: str | None = None, base_dir: str | Path | None = None) -> str:
    """The tracking URI: ``configured``, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<abs>/mlflow.db``.
    Relative SQLite paths become absolute (Ray workers run in other directories); a server's user
    and password leave the URI for MLflow's environment (``credentials.without_credentials``)."""
    uri = without_credentials(configured_uri(configured))  # user:password@ into the environment
    _check_scheme(uri)
    uri = absolute_sqlite(uri, base_dir)
    require_server(uri)
    return uri


def is_tracking_server(uri: str) -> bool:
    """Whether ``uri`` names an MLflow tracking server (which serves its own UI) rather than a store."""
    return uri.startswith(("http://", "https://"))


_ANSWERED: set[str] = set()  # tracking servers this process has heard from


def require_server(uri: str, seconds: float = 5.0) -> None:
    """``TrackingError`` in one line, within ``seconds``, when ``uri`` is a tracking server that does
    not answer: MLflow itself retries an absent server for minutes and ends in a long traceback
    (the local twin's exports left set after ``mjp cluster down``). Any HTTP answer will do."""
    if not is_tracking_server(uri) or uri in _ANSWERED:
        return
    silence = server_silence(uri, seconds)
    if silence is not None:
        source = "$MLFLOW_TRACKING_URI" if os.environ.get("MLFLOW_TRACKING_URI") == uri else "the tracking URI"
        raise TrackingError(
            f"no MLflow server answers at {uri} ({source}: {silence}); start it (the local twin: `mjp cluster up --local`, "
            "then its exports), or `unset MLFLOW_TRACKING_URI` for the local store ./mlflow.db"
        )
    _ANSWERED.add(uri)


@contextlib.contextmanager
def bounded_http(seconds: float = 10.0) -> Iterator[None]:
    """MLflow's HTTP requests inside this block are tried once, for at most ``seconds``: a check
    of a store fails in seconds, not after MLflow's retries with back-off (minutes). MLflow reads
    these variables at each request."""
    bounds = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": str(int(seconds))}
    before = {k: os.environ.get(k) for k in bounds}
    os.environ.update(bounds)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def server_silence(uri: str, seconds: float) -> str | None:
    """Why the tracking server at ``uri`` did not answer its health check within ``seconds``; None
    when it answered (any HTTP answer: a proxy in front of it may want a login for /health)."""
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=seconds).close()
    except urllib.error.HTTPError:
        return None
    except OSError as err:
        return str(getattr(err, "reason", err))
    return None


def check_server_access(uri: str, seconds: float = 10.0) -> None:
    """``TrackingError`` in one line when the tracking server at ``uri`` refuses this process'
    credentials (HTTP 401/403), before MLflow's client meets the refusal deep in a command: the
    credentials MLflow would send (``MLFLOW_TRACKING_TOKEN`` as a bearer token, else
    ``MLFLOW_TRACKING_USERNAME``/``PASSWORD``) on one cheap search."""
    import base64
    import urllib.error
    import urllib.request

    if not is_tracking_server(uri):
        return
    request = urllib.request.Request(uri.rstrip("/") + "/api/2.0/mlflow/experiments/search?max_results=1")
    token, user = os.environ.get("MLFLOW_TRACKING_TOKEN"), os.environ.get("MLFLOW_TRACKING_USERNAME")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    elif user:
        pair = f"{user}:{os.environ.get('MLFLOW_TRACKING_PASSWORD', '')}".encode()
        request.add_header("Authorization", "Basic " + base64.b64encode(pair).decode())
    try:
        urllib.request.urlopen(request, timeout=seconds).close()
    except urllib.error.HTTPError as err:
        if err.code in (401, 403):
            sent = "the token in $MLFLOW_TRACKING_TOKEN" if token else "the user and password given" if user else "no credentials"
            raise TrackingError(
                f"the MLflow server at {uri} refuses {sent} (HTTP {err.code}); on cluster.yaml's cluster or the twin: "
                "`export MLFLOW_TRACKING_TOKEN=$(cat ~/.ray/auth_token)` (the twin's: its session's auth_token), "
                "else the server's user:password in the URI"
            ) from None
    except OSError:
        return  # not an answer about credentials: the commands' own checks say what is wrong


#: the stores MLflow 3 opens (a database through SQLAlchemy, with an optional ``+driver``, a
#: tracking server, Databricks, a local folder)
STORE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks", "file")


def _check_scheme(uri: str) -> None:
    """A misspelt scheme fails here, in one line, not in MLflow after Ray has started."""
    if "://" not in uri:
        return
    scheme = uri.split("://", 1)[0].lower()
    if scheme.split("+", 1)[0] in STORE_SCHEMES:
        return
    import difflib

    close = difflib.get_close_matches(scheme.split("+", 1)[0], STORE_SCHEMES, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}://?)" if close else ""
    raise TrackingError(
        f"tracking URI {uri!r}: MLflow cannot open a '{scheme}://' store{hint}; "
        f"allowed: {', '.join(s + '://' for s in STORE_SCHEMES)} or a path to a SQLite file"
    )


def sqlite_path(uri: str) -> Path | None:
    return Path(uri[len("sqlite:///") :]) if uri.startswith("sqlite:///") else None


def optuna_storage_url(uri: str) -> str | None:
    """Optuna's study lives beside a SQLite MLflow store (``optuna.db``); None for other stores."""
    path = sqlite_path(uri)
    return f"sqlite:///{path.parent / 'optuna.db'}" if path is not None else None


def _artifact_root(uri: str) -> str | None:
    """Artifacts next to a SQLite store (absolute); a server decides its own."""
    path = sqlite_path(uri)
    return (path.parent / "mlartifacts").resolve().as_uri() if path else None


def check_store_readable(uri: str) -> None:
    """Reading commands never create a store: a SQLite file that does not exist, is empty or damaged,
    or whose schema MLflow cannot open (``open_schema``; an older one it migrates) is an error."""
    path = sqlite_path(uri)
    if path is not None and not path.is_file():
        raise TrackingError(f"no MLflow store at {path} (nothing has been run with this tracking URI); give --uri or run a sweep first")
    if path is not None:
        check_store_file(path)
        open_schema(uri, path)  # not under store_lock: a Slurm job serving the store holds its folder's lock for its whole run
    check_server_access(uri)


def check_store_writable(uri: str) -> None:
    """Before launch: a SQLite store (and its artifact folder) must be creatable and writable, and
    an existing one a schema MLflow opens (``open_schema``); a server must take this process' credentials."""
    path = sqlite_path(uri)
    if path is None:
        check_server_access(uri)
        return
    parent = path.parent
    if not parent.is_dir():
        raise TrackingError(f"cannot create the MLflow store {path}: the directory {parent} does not exist")
    for target in (path if path.exists() else parent, parent / "mlartifacts"):
        if target.exists() and not os.access(target, os.W_OK):
            raise TrackingError(f"the MLflow store is read-only: cannot write {target} (check its permissions or give tracking.uri)")
    if path.exists():
        check_store_file(path)
        try:
            with sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=30) as db:
                db.execute("BEGIN IMMEDIATE")
                db.rollback()
        except sqlite3.DatabaseError as err:
            raise TrackingError(f"the MLflow store {path} cannot be written: {err}") from None
        with store_lock(path):
            open_schema(uri, path)


_READY: set[str] = set()  # stores this process has created or checked


def ready_store(uri: str) -> MlflowClient:
    """A client of ``uri``, whose SQLite store (created on first use) is complete before anyone
    writes to it: its creation and migrations run under ``store_lock``, once per process."""
    path = sqlite_path(uri)
    if path is not None and uri not in _READY:
        with store_lock(path):
            create_store_whole(path)
            open_schema(uri, path)  # an older schema migrated as MLflow does; one it cannot open is one line
        _READY.add(uri)
    return MlflowClient(uri)


def create_store_whole(path: Path, *, served: bool = False) -> None:
    """A new SQLite MLflow store at ``path`` unless one is there, made aside and published whole
    (``made_aside``): SQLite commits MLflow's ~440 schema statements one by one, and a command killed
    among them left a store every later command met with a traceback ("table ... already exists").
    ``served``: the Default experiment's artifacts under ``mlflow-artifacts:/``, as a server makes it."""
    from mlflow.store.tracking import DEFAULT_ARTIFACTS_URI
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    from trainables.written import made_aside

    if path.exists():
        return
    with made_aside(path) as aside, schema_work_unlogged(), scratch_writes(aside):
        aside_uri = f"sqlite:///{aside}"
        try:
            if served:
                SqlAlchemyStore(aside_uri, DEFAULT_ARTIFACTS_URI)  # creates the schema and the Default experiment
            else:
                MlflowClient(aside_uri).search_experiments(max_results=1)  # the same, as any command of this process would
        finally:
            engine_disposed(aside_uri)  # its connections closed before the file moves


#: the kind the MLflow UI shows for our experiments (model training, not GenAI); it still opens an
#: experiment on its overview, so the commands print the runs table's address (experiment_runs_page)
EXPERIMENT_KIND = {schema.TAG_EXPERIMENT_KIND: "custom_model_development"}


def experiment_id(client: MlflowClient, name: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None and exp.lifecycle_stage == "deleted":
        raise TrackingError(
            f"MLflow experiment {name!r} in {client.tracking_uri} is deleted; restore it "
            f"(mlflow experiments restore --experiment-id {exp.experiment_id}) or name another with tracking.experiment"
        )
    if exp is not None:
        return exp.experiment_id
    try:
        return client.create_experiment(name, artifact_location=_artifact_root(client.tracking_uri), tags=EXPERIMENT_KIND)
    except mlflow.exceptions.MlflowException as err:
        exp = client.get_experiment_by_name(name)  # created meanwhile by another process?
        if exp is None:
            raise TrackingError(
                f"cannot create MLflow experiment {name!r} in {client.tracking_uri}: {str(err).splitlines()[0][:300]}"
            ) from None
        return exp.experiment_id


def experiment_runs_page(uri: str, name: str, host: str = "http://127.0.0.1:5000") -> str:
    """The MLflow UI's address of the experiment's runs table (MLflow 3 opens an experiment on its
    GenAI overview otherwise); the UI's home when the experiment does not exist."""
    exp = MlflowClient(uri).get_experiment_by_name(name)
    return f"{host}/#/experiments/{exp.experiment_id}/runs" if exp is not None else host


def set_experiment_note(uri: str, name: str, text: str) -> None:
    """The experiment's description in the MLflow UI (``mlflow.note.content``)."""
    client = ready_store(uri)
    exp = experiment_id(client, name)
    client.set_experiment_tag(exp, schema.TAG_NOTE, text)
    for key, value in EXPERIMENT_KIND.items():
        client.set_experiment_tag(exp, key, value)


def git_commit(path: str | Path | None = None) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path or Path(__file__).parent, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
