"""The one-way rule, read from the source: ``mjp`` <- ``trainables`` <- ``sweep``, ``analysis``
reads MLflow and may use ``mjp``; inside ``trainables`` and ``sweep`` the rooms (folders) sit on
floors and import only downwards; no import cycles between modules; ray, mlflow and optuna only
where they belong. Imports inside functions count (that is where cycles hide)."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("mjp", "trainables", "sweep", "analysis")
#: what each package may import of the project
ALLOWED = {"mjp": {"mjp"}, "trainables": {"mjp", "trainables"}, "analysis": {"mjp", "analysis"}, "sweep": set(PACKAGES)}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    return {name: {m for m in imports(path) if m in files and m != name} for name, path in files.items()}


def importers(library: str) -> set[str]:
    return {
        name
        for name, path in ((module_name(p), p) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))
        if any(m == library or m.startswith(library + ".") for m in imports(path))
    }


#: each package's rooms, lowest floor first: a room imports its own modules and rooms on lower
#: floors only (rooms on one floor do not import each other); a module outside every room is the
#: package's top floor (``sweep.cli``) or, as ``trainables.errors`` and ``trainables.process_identity``,
#: its ground floor (``trainables.written``, ``scratch``, ``process_start`` and ``process_end`` the
#: floor above it)
FLOORS = {
    "trainables": [
        {"errors", "process_identity"},
        {"written", "scratch", "process_start", "process_end"},
        {"config"},
        {"data", "tracking"},
        {"evaluation"},
        {"train"},
        {"launch"},
    ],
    "sweep": [{"study", "security", "console"}, {"cluster", "tuner"}, {"commands"}, {"cli"}],
}
#: rooms with sub-rooms: their floors, the room's own top-level modules ("") last
SUB_FLOORS = {"trainables.data": [{"folder"}, {"gpu"}, {""}]}


def floor_of(module: str) -> tuple[str, int] | None:
    """(room, floor) of a module of trainables/ or sweep/; None outside those two packages."""
    pkg, _, rest = module.partition(".")
    if pkg not in FLOORS:
        return None
    room = rest.split(".")[0]
    return next(((room, i) for i, rooms in enumerate(FLOORS[pkg]) if room in rooms), (room, -1))


def sub_floor(module: str, room: str) -> int | None:
    for parent, floors in SUB_FLOORS.items():
        if module.startswith(parent + "."):
            rest = module[len(parent) + 1 :].split(".")
            sub = rest[0] if len(rest) > 1 else ""
            return next(i for i, subs in enumerate(floors) if sub in subs or (sub not in set().union(*floors) and "" in subs))
    return None


def test_every_module_of_trainables_and_sweep_sits_in_a_room():
    loose = sorted(m for m in graph() if (f := floor_of(m)) and f[1] < 0 and m.count(".") >= 1)
    assert loose == [], f"modules outside the rooms of FLOORS: {loose}"


def test_rooms_import_only_downwards():
    bad = []
    for a, deps in graph().items():
        fa = floor_of(a)
        for b in deps:
            fb = floor_of(b)
            if not fa or not fb or a.split(".")[0] != b.split(".")[0] or fb[1] < 0 or fa[1] < 0:
                continue
            if fa[0] == fb[0]:
                sa, sb = sub_floor(a, fa[0]), sub_floor(b, fb[0])
                if sa is not None and sb is not None and sb > sa:
                    bad.append((a, b))
            elif fb[1] >= fa[1]:
                bad.append((a, b))
    assert not bad, f"imports from a room to one on its own or a higher floor (importer, imported): {bad}"


#: single modules a package may import beyond ALLOWED: analysis reads MLflow by the names the writers use,
#: and writes its files whole or not at all as every room does
ALLOWED_MODULES = {  # the packages themselves: empty faces
    "analysis": {"trainables", "trainables.tracking", "trainables.tracking.schema", "trainables.written"}
}


def test_no_upward_imports():
    bad = [
        (a, b)
        for a, deps in graph().items()
        for b in deps
        if b.split(".")[0] not in ALLOWED[a.split(".")[0]] and b not in ALLOWED_MODULES.get(a.split(".")[0], set())
    ]
    assert not bad, f"imports against the layering (importer, imported): {bad}"


def test_no_import_cycles():
    g = graph()
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(g[node]):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = 2

    for node in sorted(g):
        if node not in state:
            visit(node, [node])
    # a package's __init__ re-exporting its own submodules is not a cycle of concern
    cycles = [
        c
        for c in cycles
        if not all(m.split(".")[0] == c[0].split(".")[0] and (m.count(".") == 0 or m.endswith("__init__")) for m in c[:-1])
    ]
    assert not cycles, f"import cycles: {cycles}"


def test_only_the_orchestration_modules_import_ray():
    allowed = {"trainables.train.session", "trainables.launch.trial", "trainables.launch.ray_runtime", "trainables.data.ray_data"}
    assert {m for m in importers("ray") if not m.startswith("sweep.")} <= allowed


def test_only_the_tracking_adapter_and_analysis_import_mlflow():
    assert {m.rsplit(".", 1)[0] for m in importers("mlflow") if not m.startswith("analysis.")} <= {"trainables.tracking"}


def test_optuna_only_in_the_search_and_its_analysis():
    assert importers("optuna") <= {
        "sweep.study.space",
        "sweep.tuner.tuner",
        "sweep.tuner.run",
        "sweep.tuner.optuna_mirror",
        "analysis.figures.optuna_search",
    }


def test_mjp_imports_without_ray_mlflow_optuna():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in {'ray', 'mlflow', 'optuna'}:\n"
        "            raise ImportError(f'mjp must not import {name}')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import mjp, mjp.metrics, mjp.dal, mjp.models, mjp.privacy, mjp.keys\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"HF_HUB_OFFLINE": "1", "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_the_cli_and_config_validation_import_no_torch():
    """`mjp --help` and a config error must answer at once: no torch, timm, ray or mlflow."""
    code = (
        "import sys\n"
        "from sweep.cli import build_parser\n"
        "build_parser()\n"
        "from trainables.config.build import build_config\n"
        "import sweep.commands.listing, sweep.commands.status, trainables.config.overrides\n"
        "heavy = sorted(m for m in ('torch', 'timm', 'ray', 'mlflow', 'pandas') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
