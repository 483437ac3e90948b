"""The CLI fails on bad input with one clear line, before Ray starts, and exit status 2."""

import pytest
import ray

from sweep.cli import main

CONFIG = "trainables/configs/digits_vit_tiny.yaml"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", CONFIG, "--set", "optim.lrr=1"], "optim.lrr: Extra inputs are not permitted"),
        (["train", CONFIG, "--set", "scaling.num_workers=0"], "scaling.num_workers: Input should be greater than or equal to 1 (got 0)"),
        (["train", CONFIG, "--set", "data.name=fashion_mnist", "--set", "data.root=/nonexistent"], "not found in data.root='/nonexistent'"),
        (["train", CONFIG, "--set", "data.name=imagefolder", "--set", "data.root=/nonexistent"], "missing train/"),
        (["train", CONFIG, "--set", "mjp.mask_ratio=2"], "mjp.mask_ratio: Input should be less than or equal to 1 (got 2)"),
        (["train", "no/such/config.yaml"], "config file 'no/such/config.yaml' does not exist"),
        (["train", CONFIG, "--set", "noequals"], "expected key=value"),
        (["train", CONFIG, "--set", "mjp.mask_ratio=0.07"], "mjp.mask_ratio=0.07 selects 1 of the 16 patches"),
        (["train", CONFIG, "--set", "model.name=no_such_net"], "timm could not build model 'no_such_net'"),
        (["train", CONFIG, "--set", "model.name=resnet18"], "ResNet.__init__() got an unexpected keyword argument 'patch_size'"),
        (["train", CONFIG, "--set", "model.name=resnet18", "--set", "model.kwargs={}"], "no absolute position embedding"),
    ],
)
def test_bad_input_fails_before_ray_starts(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not ray.is_initialized()


def test_bad_study_fails_before_ray_starts(tmp_path, capsys):
    study = tmp_path / "s.yaml"
    study.write_text("name: s\nbase: trainables/configs/digits_vit_tiny.yaml\nobjective: {metric: val/top1}\n"
                     "space:\n  mjp.mask_ratio: {type: uniform, low: 0.5, high: 0.1}\n")
    assert main(["sweep", "run", str(study)]) == 2
    err = capsys.readouterr().err
    assert "space.mjp.mask_ratio.uniform: Value error, low=0.5 > high=0.1" in err and "Traceback" not in err
    assert not ray.is_initialized()
    assert main(["sweep", "run", "no_such_study"]) == 2
    assert "shipped: backbones" in capsys.readouterr().err


def test_resume_of_a_non_sweep_directory_is_clear(tmp_path, capsys):
    assert main(["sweep", "resume", str(tmp_path)]) == 2
    assert "is not a sweep directory" in capsys.readouterr().err


def test_a_jigsaw_patch_that_does_not_divide_the_image_fails_before_launch(capsys):
    argv = ["train", CONFIG, "--set", "model.name=resnet18", "--set", "model.kwargs={}", "--set", "mjp.variant=A"]
    assert main(argv) == 2
    assert "8x8 images do not split into 16x16 jigsaw patches; set mjp.patch_size" in capsys.readouterr().err
