"""Study names a user types (``--study``): a shipped study, or one with sweeps in the store.
A name that is neither is an error with the closest existing name, or the shipped ones when
none is close, never a suggestion to run a study that does not exist."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from trainables.config.overrides import did_you_mean
from trainables.errors import UserError

#: the shipped studies (inside the package), and the checkout: the folder of pyproject.toml above
#: this module, or the package's parent where the package was installed without its checkout
STUDIES_DIR = Path(__file__).resolve().parents[1] / "studies"
PROJECT_DIR = next((p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file()), STUDIES_DIR.parents[1])


#: a study's name: letters, digits, ``_``, ``.`` and ``-``, not first ``.`` or ``-``; so it is one
#: plain folder or file name (``reports/<name>/``, ``results/<name>.json``), never ``.`` or ``..``
STUDY_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"


def named_inside(folder: str | Path, name: str, suffix: str = "") -> Path:
    """``folder/<name><suffix>`` for a study or sweep ``name`` (one recorded by an older version
    included); ``UserError`` when ``name`` is not one plain path part inside ``folder``."""
    if not name or name in (".", "..") or name.startswith(".") or any(c in name for c in "/\\\0"):
        raise UserError(
            f"study or sweep name {name!r} is not a plain folder name, so nothing is written for it under {folder}; "
            "allowed: letters, digits, _, . and -, not starting with ."
        )
    return Path(folder) / f"{name}{suffix}"


def shipped_studies() -> list[str]:
    return sorted(p.stem for p in STUDIES_DIR.glob("*.yaml"))


def shipped_study(name: str) -> Path | None:
    """The file of shipped study ``name``, or None."""
    path = STUDIES_DIR / f"{name}.yaml"
    return path if name in shipped_studies() else None


def smoke_name(name: str) -> str:
    """What a study's smoke size is recorded as: its sweeps, MLflow experiment and report folder."""
    return f"{name}-smoke"


def smoke_of(name: str) -> str | None:
    """The shipped study whose smoke size ``name`` is (``quickstart`` for ``quickstart-smoke``), or None."""
    base = name.removesuffix(smoke_name(""))
    return base if base != name and base in shipped_studies() else None


def check_study_name(name: str, recorded: Iterable[str], uri: str) -> None:
    """``UserError`` unless ``name`` is shipped, the smoke size of a shipped one, or ``recorded``
    (studies with sweeps in ``uri``)."""
    recorded = sorted(set(recorded))
    shipped = shipped_studies()
    if name in shipped or smoke_of(name) or name in recorded:
        return
    hint = did_you_mean(name, shipped + recorded) or " (none is close)"
    ran = f"; with sweeps in this store: {', '.join(recorded)}" if recorded else ""
    raise UserError(f"study {name!r} is neither a shipped study nor one with sweeps in {uri}{hint}; shipped: {', '.join(shipped)}{ran}")


def no_sweep_error(name: str, recorded: Iterable[str], uri: str) -> UserError:
    """The error for a study with no sweep in ``uri``; it names the study's smoke size when that
    one has sweeps (a smoke run is recorded apart, as ``<name>-smoke``)."""
    smoke = smoke_name(name)
    also = f" (its smoke size has: `--study {smoke}`)" if smoke in set(recorded) else ""
    base = smoke_of(name)
    run = f"mjp sweep run {base} --smoke" if base else f"mjp sweep run {name}"
    return UserError(f"no sweep of study {name!r} in {uri}{also}; run `{run}` first")
