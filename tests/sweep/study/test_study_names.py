"""A study's or a sweep's name never leaves its folder: a study file named ``..`` (or ``.``, or
``.x``) is refused before anything runs, and a name recorded by an older version is refused by
the commands that write a file named after it, before they read the store or write anything."""

from types import SimpleNamespace

import pytest
import yaml

from sweep.commands.analyze import build_report
from sweep.commands.results import cmd_analyze_results
from sweep.study.load import load_study
from trainables.errors import UserError

BASE = {"base": "trainables/configs/digits_vit_tiny.yaml", "objective": {"metric": "val/top1"}, "budget": {"trials": 1}}


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "-x", "a/b"])
def test_a_study_file_whose_name_is_not_a_plain_folder_name_is_refused(tmp_path, name):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({"name": name, **BASE}))
    with pytest.raises(UserError, match=r"invalid study .*name: String should match pattern"):
        load_study(str(path), check=False)


@pytest.mark.parametrize("name", ["..", ".", "../up", ""])
def test_a_report_or_results_file_for_a_name_that_leaves_its_folder_is_refused_before_anything(tmp_path, monkeypatch, name):
    """A study named ``..`` once wrote its report into the folder above reports/."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports").mkdir()
    with pytest.raises(UserError, match="is not a plain folder name, so nothing is written for it"):
        build_report(f"sqlite:///{tmp_path}/none.db", name, tmp_path / "reports")
    with pytest.raises(UserError, match="is not a plain folder name, so nothing is written for it"):
        cmd_analyze_results(SimpleNamespace(study=name, uri=f"sqlite:///{tmp_path}/none.db", command=None))
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["reports"]  # no store opened, nothing written
