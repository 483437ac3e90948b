"""``mjp data check`` and ``mjp data prepare``."""

from __future__ import annotations

import argparse
import os


def cmd_data_check(args: argparse.Namespace) -> int:
    from trainables.data.folder.check import check_folder, describe

    if args.manifest and os.path.isdir(args.root):
        from trainables.data.folder.manifest import check_splits

        check_splits(args.root)  # before reading every image
    report = check_folder(args.root, args.workers)
    print(describe(report))
    if args.manifest:
        if not report.ok:
            print("no manifest written: fix or remove the files above first")
        else:
            from trainables.data.folder.manifest import write_manifest

            print(f"manifest: {write_manifest(args.root)} (copy it to a node that runs sweeps but holds no images)")
    return 0 if report.ok else 1


def cmd_data_prepare(args: argparse.Namespace) -> int:
    from trainables.data.folder.prepare import prepare_shards

    summary = prepare_shards(args.root, args.out, images_per_shard=args.images_per_shard, workers=args.workers)
    print(summary)
    return 0
