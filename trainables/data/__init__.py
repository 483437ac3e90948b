"""Where the images come from: the datasets, what they hold without loading them, and the one module
(loaders.py) that picks the torch, Ray Data or device-decode input path."""
