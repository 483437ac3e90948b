"""Signs what Tune writes into a sweep directory, at the moment Tune writes it.

Tune saves its experiment state into a local staging folder and only then copies that folder
into the sweep directory (in a background thread). Within one save, after the experiment state,
the searcher state and the search-generator state are written and before the copy starts, Tune
asks every callback for its state (``CallbackList.save_to_dir``). ``SweepSigner.get_state`` signs
the staging folder's pickles there and returns nothing (so Tune writes no callback-state file).
Every pickle that reaches the sweep directory through Tune's copy was therefore signed before the
copy began: the regular saves, the final save at the end of a run and the one after Ctrl-C all
pass through here, and a driver killed with SIGKILL at any moment leaves files whose current or
previous version is signed (``sweep.security.signatures`` keeps both). The top-level files of each
save are also kept whole (``last_save``), before Tune's copy begins, for a resume to put back what a
driver ended mid-copy left empty. ``tuner.pkl`` is written once,
directly into the sweep directory, when the Tuner is made; ``sign_tuner_file`` signs it then.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from ray import tune

from sweep.security.last_save import keep_last_save
from sweep.security.signatures import sign_files, sign_tree
from sweep.security.sweep_files import read_file

TUNER_FILE = "tuner.pkl"


def sign_tuner_file(experiment_dir: str) -> None:
    """Sign ``tuner.pkl`` just after this process wrote it (a new Tuner)."""
    sign_files(experiment_dir, {TUNER_FILE: read_file(experiment_dir, TUNER_FILE)})


class SweepSigner(tune.Callback):
    """Signs Tune's staging copy of the sweep directory at each experiment-state save."""

    def __init__(self, experiment_dir: str, name: str):
        self.experiment_dir, self.name = experiment_dir, name
        self._staging: str | None = None

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if self._staging is None and trials:
            self._staging = trials[0].storage.experiment_driver_staging_path

    def _staging_dir(self) -> str | None:
        """Tune's staging folder for this experiment: known from a trial once one exists; before
        that, the one folder of this experiment's name under this Ray session's artifacts."""
        if self._staging is not None:
            return self._staging
        from ray.train.constants import _get_ray_train_session_dir

        found = glob.glob(os.path.join(_get_ray_train_session_dir(), "*", glob.escape(self.name), "driver_artifacts"))
        return max(found, key=os.path.getmtime) if found else None

    def get_state(self) -> dict | None:
        staging = self._staging_dir()
        if staging is not None:
            keep_last_save(self.experiment_dir, sign_tree(self.experiment_dir, staging))
        return None
