"""bench_data.py's parts: the image folder it reads (``folder``), the host budget of the augmentation
(``host_budget``) and the loaders it compares (``loaders``)."""
