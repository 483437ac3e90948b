"""The one callback Tune pickles for a sweep forwards to the callbacks of whichever driver runs it."""

import pickle

from ray import tune

from sweep.tuner.callbacks import SweepCallbacks, attached


class Seen(tune.Callback):
    def __init__(self) -> None:
        self.results: list[int] = []
        self.states = 0

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.results.append(result["epoch"])

    def get_state(self):
        self.states += 1
        return None


def test_a_restored_callback_reaches_the_resuming_drivers_callbacks_not_the_first_ones():
    first = Seen()
    with attached("sweep-1", [first]) as callback:
        saved = pickle.dumps(callback)  # as Tune writes it into tuner.pkl
        callback.on_trial_result(iteration=1, trials=[], trial=None, result={"epoch": 1})
    assert first.results == [1]
    assert b"Seen" not in saved  # the first driver's callbacks are not in the experiment

    restored = pickle.loads(saved)
    restored.on_trial_result(iteration=2, trials=[], trial=None, result={"epoch": 2})  # no driver attached: nothing
    resuming = Seen()
    with attached("sweep-1", [resuming]):
        restored.on_trial_result(iteration=3, trials=[], trial=None, result={"epoch": 3})
        assert restored.get_state() is None and resuming.states == 1  # the signer signs in get_state
    assert first.results == [1] and resuming.results == [3]
    assert SweepCallbacks("sweep-1")._callbacks == []  # detached when the driver's sweep ended
