"""Runs as the analysis reads them from MLflow (one row a run, ``sample.*`` the sampled values),
made up for the tests of the tables and the report."""

import pandas as pd


def runs_frame():
    rows = []
    for variant, sample, top1 in [("baseline", "A", (0.80, 0.82)), ("jp_unk_dal_mlp", "J", (0.81, 0.85))]:
        for seed, acc in enumerate(top1):
            rows.append(
                {
                    "run_id": f"{sample}{seed}",
                    "run_name": f"{sample}-s{seed}",
                    "experiment_id": "1",
                    "status": "FINISHED",
                    "variant": variant,
                    "sample.mjp.variant": sample,
                    "sample.runtime.seed": seed,
                    "val/top1": acc,
                    "val/consistency": 0.6 if sample == "A" else 0.9,
                    "val/diff_norm": 10.0,
                    "val/top1_shuffled_0": acc,
                    "val/top1_shuffled_0.9": 0.3,
                    "privacy/c_psnr": 20.0 if sample == "A" else 8.0,
                }
            )
    rows.append(
        {
            "run_id": "X",
            "run_name": "A-s2",
            "experiment_id": "1",
            "status": "FAILED",
            "variant": "baseline",
            "sample.mjp.variant": "A",
            "sample.runtime.seed": 2,
            "val/top1": 0.1,
        }
    )
    return pd.DataFrame(rows)
