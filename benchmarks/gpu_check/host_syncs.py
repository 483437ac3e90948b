"""Step: what each measured step asks of the host, eager. Per call: the aten ops dispatched, those
that copy a value to the host (and so wait for the device on CUDA), and on CUDA the kernels and
copies the profiler sees and the synchronisations ``torch.cuda.set_sync_debug_mode("warn")``
reports. The engine's step is counted as the difference of a 4-step and a 2-step epoch, halved,
so the epoch's own read-back of its running loss does not count against the step. On the CPU
(``--cpu``) every tensor is a host tensor: the syncing ops there include reads that stay on the
host on CUDA (AdamW's step counts, one per parameter tensor), so only the CUDA counts say what
waits for the device."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from benchmarks.gpu_check.context import Sizes, device_of, sizes, step_args, synchronize, write_result

#: aten ops that copy a device value to the host (the list tests/gpu/test_decode_path.py holds)
SYNCING_OPS = (
    "aten._local_scalar_dense",
    "aten.nonzero",
    "aten.masked_select",
    "aten.is_nonzero",
    "aten.equal",
    "aten._unique",
    "aten.unique",
    "aten.item",
)


def count(fn: Callable[[], Any], device: Any) -> dict[str, int | None]:
    """Counts of one call of ``fn`` (after a warm-up call)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops, self.syncing = 0, 0

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            self.ops += 1
            name = str(func)
            if name.split(".default")[0].split(".Tensor")[0] in SYNCING_OPS or name in SYNCING_OPS:
                # on CUDA only a read of a device tensor waits (AdamW's step counts live on the host)
                self.syncing += device.type == "cpu" or any(isinstance(a, torch.Tensor) and a.device.type == device.type for a in args)
            return func(*args, **(kwargs or {}))

    fn()
    synchronize(device)
    with Ops() as ops:
        fn()
    out: dict[str, int | None] = {"aten_ops": ops.ops, "syncing_ops": ops.syncing, "cuda_kernels": None, "cuda_syncs": None}
    if device.type == "cuda":
        from torch.profiler import ProfilerActivity, profile

        synchronize(device)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            synchronize(device)
        out["cuda_kernels"] = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                fn()
            finally:
                torch.cuda.set_sync_debug_mode(0)
        out["cuda_syncs"] = sum("synchroniz" in str(w.message) for w in caught)
    return out


def model_steps(s: Sizes, device: Any) -> dict[str, Callable[[], Any]]:
    import timm
    import torch

    from benchmarks.bench_mjp import make_step
    from mjp import MJPConfig, create_model
    from mjp.algorithm import MJPAlgorithm

    shape = {"img_size": s.img_size, "num_classes": s.num_classes}
    torch.manual_seed(0)
    base = timm.create_model(s.model, **s.model_kwargs).to(device).train()
    ours = create_model(s.model, mjp=MJPConfig(mask_ratio=0.27, dal="mlp"), **s.model_kwargs).to(device).train()
    algorithm = MJPAlgorithm.for_model(ours, seed=0, device=device)
    return {
        "timm model step (bench_mjp)": make_step(base, device, s.batch, s.amp, False, **shape),
        "MJP model step (bench_mjp)": make_step(ours, device, s.batch, s.amp, False, algorithm.shuffle, **shape),
    }


def engine_epochs(s: Sizes, device: Any) -> dict[str, int | None]:
    from benchmarks.gpu_check.engine_step import FixedBatches, engine_state, fixed_batch
    from trainables.train.engine import train_one_epoch

    cfg, state = engine_state(s, "J", False, device)
    x, y = fixed_batch(s, device)
    two, four = (count(lambda n=n: train_one_epoch(cfg, state, FixedBatches(x, y, n), device), device) for n in (2, 4))
    return {k: None if two[k] is None else (four[k] - two[k]) // 2 for k in two}


def input_stages(s: Sizes, device: Any) -> dict[str, Callable[[], Any]]:
    import io

    import numpy as np
    import torch
    from PIL import Image

    from trainables.data.gpu.augment import DeviceRecipe, augment_batch
    from trainables.data.gpu.decode import decode_on_device

    rng = np.random.default_rng(0)
    h, w = s.jpeg_hw
    blobs = []
    for _ in range(s.batch):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(buf, "JPEG", quality=90)
        blobs.append(torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8))
    if device.type == "cuda":
        blobs = [b.pin_memory() for b in blobs]
    decoded = decode_on_device(blobs, device)
    recipe, seeds = DeviceRecipe(s.img_size, "deit"), list(range(s.batch))
    return {
        "decode, one batch": lambda: decode_on_device(blobs, device),
        "augment, one batch": lambda: augment_batch(decoded, seeds, recipe),
    }


def april_solve(s: Sizes, device: Any) -> dict[str, Callable[[], Any]]:
    import torch

    from mjp import MJPConfig, create_model
    from mjp.privacy import april_reconstruct, sample_gradients

    label, (name, kw) = next(iter(s.april_models.items()))
    torch.manual_seed(0)
    model = create_model(name, mjp=MJPConfig.variant("G"), april_block=True, **kw).to(device).eval()
    size = kw.get("img_size", 224)
    grads = sample_gradients(model, torch.rand(1, 3, size, size, device=device), torch.tensor([1], device=device))
    return {f"APRIL solve, {label}": lambda: april_reconstruct(model, grads)}


def main() -> None:
    args = step_args(__doc__)
    s = sizes(args.mode)
    device = device_of(s)
    counts: dict[str, Any] = {}
    groups: dict[str, Callable[[Sizes, Any], Any]] = {
        "model steps": model_steps,
        "engine step": engine_epochs,
        "input stages": input_stages,
        "APRIL solve": april_solve,
    }
    for label, group in groups.items():
        try:  # one part that cannot run (a library missing) leaves the others counted
            made = group(s, device)
            if group is engine_epochs:
                counts["engine training step, row J (per step)"] = made
            else:
                counts.update({name: count(fn, device) for name, fn in made.items()})
        except Exception as exc:  # noqa: BLE001 - reported in the result, the step goes on
            counts[label] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]}
    write_result(args.out, {"counts": counts}, s)


if __name__ == "__main__":
    from trainables.process_end import run_and_exit

    run_and_exit(main)  # no finalization (1.5 s of CPU after torch and timm): the next step starts sooner
