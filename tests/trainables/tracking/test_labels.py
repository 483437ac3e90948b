"""One name per run: the live view, the end of a sweep, `sweep status` and the MLflow UI call a
trial alike (the console said "G jp_unk seed 0" where `sweep status` said "G-jp_unk-s0")."""

from trainables.config.build import load_config
from trainables.tracking.labels import run_label


def test_the_console_names_a_trial_as_its_mlflow_run():
    cfg = load_config("trainables/configs/digits_vit_tiny.yaml", ["mjp.variant=G"])
    label = run_label(cfg, {"mjp.variant": "G", "runtime.seed": 0})
    assert label.run_name == "G-jp_unk-s0" and label.display == label.run_name
    single = run_label(cfg)
    assert single.display == single.run_name == "vit_tiny_patch16_224-G-jp_unk-s0"
