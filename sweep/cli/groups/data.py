"""``mjp data``: check or prepare image data."""

from __future__ import annotations

import argparse

from sweep.cli.options import group


def add(sub: argparse._SubParsersAction) -> None:
    data = group(sub, "data", "check or prepare image data")
    check = data.add_parser("check", help="scan an ImageNet-style folder: unreadable, zero-byte and non-RGB images, class balance")
    check.add_argument("root", help="an ImageNet-style folder: ROOT/{train,val}/<class>/*")
    check.add_argument("--workers", type=int, default=None, help="processes for the header scan (default: all cores)")
    check.add_argument(
        "--manifest",
        action="store_true",
        help="when every image reads, write ROOT/mjp_folder.json (classes, counts) for a sweep driver on a node without the images",
    )
    check.set_defaults(handler="sweep.commands.data:cmd_data_check")
    prepare = data.add_parser("prepare", help="pack an ImageNet-style folder into Parquet shards for the Ray Data loader")
    prepare.add_argument("root", help="an ImageNet-style folder: ROOT/{train,val}/<class>/*")
    prepare.add_argument("out", help="the output folder for the Parquet shards (data.root for data.loader: ray_data)")
    prepare.add_argument("--images-per-shard", type=int, default=1000, help="images per Parquet file (default 1000)")
    prepare.add_argument("--workers", type=int, default=None, help="processes that read the images (default: all cores)")
    prepare.set_defaults(handler="sweep.commands.data:cmd_data_prepare")
