"""data.decode: gpu: encoded bytes from the loader, decoded, cropped and augmented as whole batches on the
training device, prefetched on a side stream."""
