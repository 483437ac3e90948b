"""``mjp data check ROOT``: what an ImageNet-style folder holds, before a run trips over it.

Every image file is opened by a pool of processes: PIL reads the header, ``verify()`` walks the
file's structure, and the pixels are decoded at the smallest scale the format offers (a JPEG at
1/8 in each side, ``Image.draft``: the whole compressed stream is read, so a file cut short is
found, at a fraction of a full decode's cost; other formats decode whole). A truncated JPEG
passed ``verify()`` alone and failed the training that read it. Reported: unreadable and
zero-byte files (with their paths), images that are not RGB (converted at load: grayscale is
fine, CMYK and palettes may not be), and the balance of the classes. What training refuses in the
folder's layout (``image_folder.check_classes``: a class folder without images, fewer than 2
classes, train and val with different classes) is refused here too, before any image is opened.
"""

from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from trainables.data.folder.image_folder import IMAGE_EXTENSIONS, absent_root, check_classes
from trainables.errors import DataError


@dataclass
class FileVerdict:
    path: str
    problem: str | None  # None: readable
    mode: str | None


@dataclass
class CheckReport:
    root: str
    images: dict[str, Counter] = field(default_factory=dict)  # split -> class -> readable images
    bad: list[FileVerdict] = field(default_factory=list)
    modes: Counter = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.bad


def _verdict(path: str) -> FileVerdict:
    from PIL import Image

    try:
        if os.path.getsize(path) == 0:
            return FileVerdict(path, "zero bytes", None)
        with Image.open(path) as img:
            mode = img.mode
            img.verify()
        with Image.open(path) as img:  # verify() leaves the image unusable: open it again to decode
            img.draft(None, (max(1, img.width // 8), max(1, img.height // 8)))
            img.load()
        return FileVerdict(path, None, mode)
    except Exception as err:  # PIL raises many kinds; every one means this file is unusable
        return FileVerdict(path, f"{type(err).__name__}: {str(err)[:120]}", None)


def _verdicts(paths: list[str], workers: int) -> list[FileVerdict]:
    if workers <= 1 or len(paths) < 64:
        return [_verdict(p) for p in paths]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_verdict, paths, chunksize=max(16, len(paths) // (workers * 8))))


def _splits(root: Path) -> dict[str, Path]:
    found = {s: root / s for s in ("train", "val") if (root / s).is_dir()}
    return found or {"(root)": root}


def check_folder(root: str | Path, workers: int | None = None) -> CheckReport:
    """Open every image below ``root`` (``root/{train,val}/<class>/*`` or ``root/<class>/*``)."""
    root = Path(root)
    why = absent_root(root)
    if why:
        raise DataError(
            f"data root {str(root)!r} {why}; expected an image folder: ROOT/{{train,val}}/<class>/*.jpg (or ROOT/<class>/*.jpg)"
        )
    report = CheckReport(str(root))
    listed: dict[str, tuple[list[Path], list[str], dict[str, str]]] = {}
    for split, directory in _splits(root).items():
        classes = sorted(p for p in directory.iterdir() if p.is_dir())
        if not classes:
            raise DataError(f"{directory} has no class folders (expected {directory}/<class>/*.jpg)")
        paths, owner = [], {}
        for folder in classes:
            for entry in os.scandir(folder):
                if entry.is_file() and entry.name.lower().endswith(IMAGE_EXTENSIONS):
                    paths.append(entry.path)
                    owner[entry.path] = folder.name
        listed[split] = (classes, paths, owner)
    # what training refuses, refused here too, before any image is opened
    files = {split: Counter(owner.values()) for split, (_, _, owner) in listed.items()}
    check_classes(root, {split: {c.name: files[split][c.name] for c in classes} for split, (classes, _, _) in listed.items()})
    for split, (classes, paths, owner) in listed.items():
        counts: Counter = Counter({c.name: 0 for c in classes})
        for v in _verdicts(paths, workers or os.cpu_count() or 1):
            if v.problem is None:
                counts[owner[v.path]] += 1
                report.modes[v.mode] += 1
            else:
                report.bad.append(v)
        report.images[split] = counts
    return report


def shown_path(path: str) -> str:
    """``path`` as one line of the report: a name with a newline or another control character is
    shown quoted, escaped (a file named to look like a report line cannot forge one)."""
    return repr(path) if any(ord(c) < 32 or ord(c) == 127 for c in path) else path


def describe(report: CheckReport) -> str:
    """The report as a person reads it."""
    lines = [f"{report.root}:"]
    for split, counts in report.images.items():
        sizes = list(counts.values())
        total = sum(sizes)
        small = [c for c, n in counts.items() if n == min(sizes)][:3]
        lines.append(
            f"  {split}: {total} readable images in {len(counts)} classes; per class {min(sizes)}..{max(sizes)} (fewest: "
            f"{', '.join(small)})"
        )
        empty = [c for c, n in counts.items() if n == 0]
        if empty:
            lines.append(f"    classes with no readable image: {', '.join(empty[:10])}")
    other = {m: n for m, n in report.modes.items() if m != "RGB"}
    if other:
        lines.append("  not RGB (converted to RGB when loaded): " + ", ".join(f"{n} {m}" for m, n in sorted(other.items())))
    if report.bad:
        lines.append(f"  {len(report.bad)} unusable file(s):")
        lines += [f"    {shown_path(v.path)}: {v.problem}" for v in report.bad[:50]]
        if len(report.bad) > 50:
            lines.append(f"    ... and {len(report.bad) - 50} more")
        lines.append("  remove them, or train with data.on_bad_image=skip (skipped images are counted and listed in the run)")
    else:
        lines.append("  every image opens")
    return "\n".join(lines)
