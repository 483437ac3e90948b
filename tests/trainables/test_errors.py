"""Every error class the project defines survives pickling with its message: Ray sends a
worker's exception to the driver as a pickle, and one that cannot be rebuilt turns into a
``TypeError`` about ``__init__`` instead of saying what went wrong."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

import pytest

PACKAGES = ("mjp", "trainables", "sweep", "analysis")


def project_errors() -> list[type[BaseException]]:
    found = {}
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            if ".configs" in info.name or ".studies" in info.name:
                continue
            module = importlib.import_module(info.name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, BaseException) and cls.__module__.split(".")[0] in PACKAGES:
                    found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return [found[k] for k in sorted(found)]


def an_instance(cls: type[BaseException]) -> BaseException:
    """``cls`` made with a string for each argument its ``__init__`` requires."""
    params = [
        p
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.name != "self" and p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return cls(*(f"<{p.name}>" for p in params)) if params else cls("what went wrong")


ERRORS = project_errors()


def test_the_project_defines_errors_to_check():
    names = {c.__name__ for c in ERRORS}
    assert {"UserError", "UnreadableImage", "TrialFailed", "NonFiniteLossError", "TrackingError"} <= names


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_error_survives_pickling_with_its_message(cls):
    err = an_instance(cls)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls and str(back) == str(err) and back.__dict__ == err.__dict__


def test_an_unreadable_image_names_its_file_after_crossing_a_process():
    from trainables.data.folder.image_folder import UnreadableImage

    back = pickle.loads(pickle.dumps(UnreadableImage("/data/cats/broken.jpg", "cannot identify image file")))
    assert back.path == "/data/cats/broken.jpg"
    assert str(back) == "cannot read image /data/cats/broken.jpg: cannot identify image file; remove it, or set data.on_bad_image=skip"


def test_a_trial_failure_keeps_its_fields_through_pickling_and_reads_as_its_reason():
    """Ray carries a trial's error to the driver pickled, sometimes as text only: the reason is
    found by field where it survives, else by the class's own name, never by a spelled path."""
    import pickle

    from trainables.launch.trial import TrialFailed, failure_text

    err = pickle.loads(pickle.dumps(TrialFailed("train/loss is nan in epoch 3", final=True)))
    assert (err.reason, err.final) == ("train/loss is nan in epoch 3", True)
    try:
        try:
            raise err
        except TrialFailed as inner:
            raise RuntimeError("Ray's wrapping") from inner
    except RuntimeError as outer:
        assert failure_text(outer) == "train/loss is nan in epoch 3"
    as_text = RuntimeError(f"Traceback ...\n  File x\n{TrialFailed.__module__}.TrialFailed: CUDA out of memory")
    assert failure_text(as_text) == "CUDA out of memory"
