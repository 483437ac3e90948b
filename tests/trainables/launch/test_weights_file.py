"""Weights files are checked before any work: weights pass, anything that would unpickle code is refused."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from trainables.errors import ConfigError
from trainables.launch.weights_file import check_weights_file


def test_a_state_dict_and_a_safetensors_file_pass(tmp_path):
    state = {"w": torch.ones(2, 3), "b": torch.zeros(3)}
    torch.save(state, tmp_path / "w.pth")
    torch.save({"model": state, "epoch": 3}, tmp_path / "nested.pth")  # timm reads the 'model' entry
    save_file(state, str(tmp_path / "w.safetensors"))
    for name in ("w.pth", "nested.pth", "w.safetensors"):
        check_weights_file("model.pretrained_file", tmp_path / name)


def test_a_pickled_module_is_refused_without_running_it(tmp_path):
    torch.save(torch.nn.Linear(2, 3), tmp_path / "module.pt")
    with pytest.raises(ConfigError) as err:
        check_weights_file("model.pretrained_file", tmp_path / "module.pt")
    text = str(err.value)
    assert "module.pt" in text and "torch.nn.modules.linear.Linear" in text and "allowed: a .safetensors file" in text
    assert "weights_only=False" not in text and "\n" not in text


def test_a_list_of_tensors_is_not_a_state_dict(tmp_path):
    torch.save([torch.ones(1)], tmp_path / "list.pt")
    with pytest.raises(ConfigError, match="holds a list, not a state dict"):
        check_weights_file("--pretrained-file", tmp_path / "list.pt")
