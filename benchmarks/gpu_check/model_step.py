"""Step: MJP against the same timm model without MJP, the bare model step (``bench_mjp``'s
``bench_model``: both stepped alternately in one process, medians). ``--compile`` compiles both."""

from __future__ import annotations

from benchmarks.gpu_check.context import device_of, sizes, step_args, write_result


def main() -> None:
    args = step_args(__doc__, {"--compile": {"action": "store_true", "help": "torch.compile both models"}})
    s = sizes(args.mode)
    device = device_of(s)
    from benchmarks.bench_mjp import bench_model

    r = bench_model(
        s.model, device, s.batch, s.steps, s.amp, args.compile, s.compile_backend if args.compile else "inductor", **s.model_kwargs
    )
    write_result(
        args.out,
        {
            "model": s.model,
            "batch": s.batch,
            "amp": "bf16" if s.amp else "fp32",
            "compiled": args.compile,
            "backend": s.compile_backend if args.compile else None,
            "timm_ms": r["base"],
            "mjp_ms": r["mjp"],
            "ratio": r["ratio"],
            "mask_ms": r["mask"],
            "timm_img_s": 1e3 * s.batch / r["base"],
            "mjp_img_s": 1e3 * s.batch / r["mjp"],
        },
        s,
    )


if __name__ == "__main__":
    from trainables.process_end import run_and_exit

    run_and_exit(main)  # no finalization (1.5 s of CPU after torch and timm): the next step starts sooner
