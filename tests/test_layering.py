"""The one-way rule: the method package never imports orchestration or tracking."""

import subprocess
import sys


def test_mjp_imports_without_ray_mlflow_optuna():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in {'ray', 'mlflow', 'optuna'}:\n"
        "            raise ImportError(f'mjp must not import {name}')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import mjp, mjp.metrics, mjp.dal, mjp.models, mjp.privacy\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"HF_HUB_OFFLINE": "1", "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def _importers(module: str) -> set[str]:
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    pattern = re.compile(rf"^\s*(import|from)\s+{module}\b", re.M)
    return {str(p.relative_to(root)) for pkg in ("mjp", "trainables", "sweep", "analysis") for p in (root / pkg).rglob("*.py") if pattern.search(p.read_text())}


def test_only_the_orchestration_modules_import_ray():
    allowed = {"trainables/worker.py", "trainables/driver.py"}
    assert {f for f in _importers("ray") if not f.startswith("sweep/")} <= allowed


def test_only_the_tracking_adapter_and_analysis_import_mlflow():
    assert {f for f in _importers("mlflow") if not f.startswith("analysis/")} <= {"trainables/tracking.py"}
    assert not _importers("optuna") - {"sweep/space.py"}
