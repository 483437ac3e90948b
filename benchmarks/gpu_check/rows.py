"""The GPU rows of BENCHMARKS.md, each read from one step's result: its name in the report, the
step, how its number is written, and the goal it is held to on a GPU (issue 57: MJP / timm <=
1.02 eager and compiled; device_augment >= 20,000 img/s, decode + augment >= 10,000, the compiled
row-J step fed from JPEG >= 8,000 img/s waiting <= 5 %)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Row:
    name: str
    step: str
    measure: Callable[[dict[str, Any]], str]
    target: str = ""


def _model(r: dict[str, Any]) -> str:
    mode = f"{r['amp']}, {'compiled (' + r['backend'] + ')' if r['compiled'] else 'eager'}"
    return (
        f"**{r['ratio']:.3f}**: {r['timm_ms']:.1f} / {r['mjp_ms']:.1f} ms, {r['timm_img_s']:,.0f} / {r['mjp_img_s']:,.0f} img/s; "
        f"mask + permutation + gather {r['mask_ms']:.2f} ms ({r['model']}, batch {r['batch']}, {mode})"
    )


def _engine(r: dict[str, Any]) -> str:
    peak = "" if r["A"]["peak_gib"] is None else f"; peak {r['A']['peak_gib']:.2f} / {r['J']['peak_gib']:.2f} GiB"
    return (
        f"**{r['ratio']:.3f}**: {r['A']['step_ms']:.1f} / {r['J']['step_ms']:.1f} ms, "
        f"{r['A']['img_s']:,.0f} / {r['J']['img_s']:,.0f} img/s{peak} (batch {r['sizes']['batch']})"
    )


def _tests(r: dict[str, Any]) -> str:
    text = f"{r['passed']} passed, {len(r['failed'])} failed, {len(r['skipped'])} skipped"
    return text + "".join(f"; failed {f}" for f in r["failed"]) + "".join(f"; skipped {s}" for s in r["skipped"])


def _stage(key: str) -> Callable[[dict[str, Any]], str]:
    def measure(r: dict[str, Any]) -> str:
        st = r["stages"]
        value = st[key]
        if value is None:
            return "not measured (needs CUDA)"
        return (
            f"**{value:,.0f}** img/s ({1e3 / value:.2f} ms per image; "
            f"{st['images']} images of {r['jpeg_hw'][1]}x{r['jpeg_hw'][0]}, {st['decoder']})"
        )

    return measure


def _loader(r: dict[str, Any]) -> str:
    rates = ", ".join(f"{v:,.0f}" for v in r["loader_img_s"])
    return (
        f"**{max(r['loader_img_s']):,.0f}** img/s at best; epochs {rates} "
        f"(the first starts the workers; {r['jpegs']} JPEGs, {r['workers']} workers, batch {r['batch']})"
    )


def _with_step(r: dict[str, Any]) -> str:
    w = r["with_step"]
    epochs = "; ".join(f"{e['img_s']:,.0f} img/s, {100 * e['data_wait_frac']:.0f} % waiting for data" for e in w["epochs"])
    return f"**{max(e['img_s'] for e in w['epochs']):,.0f}** img/s at best ({'compiled' if w['compiled'] else 'eager'} row J; {epochs})"


def _april(r: dict[str, Any]) -> str:
    return "; ".join(f"{label}: gradients {m['grads_ms']:.0f} ms, **solve {m['solve_ms']:.0f} ms**" for label, m in r["models"].items())


def _syncs(r: dict[str, Any]) -> str:
    parts = []
    for name, c in r["counts"].items():
        if "error" in c:
            parts.append(f"{name}: not counted ({c['error']})")
            continue
        cuda = "" if c["cuda_kernels"] is None else f", {c['cuda_kernels']:,} kernels + copies, {c['cuda_syncs']} syncs"
        parts.append(f"{name}: {c['aten_ops']:,} aten ops, {c['syncing_ops']} syncing{cuda}")
    return "; ".join(parts)


#: the GPU rows first (issue 57: the input path, then the MJP and engine steps), as the steps run
ROWS = (
    Row("H2D of the encoded bytes img/s", "input", _stage("h2d_img_s")),
    Row("decode img/s (one batched decode_jpeg)", "input", _stage("decode_img_s")),
    Row("augment img/s (device_augment, DeiT recipe, eager)", "input", _stage("augment_img_s")),
    Row("augment img/s (device_augment, the work after the crop compiled)", "input", _stage("augment_compiled_img_s"), ">= 20,000"),
    Row("decode + augment from JPEG files, img/s (the loader)", "input", _loader, ">= 10,000"),
    Row("img/s with the training step (row J, from JPEG files)", "input", _with_step, ">= 8,000, waiting <= 5 %"),
    Row("MJP / timm step, eager (bench_mjp)", "model_eager", _model, "<= 1.02"),
    Row("MJP / timm step, compiled (bench_mjp)", "model_compiled", _model, "<= 1.02"),
    Row("engine training step, row J / row A, eager", "engine_eager", _engine, "<= 1.02"),
    Row("engine training step, row J / row A, compiled", "engine_compiled", _engine, "<= 1.02; >= 7,000 img/s"),
    Row("host syncs and kernel counts per step", "host_syncs", _syncs, "0 syncs in the step"),
    Row("gpu tests (tests/gpu and the CUDA case of test_decode.py)", "tests", _tests, "all pass"),
    Row("APRIL analytic attack per image", "april", _april),
)
