"""``make gpu-kit``: the wheels the GPU check needs beyond a stock PyTorch image (Python 3.12,
torch, torchvision, timm, numpy, pillow, pyyaml, pandas, scipy; no pytest, no scikit-learn), for
manylinux x86_64, at the versions and hashes of ``uv.lock``, without their dependencies (each one
needed is named below), into ``.gpu-kit/`` with a ``MANIFEST.md`` saying why each is there. Of
each locked version it takes the smallest wheel that Python 3.12 on manylinux x86_64 can import
(a pure-Python wheel where one exists). Fails if the kit passes 32 MiB. The GPU machine holds
each wheel to uv.lock's name, size and sha256 before unpacking any (``kit.py``)."""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import tomllib
import urllib.request
from pathlib import Path

from trainables.written import write_atomically

#: package (as uv.lock names it) -> why the check needs it
KIT = {
    "pydantic": "trainables.config and mjp.config validate every config with it (the engine rows and the gpu tests build configs)",
    "pydantic-core": "pydantic's compiled core",
    "annotated-types": "a dependency of pydantic",
    "typing-inspection": "a dependency of pydantic",
    "typing-extensions": "pydantic needs a newer one than torch's images may carry",
    "pytorch-msssim": "mjp.privacy's scores (SSIM): APRIL's attack and its gpu test import mjp.privacy",
    "matplotlib": "the evaluations' figures (trainables/evaluation/figures.py): the gpu test of robustness and PE analysis",
    "contourpy": "a dependency of matplotlib",
    "cycler": "a dependency of matplotlib",
    "fonttools": "a dependency of matplotlib (its pure-Python wheel)",
    "kiwisolver": "a dependency of matplotlib",
    "pyparsing": "a dependency of matplotlib",
    "pytest": "runs the gpu tests (the `tests` step); the stock image has no pytest",
    "pluggy": "a dependency of pytest",
    "iniconfig": "a dependency of pytest",
    "packaging": "a dependency of pytest",
    "pygments": "a dependency of pytest",
    "scikit-learn": "the digits data set the evaluation gpu tests train on, and the PE analysis's regression; the image has none",
    "joblib": "a dependency of scikit-learn",
    "cloudpickle": "a dependency of joblib",
    "threadpoolctl": "a dependency of scikit-learn",
    "narwhals": "a dependency of scikit-learn",
    "imagecorruptions-imaug": "the ImageNet-C corruptions of the robustness gpu test; it imports cv2, numba and scikit-image, "
    "which the kit cannot carry (about 140 MB): where the image lacks them that test is skipped, saying so",
}
PYTHON_312 = "python_full_version >= '3.12' and python_full_version < '3.14' and sys_platform != 'emscripten' and sys_platform != 'win32'"
COMPATIBLE = re.compile(r"-(py3|py2\.py3|cp312|cp3\d?-abi3|cp3\d-abi3)-(none|cp312|abi3)-(any|manylinux[\w.]*x86_64)\.whl$")
LIMIT_MIB = 32


def locked_wheel(lock: dict, name: str) -> tuple[str, dict]:
    """(version, wheel entry) of ``name`` for Python 3.12 on Linux: the smallest compatible wheel."""
    entries = [
        p for p in lock["package"] if p["name"] == name and (not p.get("resolution-markers") or PYTHON_312 in p["resolution-markers"])
    ]
    if len(entries) != 1:
        raise SystemExit(f"gpu-kit: uv.lock has {len(entries)} versions of {name} for Python 3.12 on Linux (expected 1)")
    wheels = [w for w in entries[0].get("wheels", []) if COMPATIBLE.search(w["url"].rsplit("/", 1)[1])]
    if not wheels:
        raise SystemExit(f"gpu-kit: uv.lock has no wheel of {name} {entries[0]['version']} for Python 3.12 on manylinux x86_64")
    return entries[0]["version"], min(wheels, key=lambda w: w["size"])


def fetch(url: str, sha256: str, dest: Path) -> None:
    if dest.exists() and hashlib.sha256(dest.read_bytes()).hexdigest() == sha256:
        return
    with urllib.request.urlopen(url, timeout=120) as response:
        data = response.read()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise SystemExit(f"gpu-kit: {url} does not match uv.lock's sha256 {sha256}")
    write_atomically(dest, data)  # a kill mid-write leaves no torn wheel


def tree_commit() -> str:
    """This tree's commit (``+dirty`` with uncommitted changes), for a GPU machine whose copy has no ``.git``."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], check=False, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lock", type=Path, default=Path("uv.lock"))
    parser.add_argument("--out", type=Path, default=Path(".gpu-kit"))
    args = parser.parse_args()
    lock = tomllib.loads(args.lock.read_text())
    args.out.mkdir(exist_ok=True)
    rows, keep = [], {"MANIFEST.md", "COMMIT"}
    for name, why in KIT.items():
        _version, wheel = locked_wheel(lock, name)
        filename = wheel["url"].rsplit("/", 1)[1]
        fetch(wheel["url"], wheel["hash"].removeprefix("sha256:"), args.out / filename)
        keep.add(filename)
        rows.append(f"| {filename} | {wheel['size'] / 2**20:.2f} | {why} |")
    for stale in args.out.iterdir():
        if stale.name not in keep:
            stale.unlink()
    write_atomically(args.out / "COMMIT", tree_commit() + "\n")
    total = sum(f.stat().st_size for f in args.out.glob("*.whl")) / 2**20
    write_atomically(
        args.out / "MANIFEST.md",
        "\n".join(
            [
                "# .gpu-kit: what `benchmarks/gpu_check.sh` unpacks on a stock PyTorch image (made by `make gpu-kit` from uv.lock)",
                "",
                "| wheel | MiB | why the check needs it |",
                "| --- | ---: | --- |",
                *rows,
                "",
                f"Total: {total:.1f} MiB (at most {LIMIT_MIB}).",
                "",
            ]
        ),
    )
    if total > LIMIT_MIB:
        raise SystemExit(f"gpu-kit: {total:.1f} MiB of wheels, over the {LIMIT_MIB} MiB the GPU machine's folder leaves for them")
    print(f"{args.out}: {len(KIT)} wheels, {total:.1f} MiB (MANIFEST.md says why each)")


if __name__ == "__main__":
    main()
