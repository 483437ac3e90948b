"""``mjp config show`` prints what a trial trains with: for a study, ``--set`` on a space key picks
the trial, with its presets (rows C and F of ``variants`` on the reference's schedule)."""

import pytest
import yaml

from sweep.cli import main
from sweep.study.load import load_study
from sweep.study.names import shipped_studies
from trainables.config.build import flat_params
from trainables.config.overrides import flatten


def shown(capsys, *argv: str) -> tuple[str, dict]:
    """``mjp config show ARGV``: its first line and the config it printed, as dotted keys."""
    assert main(["config", "show", *argv]) == 0
    head, _, body = capsys.readouterr().out.partition("\n")
    return head, flatten(yaml.safe_load(body))


@pytest.mark.parametrize("smoke", [False, True])
@pytest.mark.parametrize("name", shipped_studies())
def test_config_show_is_what_every_row_of_every_shipped_study_trains_with(name, smoke, capsys):
    study = load_study(name, smoke=smoke, check=False)
    for params in study.combinations(limit=1):  # every value of every space entry (each row) once
        argv = [name, *(["--smoke"] if smoke else []), *(a for k, v in params.items() for a in ("--set", f"{k}={v}"))]
        head, printed = shown(capsys, *argv)
        assert printed == flat_params(study.recipe.config(params)), (name, params)
        assert head.startswith(f"# study {name}{' (smoke)' if smoke else ''}, the trial "), head


def test_variants_row_c_is_on_the_reference_schedule_and_a_bad_row_is_one_line(capsys):
    _, c = shown(capsys, "variants", "--set", "mjp.variant=C")
    assert (c["mjp.jigsaw_prob"], c["optim.jigsaw_warmup_epochs"], c["mjp.mask_mode"]) == (0.5, 20, "per_batch")
    _, j = shown(capsys, "variants", "--set", "mjp.variant=J", "--set", "optim.epochs=3")
    assert (j["mjp.jigsaw_prob"], j["optim.jigsaw_warmup_epochs"], j["optim.epochs"]) == (1.0, 0, 3)
    assert main(["config", "show", "variants", "--set", "mjp.variant=Z"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: study 'variants': mjp.variant='Z' is not one of its values (A, B, C, D, E, F, G, H, I, J)"
