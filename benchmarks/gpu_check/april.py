"""Step: APRIL's analytic attack on the device (``mjp.privacy``): per image, the client's gradients
and the closed-form solve (float64 least squares where the model lives). That the solve is exact
on the device is the ``gpu`` tests' to say (``test_privacy_attack_is_exact_on_the_device``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.gpu_check.context import best_seconds, device_of, sizes, step_args, write_result


def best_ms(fn: Callable[[], Any], device: Any, repeat: int = 3) -> float:
    return 1e3 * best_seconds(fn, device, repeat)


def main() -> None:
    args = step_args(__doc__)
    s = sizes(args.mode)
    device = device_of(s)
    import torch

    from mjp import MJPConfig, create_model
    from mjp.privacy import april_reconstruct, sample_gradients

    models = {}
    for label, (name, kw) in s.april_models.items():
        torch.manual_seed(0)
        model = create_model(name, mjp=MJPConfig.variant("G"), april_block=True, **kw).to(device).eval()
        size = kw.get("img_size", 224)
        x, y = torch.rand(1, 3, size, size, device=device), torch.tensor([1], device=device)
        grads = sample_gradients(model, x, y)
        models[label] = {
            "grads_ms": best_ms(lambda m=model, x=x, y=y: sample_gradients(m, x, y), device),
            "solve_ms": best_ms(lambda m=model, g=grads: april_reconstruct(m, g), device),
        }
    write_result(args.out, {"models": models}, s)


if __name__ == "__main__":
    from trainables.process_end import run_and_exit

    run_and_exit(main)  # no finalization (1.5 s of CPU after torch and timm): the next step starts sooner
