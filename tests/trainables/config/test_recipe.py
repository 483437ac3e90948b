"""A trial's config is made by one function, once per distinct params in a process, and names the
store the trial writes to."""

import pickle

import pytest

from trainables.config import recipe as recipe_module
from trainables.config.recipe import TrialRecipe
from trainables.errors import ConfigError

BASE = {"model": {"name": "vit_tiny_patch16_224"}, "data": {"name": "digits"}, "optim": {"epochs": 2}}


def test_each_trial_config_is_built_once_and_is_the_same_object_after(monkeypatch):
    built = []
    real = recipe_module.build_config
    monkeypatch.setattr(recipe_module, "build_config", lambda *a, **k: built.append(a) or real(*a, **k))
    recipe = TrialRecipe(BASE, {"optim.epochs": 3}, {"speed": {"fast": {"optim.base_lr": 0.05}}}, source="study 'x'")
    a = recipe.config({"mjp.variant": "J", "speed": "fast"})
    assert recipe.config({"speed": "fast", "mjp.variant": "J"}) is a and len(built) == 1
    assert (a.variant, a.optim.epochs, a.optim.base_lr) == ("jp_unk_dal_mlp", 3, 0.05)
    assert recipe.config({}).optim.base_lr != 0.05 and len(built) == 2
    shipped = pickle.loads(pickle.dumps(recipe))  # what Tune sends a trial: the recipe, not the driver's configs
    assert shipped == recipe and shipped._built == {}
    assert shipped.config({"mjp.variant": "J", "speed": "fast"}) == a


def test_the_store_a_trial_writes_to_is_in_its_config_and_a_bad_param_names_the_run():
    recipe = TrialRecipe(BASE, source="study 'x'").writing_to("sqlite:////runs/mlflow.db")
    assert recipe.config({}).tracking.uri == "sqlite:////runs/mlflow.db"
    with pytest.raises(ConfigError, match=r"invalid study 'x' with \{'optim.epochs': -1\}"):
        recipe.config({"optim.epochs": -1})
