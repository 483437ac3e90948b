"""Bad models and the weights given to them: timm names, their arguments, pretrained files and checkpoints."""

from __future__ import annotations

from tests.bad_inputs import TRAIN
from tests.bad_inputs_made import CONFIG, evil_checkpoint, imagefolder, weights, whole_model, write

RESNET = ["--set", "model.name=resnet18", "--set", "model.kwargs={}"]


#: models, their arguments and pretrained files
MODELS = [
    (
        "tens of thousands of tokens in a plan",
        lambda t: ["sweep", "plan", "variants", "--set", "model.kwargs.patch_size=2"],
        "data.img_size=224 with model.kwargs.patch_size=2 makes 12,544 tokens per image: one layer's attention for data.batch_size=128 "
        "has 120,846,286,848 scores, 450 GiB where they are materialised",
    ),
    (
        "tens of thousands of tokens",
        lambda t: (
            TRAIN
            + [
                "--set",
                "data.name=imagefolder",
                "--set",
                f"data.root={imagefolder(t)}",
                "--set",
                "data.img_size=512",
                "--set",
                "data.batch_size=2",
            ]
        ),
        "data.img_size=512 with model.kwargs.patch_size=2 makes 65,536 tokens per image: one layer's attention for data.batch_size=2 has "
        "34,359,738,368 scores, 128 GiB where they are materialised (more than an 80 GB GPU",
    ),
    ("unknown model", lambda t: TRAIN + ["--set", "model.name=no_such_net"], "model.name='no_such_net' is not a timm model"),
    ("model typo", lambda t: TRAIN + ["--set", "model.name=deit_smal_patch16_224"], "did you mean deit_small_patch16_224?"),
    (
        "vit kwargs on a resnet",
        lambda t: TRAIN + ["--set", "model.name=resnet18"],
        "model.kwargs {depth, embed_dim, num_heads, patch_size} are not arguments of 'resnet18' (a timm ResNet)",
    ),
    ("pe variant on a resnet", lambda t: TRAIN + RESNET, "has no absolute position embedding, so mjp.pos_embed='unk'"),
    (
        "resnet patch too big",
        lambda t: TRAIN + RESNET + ["--set", "mjp.variant=A"],
        "8x8 images do not split into 16x16 jigsaw patches; set mjp.patch_size",
    ),
    (
        "patch size zero",
        lambda t: TRAIN + ["--set", "model.kwargs.patch_size=0"],
        "model.kwargs.patch_size=0: allowed is a positive integer",
    ),
    (
        "width not divisible by heads",
        lambda t: TRAIN + ["--set", "model.kwargs.embed_dim=30"],
        "model.kwargs.embed_dim=30 is not divisible by model.kwargs.num_heads=4",
    ),
    (
        "patches larger than images",
        lambda t: TRAIN + ["--set", "model.kwargs={embed_dim: 64, depth: 2, num_heads: 4}"],
        "cuts images into 16x16 patches, which do not tile the 8x8 images",
    ),
    (
        "missing pretrained file",
        lambda t: TRAIN + ["--set", "model.pretrained_file=/no/such/weights.pth"],
        "model.pretrained_file='/no/such/weights.pth' does not exist",
    ),
    (
        "pretrained file that runs code",
        lambda t: TRAIN + ["--set", f"model.pretrained_file={evil_checkpoint(t)}"],
        "is a pickle that would call os.makedirs (a whole model saved with torch.save?); it is not loaded, since unpickling it can run "
        "code; allowed: a .safetensors file, or a torch.save'd state dict",
    ),
    (
        "pretrained file a whole model",
        lambda t: TRAIN + ["--set", f"model.pretrained_file={whole_model(t)}"],
        "is a pickle that would call timm.models",
    ),
    (
        "pretrained file not weights",
        lambda t: TRAIN + ["--set", f"model.pretrained_file={write(t / 'w.pth', 'not weights')}"],
        "is not a PyTorch weights file",
    ),
    (
        "pretrained safetensors broken",
        lambda t: TRAIN + ["--set", f"model.pretrained_file={write(t / 'w.safetensors', 'xx')}"],
        "is not a readable safetensors file",
    ),
]

#: checkpoints given to `mjp attack`
CHECKPOINTS = [
    (
        "checkpoint without config",
        lambda t: ["attack", "--checkpoint", write(t / "x.pt", "x")],
        "give the TrainConfig it was trained with as --config",
    ),
    (
        "checkpoint that is not one",
        lambda t: ["attack", "--checkpoint", write(t / "x.pt", "not a checkpoint"), "--config", CONFIG],
        "is not a PyTorch checkpoint",
    ),
    (
        "checkpoint that runs code",
        lambda t: ["attack", "--checkpoint", evil_checkpoint(t), "--config", CONFIG],
        "is not a safe checkpoint: it would call os.makedirs; refusing to load it",
    ),
    (
        "checkpoint of another model",
        lambda t: ["attack", "--checkpoint", str(weights(t)), "--config", CONFIG],
        "does not fit vit_tiny_patch16_224 as configured",
    ),
]
