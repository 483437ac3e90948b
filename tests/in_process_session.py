"""A Tune trial's session without Ray, for running the training loop (``train_loop``) in a test's
own process: rank 0 of 1 on the CPU, keeping what it reports."""

import contextlib

import torch


class InProcessSession:
    rank, world, node_id = 0, 1, "local"

    def __init__(self):
        self.device = torch.device("cpu")
        self.reports = []

    def prepare_model(self, model, find_unused_parameters):
        return model

    def prepare_loader(self, loader):
        return loader

    def restored(self):
        return contextlib.nullcontext(None)

    def report(self, metrics, checkpoint_dir):
        self.reports.append(metrics)
