"""``mjp attack`` on a model built without APRIL's block (as every demo run is): it picks the
inversion attack and says why; asking for APRIL is refused in one line."""

import torch

from sweep.cli import main

CONFIG = "trainables/configs/digits_vit_tiny.yaml"


def checkpoint(tmp_path):
    from trainables.config.build import load_config
    from trainables.data.info import data_info
    from trainables.train.engine import build_model

    cfg = load_config(CONFIG, None)
    path = tmp_path / "model.pt"
    torch.save(build_model(cfg, data_info(cfg).shape).state_dict(), path)
    return str(path)


def test_a_model_without_the_april_block_gets_the_inversion_attack_and_the_reason(tmp_path, capsys):
    weights = checkpoint(tmp_path)
    assert main(["attack", "--checkpoint", weights, "--config", CONFIG, "--images", "1", "--setting", "a", "--steps", "2"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("attack: inversion (1 image x 1 setting x 2 steps): ") and "april_block=True" in first
    assert "| a |" in out

    assert main(["attack", "--checkpoint", weights, "--config", CONFIG, "--attack", "april"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "april_block=True" in err and "--attack inversion" in err
