from pathlib import Path

import pytest

from trainables.config.build import build_config, flat_params, known_keys, load_config
from trainables.config.overrides import expand_presets, flatten, parse_override, parse_overrides, set_dotted, unflatten
from trainables.config.schema import TrainConfig
from trainables.config.seeds import derive_seed
from trainables.errors import ConfigError

CONFIGS = Path(__file__).resolve().parents[3] / "trainables" / "configs"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_are_valid(path):
    cfg = load_config(path)
    assert cfg.variant == "jp_unk_dal_mlp"


def test_unknown_key_is_named_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"optim\.epoch: not a key of this section \(got 3\) \(did you mean optim\.epochs\?\)"):
        build_config({"optim": {"epoch": 3}})


def test_an_unknown_key_near_no_key_of_its_section_gets_the_section_s_keys():
    with pytest.raises(
        ConfigError,
        match=r"runtime\.zzz: not a key of this section \(got 1\) \(runtime has: [a-z_]+(, [a-z_]+)+\)$",
    ):
        build_config({"runtime": {"zzz": 1}})


def test_an_unknown_top_level_key_gets_the_nearest_section_and_the_list():
    with pytest.raises(
        ConfigError,
        match=r"optm: not a key of this section \(did you mean optim\?\); "
        r"the top level has: data, eval, mjp, model, optim, runtime, scaling, tracking$",
    ):
        build_config({"optm": {"epochs": 3}})


def test_bad_values_name_key_value_and_allowed():
    with pytest.raises(ConfigError) as err:
        build_config({}, {"scaling.num_workers": 0, "data.name": "fashion", "mjp.dal": "svm"})
    text = str(err.value)
    assert "scaling.num_workers: must be >= 1 (got 0)" in text
    assert "data.name" in text and "'digits'" in text and "(got 'fashion')" in text and "did you mean fashion_mnist?" in text
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
    assert parse_override("optim={epochs: 1}") == ("optim", {"epochs": 1})
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_override("optim.epochs")
    with pytest.raises(ConfigError, match="is not a dotted key"):
        parse_override("optim..epochs=3")
    with pytest.raises(ConfigError, match="given twice"):
        parse_overrides(["optim.epochs=1", "optim.epochs=2"])


def test_a_mapping_merges_into_its_section_but_replaces_model_kwargs():
    base = {"optim": {"epochs": 30, "base_lr": 0.04, "warmup_epochs": 2}, "model": {"kwargs": {"patch_size": 2, "depth": 4}}}
    merged = set_dotted(base, "optim", {"epochs": 1})
    assert merged["optim"] == {"epochs": 1, "base_lr": 0.04, "warmup_epochs": 2}
    assert set_dotted(base, "model.kwargs", {})["model"]["kwargs"] == {}  # a free-form mapping given whole
    assert set_dotted(base, "model.kwargs.depth", 2)["model"]["kwargs"] == {"patch_size": 2, "depth": 2}
    cfg = build_config(base, {"optim": {"epochs": 1}})
    assert cfg.optim.epochs == 1 and cfg.optim.base_lr == 0.04 and cfg.optim.warmup_epochs == 2


def test_one_seed_derives_every_stream_unless_given():
    a, b = build_config({"runtime": {"seed": 1}}), build_config({"runtime": {"seed": 2}})
    assert a.mjp.seed == derive_seed(1, "jigsaw") and a.eval.seed == derive_seed(1, "eval") and a.data.seed == derive_seed(1, "data")
    assert len({a.mjp.seed, a.eval.seed, a.data.seed, b.mjp.seed, b.eval.seed, b.data.seed}) == 6
    assert build_config({"runtime": {"seed": 1}}) == a  # deterministic
    explicit = build_config({"runtime": {"seed": 1}, "mjp": {"seed": 7}})
    assert explicit.mjp.seed == 7 and explicit.eval.seed == a.eval.seed
    assert TrainConfig.model_validate(a.model_dump()) == a  # a dumped config keeps its streams


def test_flat_params_round_trip():
    cfg = build_config({"model": {"kwargs": {"patch_size": 2}}, "mjp": {"variant": "G"}})
    flat = flat_params(cfg)
    assert flat["model.kwargs.patch_size"] == 2 and flat["mjp.pos_embed"] == "unk" and "optim.base_lr" in flat
    assert TrainConfig.model_validate(unflatten(flat)) == cfg
    assert flatten({"a": {"b": 1, "c": {}}}) == {"a.b": 1, "a.c": {}}
    assert "eval.privacy.images" in known_keys() and "optim.epochs" in known_keys()


def test_missing_files_and_directories_are_named(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="is a directory; give a YAML file"):
        load_config(tmp_path)


@pytest.mark.parametrize(
    "text, message",
    [
        ("- just\n- a list\n", "expected a YAML mapping, got a list"),
        ("", "is empty; it must hold a YAML mapping"),
        ("optim:\n  epochs: 30\n  base_lr: 0.1\n  epochs: 3\n", "duplicate key 'epochs' on lines 2 and 4; keep one"),
        ("optim: {epochs: [1, 2}\n", "is not valid YAML"),
        ("optim: !!python/object/apply:os.system ['touch /tmp/pwned']\n", "is not valid YAML"),  # never runs code
    ],
    ids=["list", "empty", "duplicate key", "malformed", "python tag"],
)
def test_a_bad_yaml_file_is_one_clear_error(tmp_path, text, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(bad)


def test_presets_expand_labels_into_keys():
    presets = {"backbone": {"r": {"model.name": "resnet18", "mjp.variant": "E"}}}
    assert expand_presets({"backbone": "r", "optim.epochs": 3}, presets) == {
        "model.name": "resnet18",
        "mjp.variant": "E",
        "optim.epochs": 3,
    }
