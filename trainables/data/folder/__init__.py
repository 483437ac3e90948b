"""An ImageNet-style folder on disk: listing and decoding it, checking every file, its manifest for nodes
that do not hold the images, and packing it into Parquet shards."""
