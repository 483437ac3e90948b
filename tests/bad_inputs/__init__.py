"""The bad inputs of ``tests/test_bad_inputs.py``, one module a kind of input: each holds rows
of (id, argv: tmp -> list, message fragment) that the test joins into its one table."""

from tests.bad_inputs_made import CONFIG

#: ``mjp train`` of the shipped tiny config, which most rows start from
TRAIN = ["train", CONFIG]
