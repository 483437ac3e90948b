"""What only a GPU run would hit, checked on CPU: tensors handed to numpy, the compiled model's
graph (no breaks, no recompile per batch), and the privacy step on a non-CPU device."""

import ast
from pathlib import Path

import torch

from mjp import MJPConfig, create_model
from mjp.algorithm import MJPAlgorithm

ROOT = Path(__file__).resolve().parents[1]
#: ``.numpy()`` calls on tensors that are on the CPU by construction, with why
CPU_BY_CONSTRUCTION = {
    ("trainables/train/state.py", "state['keys'].numpy()"): "read from a checkpoint with map_location='cpu'",
    ("trainables/data/ray_data.py", "transform(picture).numpy()"): "timm's transforms run on the CPU, in a Ray Data task",
}


class FakeCuda(torch.Tensor):
    """A CPU tensor that refuses ``numpy()`` as a CUDA tensor does, until copied with ``cpu()``."""

    def numpy(self, *args, **kwargs):
        raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.")

    def cpu(self, *args, **kwargs):
        return self.as_subclass(torch.Tensor)


def test_every_numpy_call_copies_to_the_host_first():
    bad = []
    for path in [*ROOT.glob("mjp/**/*.py"), *ROOT.glob("trainables/**/*.py"), *ROOT.glob("analysis/**/*.py")]:
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "numpy":
                chain = ast.unparse(node.func.value)
                if ".cpu()" not in chain and (rel, ast.unparse(node).replace('"', "'")) not in CPU_BY_CONSTRUCTION:
                    bad.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, "numpy() on a tensor that may be on a GPU:\n" + "\n".join(bad)


def test_the_privacy_grid_takes_tensors_from_a_device():
    from mjp.privacy import AttackResult
    from trainables.evaluation.privacy import reconstruction_grid

    images = torch.rand(2, 1, 8, 8).as_subclass(FakeCuda)
    result = AttackResult("a", "april", images, images.clone(), {"psnr": 1.0})
    fig = reconstruction_grid({"a": result}, "on a device")
    assert len(fig.axes) == 4


def test_the_compiled_model_has_one_graph_and_no_recompile_per_batch():
    """The engine samples each batch's shuffle outside the model; the compiled forward sees tensors.
    (``backend='eager'``: dynamo's tracing and guards without code generation.)"""
    torch.manual_seed(0)
    model = create_model(
        "vit_tiny_patch16_224",
        mjp=MJPConfig(mask_ratio=0.27, dal="pca"),
        img_size=32,
        patch_size=4,
        embed_dim=32,
        depth=2,
        num_heads=2,
        num_classes=10,
    ).train()
    x = torch.randn(8, 3, 32, 32)
    algorithm = MJPAlgorithm.for_model(model, seed=0)
    explained = torch._dynamo.explain(model)(x, shuffle=algorithm.shuffle(x, 0))
    assert explained.graph_count == 1 and explained.graph_break_count == 0, [b.reason for b in explained.break_reasons]

    compiles = []

    def counting_backend(gm, inputs):
        compiles.append(gm)
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(model, backend=counting_backend)
    for _ in range(4):  # a fresh shuffle per batch: new masks, same shapes
        out = compiled(x, shuffle=algorithm.shuffle(x, 0))
        (out.logits.sum() + out.loss_dal).backward()
    assert len(compiles) == 1
