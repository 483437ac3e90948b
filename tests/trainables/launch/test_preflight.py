"""The pre-flight on its own: what it learns from a good config, and each refusal one line that
names the key, the value and what is allowed, before anything trains."""

import pytest

from trainables.config.build import load_config
from trainables.errors import ConfigError
from trainables.launch.preflight import check_disk_space, preflight

CONFIG = "trainables/configs/digits_vit_tiny.yaml"


def test_a_good_config_reports_its_data_and_its_model_size():
    found = preflight(load_config(CONFIG))
    assert found.info.shape.img_size == 8 and found.info.shape.num_classes == 10 and found.info.train_size > 1000
    assert found.parameters > 10_000 and found.checkpoint_bytes == 12 * found.parameters


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.kwargs.patch_size=3"], "do not tile the 8x8 images"),
        (["data.batch_size=100000"], "images per step, but the training set has"),
        (["data.loader=ray_data", "data.repeated_aug=3"], "data.repeated_aug=3 needs the torch loader's sampler"),
        (["model.name=not_a_timm_model"], "not_a_timm_model"),
        (["mjp.mask_ratio=0.001"], "mjp.mask_ratio"),
    ],
)
def test_each_refusal_is_one_line_naming_what_to_change(overrides, message):
    with pytest.raises(ConfigError, match=message) as err:
        preflight(load_config(CONFIG, overrides))
    assert "\n" not in str(err.value)


def test_a_storage_folder_without_room_for_three_checkpoints_is_refused(tmp_path):
    check_disk_space(str(tmp_path), 1, "a tiny model")  # room for it: passes
    with pytest.raises(ConfigError, match=r"MiB free in .* but checkpoints of a huge model need about"):
        check_disk_space(str(tmp_path / "not" / "made" / "yet"), 2**60, "a huge model")
    check_disk_space("s3://bucket/sweeps", 2**60, "anything")  # a remote store is not measured here
