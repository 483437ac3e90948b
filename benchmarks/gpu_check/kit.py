"""The kit, unpacked: every wheel of ``.gpu-kit/`` (``make gpu-kit``) extracted into a temporary
folder that goes first on ``PYTHONPATH``. A wheel is a zip whose root is importable as it stands,
so this needs neither pip, nor the network, nor write access to the image's site-packages. Only
the standard library: it runs before anything else is known to import."""

from __future__ import annotations

import argparse
import platform
import sys
import zipfile
from pathlib import Path

#: what ``make gpu-kit`` downloads for (``make_kit.py``): the stock image's Python
KIT_PYTHON = (3, 12)


def kit_fits() -> bool:
    """Whether this interpreter can import the kit's compiled wheels (cp312, manylinux x86_64)."""
    return (
        sys.implementation.name == "cpython"
        and sys.version_info[:2] == KIT_PYTHON
        and platform.system() == "Linux"
        and platform.machine() == "x86_64"
    )


def unpack(kit: Path, target: Path) -> list[str]:
    """Extract each ``*.whl`` of ``kit`` into ``target``; returns the wheels' names. A file that is
    not a readable wheel stops it with one line naming the file."""
    wheels = sorted(kit.glob("*.whl"))
    target.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        try:
            with zipfile.ZipFile(wheel) as archive:
                bad = archive.testzip()
                if bad is not None:
                    raise zipfile.BadZipFile(f"member {bad} is corrupt")
                archive.extractall(target)
        except (zipfile.BadZipFile, OSError) as exc:
            raise SystemExit(
                f"gpu check: {wheel} is not a readable wheel ({exc}); run `make gpu-kit` again and copy .gpu-kit/ over"
            ) from exc
    return [w.name for w in wheels]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kit", type=Path)
    parser.add_argument("target", type=Path)
    args = parser.parse_args()
    if not args.kit.is_dir():
        print(f"no kit at {args.kit}: the image's own packages only (make gpu-kit makes one)")
        return
    if not kit_fits():
        print(
            f"the kit is for CPython {KIT_PYTHON[0]}.{KIT_PYTHON[1]} on Linux x86_64, this is {platform.python_implementation()} "
            f"{platform.python_version()} on {platform.system()} {platform.machine()}: not unpacked, this environment's packages only"
        )
        return
    names = unpack(args.kit, args.target)
    print(f"{len(names)} wheels from {args.kit} unpacked into {args.target}: {', '.join(names) or 'none'}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
