"""``mjp attack`` on a model built without APRIL's block (as every demo run is): it picks the
inversion attack and says why; asking for APRIL is refused in one line; every Table 4 row gets
its table in settings a, b and c."""

from pathlib import Path

import pytest
import torch
import yaml

from mjp.config import TABLE4_ROWS
from sweep.cli import main

CONFIG = "trainables/configs/digits_vit_tiny.yaml"


def checkpoint(tmp_path, config=CONFIG):
    from trainables.config.build import load_config
    from trainables.data.info import data_info
    from trainables.train.engine import build_model

    cfg = load_config(config, None)
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


@pytest.mark.parametrize("row", [row.letter for row in TABLE4_ROWS])
def test_every_table4_row_gets_its_table_for_settings_a_b_c(tmp_path, capsys, row):
    # a shuffled client's gradients hold E_unk (G-J) and E_idx (F), which the attacker's unshuffled
    # forward never reaches: the attack once crashed on them in settings b and c
    tree = yaml.safe_load(Path(CONFIG).read_text())
    tree["mjp"]["variant"] = row
    config = tmp_path / f"{row}.yaml"
    config.write_text(yaml.safe_dump(tree))
    weights = checkpoint(tmp_path, str(config))
    assert main(["attack", "--checkpoint", weights, "--config", str(config), "--images", "1", "--steps", "2"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [line.split(" | ")[0] for line in table[2:]] == ["| a", "| b", "| c"]
    assert all("nan" not in line and " - | - | - |" not in line for line in table[2:])


def test_the_attack_uses_the_runs_eval_seed_unless_given_one(tmp_path, monkeypatch):
    """It once used seed 0 whatever the run's eval.seed, so it did not give the run's logged privacy/* scores."""
    import trainables.evaluation.privacy as privacy
    from trainables.config.build import load_config
    from trainables.evaluation.result import eval_seed

    tree = yaml.safe_load(Path(CONFIG).read_text())
    tree.setdefault("runtime", {})["seed"] = 5
    config = tmp_path / "seed5.yaml"
    config.write_text(yaml.safe_dump(tree))
    weights = checkpoint(tmp_path, str(config))
    seeds = []

    def seen(*args, seed, **kwargs):
        seeds.append(seed)
        return {}, {}, []

    monkeypatch.setattr(privacy, "run_privacy_eval", seen)
    argv = ["attack", "--checkpoint", weights, "--config", str(config), "--images", "1", "--setting", "a", "--steps", "2"]
    assert main(argv) == 0 and main([*argv, "--seed", "3"]) == 0
    assert seeds == [eval_seed(load_config(str(config), None)), 3] and seeds[0] != 0
