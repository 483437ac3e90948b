from pathlib import Path

import pytest

from trainables.config import ConfigError, TrainConfig, build_config, flat_params, flatten, load_config, parse_override, unflatten

CONFIGS = Path(__file__).resolve().parents[2] / "trainables" / "configs"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_are_valid(path):
    cfg = load_config(path)
    assert cfg.variant == "jp_unk_dal_mlp"


def test_unknown_key_is_named():
    with pytest.raises(ConfigError, match=r"optim\.lrr: Extra inputs are not permitted"):
        build_config({"optim": {"lrr": 1}})


def test_bad_values_name_key_value_and_allowed():
    with pytest.raises(ConfigError) as err:
        build_config({}, {"scaling.num_workers": 0, "data.name": "mnist", "mjp.dal": "svm"})
    text = str(err.value)
    assert "scaling.num_workers: Input should be greater than or equal to 1 (got 0)" in text
    assert "data.name" in text and "'digits'" in text and "(got 'mnist')" in text
    assert "mjp.dal" in text and "'mlp'" in text


def test_variant_expands_to_a_table4_row_with_overrides():
    cfg = build_config({"mjp": {"variant": "H", "mask_ratio": 0.1}})
    assert cfg.mjp.dal == "pca" and cfg.mjp.pos_embed == "unk" and cfg.mjp.mask_ratio == 0.1
    assert cfg.variant == "jp_unk_dal_pca"
    with pytest.raises(ConfigError, match="mjp.variant='Z' is not a Table 4 row"):
        build_config({"mjp": {"variant": "Z"}})


def test_overrides_parse_as_yaml():
    assert parse_override("optim.base_lr=1e-3") == ("optim.base_lr", 1e-3)
    assert parse_override("eval.shuffle_ratios=[0, 0.5]") == ("eval.shuffle_ratios", [0, 0.5])
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_override("optim.epochs")


def test_flat_params_round_trip():
    cfg = build_config({"model": {"kwargs": {"patch_size": 2}}, "mjp": {"variant": "G"}})
    flat = flat_params(cfg)
    assert flat["model.kwargs.patch_size"] == 2 and flat["mjp.pos_embed"] == "unk" and "optim.base_lr" in flat
    assert TrainConfig.model_validate(unflatten(flat)) == cfg
    assert flatten({"a": {"b": 1, "c": {}}}) == {"a.b": 1, "a.c": {}}


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(bad)


def test_presets_expand_labels_into_keys():
    from trainables.config import expand_presets

    presets = {"backbone": {"r": {"model.name": "resnet18", "mjp.variant": "E"}}}
    assert expand_presets({"backbone": "r", "optim.epochs": 3}, presets) == {"model.name": "resnet18", "mjp.variant": "E", "optim.epochs": 3}
