"""The kit, checked and unpacked: every wheel of ``.gpu-kit/`` (``make gpu-kit``) is first held to
the file name, size and sha256 that ``uv.lock`` gives it (a missing, truncated, altered or unknown
wheel stops the check in one line, before anything is unpacked or any step runs), then extracted
into a temporary folder that goes first on ``PYTHONPATH``. A wheel is a zip whose root is
importable as it stands, so this needs neither pip, nor the network, nor write access to the
image's site-packages. Under another Python than the kit's (3.12) nothing is unpacked: its
compiled wheels would not import, and its pure ones would shadow that environment's own. Only
the standard library: it runs before anything else is known to import."""

from __future__ import annotations

import argparse
import hashlib
import platform
import sys
import tomllib
import zipfile
from collections.abc import Iterable
from pathlib import Path

from benchmarks.gpu_check.make_kit import KIT, locked_wheel

#: what ``make gpu-kit`` downloads for (``make_kit.py``): the stock image's Python
KIT_PYTHON = (3, 12)


class KitError(SystemExit):
    """The kit cannot be used: one line saying which wheel and why."""


def kit_fits() -> bool:
    """Whether this interpreter can import the kit's compiled wheels (cp312, manylinux x86_64)."""
    return (
        sys.implementation.name == "cpython"
        and sys.version_info[:2] == KIT_PYTHON
        and platform.system() == "Linux"
        and platform.machine() == "x86_64"
    )


def expected_wheels(lock: Path, names: Iterable[str] = KIT) -> dict[str, tuple[str, int, str]]:
    """wheel file name -> (package, size, sha256) of each of ``names``, as ``make gpu-kit`` takes them from ``lock``."""
    data = tomllib.loads(lock.read_text())
    wheels = {}
    for name in names:
        _version, wheel = locked_wheel(data, name)
        wheels[wheel["url"].rsplit("/", 1)[1]] = (name, int(wheel["size"]), wheel["hash"].removeprefix("sha256:"))
    return wheels


def verify(kit: Path, lock: Path, names: Iterable[str] = KIT) -> list[Path]:
    """The kit's wheels (of the packages ``names``), each checked against ``lock``; ``KitError`` (one
    line) for the first that is missing, of the wrong size or hash, or not one of the kit's."""
    again = "run `make gpu-kit` again and copy .gpu-kit/ over"
    expected = expected_wheels(lock, names)
    for path in sorted(kit.glob("*.whl")):
        if path.name not in expected:
            raise KitError(f"gpu check: {path} is not one of the kit's wheels in {lock}; remove it or {again}")
    checked = []
    for filename, (name, size, sha256) in expected.items():
        path = kit / filename
        if not path.is_file():
            raise KitError(f"gpu check: the kit lacks {filename} ({name}, in {lock}); {again}")
        data = path.read_bytes()
        if len(data) != size:
            raise KitError(f"gpu check: {path} is {len(data):,} bytes, {lock} says {size:,} (truncated or altered); {again}")
        if hashlib.sha256(data).hexdigest() != sha256:
            raise KitError(f"gpu check: {path} does not match the sha256 {sha256} of {lock} (altered); {again}")
        checked.append(path)
    return checked


def unpack(wheels: list[Path], target: Path) -> list[str]:
    """Extract ``wheels`` into ``target``; returns their names. A file that is not a readable wheel
    stops it with one line naming the file."""
    target.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        try:
            with zipfile.ZipFile(wheel) as archive:
                bad = archive.testzip()
                if bad is not None:
                    raise zipfile.BadZipFile(f"member {bad} is corrupt")
                archive.extractall(target)
        except (zipfile.BadZipFile, OSError) as exc:
            raise KitError(f"gpu check: {wheel} is not a readable wheel ({exc}); run `make gpu-kit` again and copy .gpu-kit/ over") from exc
    return [w.name for w in wheels]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kit", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--lock", type=Path, default=Path("uv.lock"))
    args = parser.parse_args()
    if not args.kit.is_dir():
        print(f"no kit at {args.kit}: the image's own packages only (make gpu-kit makes one)")
        return
    wheels = verify(args.kit, args.lock)
    print(f"{len(wheels)} wheels in {args.kit} match {args.lock} (name, size, sha256)")
    if not kit_fits():
        print(
            f"the kit is for CPython {KIT_PYTHON[0]}.{KIT_PYTHON[1]} on Linux x86_64, this is {platform.python_implementation()} "
            f"{platform.python_version()} on {platform.system()} {platform.machine()}: not unpacked, this environment's packages only"
        )
        return
    names = unpack(wheels, args.target)
    print(f"{len(names)} wheels unpacked into {args.target}: {', '.join(names) or 'none'}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
