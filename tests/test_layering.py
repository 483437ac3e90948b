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
        "import mjp, mjp.metrics, mjp.dal, mjp.models\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"HF_HUB_OFFLINE": "1", "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
