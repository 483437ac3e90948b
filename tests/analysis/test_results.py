"""The results tables of README.md and docs/*.md are generated from results/*.json, and a test keeps them in agreement."""

from pathlib import Path

import pandas as pd
import pytest

from analysis.results import (
    documents_disagreements,
    from_runs,
    load,
    render,
    rendered_blocks,
    save,
    with_blocks_in,
)
from mjp import keys

ROOT = Path(__file__).resolve().parents[2]


def sweep_runs() -> pd.DataFrame:
    rows = []
    for variant, letter, top1 in (("baseline", "A", 0.9), ("jp_unk_dal_mlp", "J", 0.88)):
        for seed in (0, 1):
            rows.append(
                {
                    "run_id": f"{letter}{seed}",
                    "run_name": f"{letter}-{variant}-s{seed}",
                    "status": "FINISHED",
                    "variant": variant,
                    "sample.mjp.variant": letter,
                    "runtime.seed": seed,
                    "data.name": "digits",
                    "model.name": "vit_tiny_patch16_224",
                    "model.kwargs.embed_dim": 64,
                    "optim.epochs": 30,
                    keys.VAL_TOP1: top1 + seed / 100,
                    keys.VAL_CONSISTENCY: 0.5,
                    "data.batch_size": 64,
                    "perf/img_per_s": 1000.0,
                }
            )
    rows.append({**rows[0], "run_id": "X", "run_name": "failed", "status": "FAILED"})
    return pd.DataFrame(rows)


def test_a_results_file_round_trips_and_renders_the_study_table(tmp_path):
    results = from_runs(
        sweep_runs(), study="quickstart", command="mjp demo", machine="a CPU, 2 cores", commit="abc", date="2026-11-23", paper_tables=("4",)
    )
    assert len(results.runs) == 4 and all(
        "data.batch_size" not in r and "perf/img_per_s" not in r for r in results.runs
    )  # finished runs, what tables need
    save(results, tmp_path / "quickstart.json")
    again = load(tmp_path / "quickstart.json")
    assert again == results
    text = render(again, "results/quickstart.json")
    assert "| A: baseline | 90.5 ± 0.7 |" in text and "| J: JP + UNK + DAL (NLN) | 88.5 ± 0.7 |" in text
    assert "digits, vit_tiny_patch16_224 (D=64), 30 epochs, seeds 0, 1" in text and "`mjp demo` on a CPU, 2 cores" in text
    assert "Table 4" in text and "the paper: DeiT-S on ImageNet-1K" in text


def test_the_readme_check_finds_a_changed_number_and_the_generator_fixes_it(tmp_path):
    results = from_runs(sweep_runs(), study="demo", command="mjp demo", machine="m", commit="c", date="d", paper_tables=())
    blocks = {"demo": render(results, "results/demo.json")}
    readme = {"README.md": "# x\n<!-- results:demo -->\nold\n<!-- /results:demo -->\nrest\n"}
    assert documents_disagreements(readme, blocks) == ["results:demo: README.md differs from results/demo.json"]
    fixed = with_blocks_in(readme, blocks)
    assert documents_disagreements(fixed, blocks) == [] and fixed["README.md"].endswith("rest\n")
    with pytest.raises(ValueError, match="README.md has no <!-- results:other -->"):
        with_blocks_in(readme, {"other": "x"})


def test_a_file_that_is_not_a_results_file_is_named(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"format": 99}')
    with pytest.raises(ValueError, match="bad.json is not a results file"):
        load(path)


def test_a_block_may_live_in_a_docs_page_once():
    results = from_runs(sweep_runs(), study="demo", command="mjp demo", machine="m", commit="c", date="d", paper_tables=())
    blocks = {"demo": render(results, "results/demo.json")}
    marked = "<!-- results:demo -->\nold\n<!-- /results:demo -->\n"
    docs = {"README.md": "# x\n", "docs/results.md": "# r\n" + marked}
    assert documents_disagreements(docs, blocks) == ["results:demo: docs/results.md differs from results/demo.json"]
    fixed = with_blocks_in(docs, blocks)
    assert fixed["README.md"] == "# x\n" and documents_disagreements(fixed, blocks) == []
    twice = {**fixed, "README.md": fixed["docs/results.md"]}
    assert documents_disagreements(twice, blocks) == ["results:demo: a block in each of README.md, docs/results.md; keep one"]
    assert documents_disagreements({"README.md": "# x\n"}, blocks) == ["results:demo: no block in README.md"]
    with pytest.raises(ValueError, match="README.md or docs/results.md has no <!-- results:other -->"):
        with_blocks_in(docs, {"other": "x"})


def test_readme_md_and_docs_agree_with_the_committed_results_files():
    """Every results table in README.md and docs/*.md is what `mjp analyze readme` makes from results/*.json."""
    from sweep.commands.results import documents

    blocks = rendered_blocks(ROOT / "results", ROOT)
    assert "README.md" in documents(ROOT) and "docs/results.md" in documents(ROOT)
    texts = {name: path.read_text() for name, path in documents(ROOT).items()}
    assert documents_disagreements(texts, blocks) == []


def test_metrics_mjp_evaluate_added_to_one_run_do_not_change_the_study_s_table():
    runs = sweep_runs()
    for section in ("eval.robustness", "eval.pe_analysis", "eval.privacy"):
        runs[section] = None  # the quickstart study runs none of these at the end of training
    before = render(from_runs(runs, study="q", command="mjp demo", machine="m", commit="c", date="d", paper_tables=()), "results/q.json")
    runs.loc[0, [keys.ROBUST_MCE_UNNORMALIZED, keys.pe_ev_key(3), keys.PE_MAE_2D]] = [0.5, 0.4, 2.0]  # `mjp evaluate --run A0` afterwards
    results = from_runs(runs, study="q", command="mjp demo", machine="m", commit="c", date="d", paper_tables=())
    assert render(results, "results/q.json") == before and not any(k.startswith(("robust/", "pe/")) for r in results.runs for k in r)
    runs["eval.pe_analysis"] = "{umap: false}"  # a study that runs the PE analysis keeps its columns
    assert any(
        keys.pe_ev_key(3) in r for r in from_runs(runs, study="q", command="c", machine="m", commit="c", date="d", paper_tables=()).runs
    )


def test_analyze_results_captions_the_command_the_sweep_recorded(tmp_path, monkeypatch):
    import json

    import sweep.commands.results as command
    from sweep.cli import main
    from trainables.tracking import schema
    from trainables.tracking.runs import RunTracker

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    parent = RunTracker.create(
        uri,
        "mjp-quickstart",
        run_name="quickstart-1",
        tags={
            schema.TAG_KIND: schema.KIND_SWEEP,
            schema.TAG_STUDY: "quickstart",
            schema.TAG_SMOKE: "False",
            schema.TAG_COMMAND: "mjp demo",
        },
    )
    child = RunTracker.create(
        uri, "mjp-quickstart", run_name="A-baseline-s0", tags={schema.TAG_PARENT: parent.run_id, schema.TAG_STUDY: "quickstart"}
    )
    child.log_metrics({keys.VAL_TOP1: 0.9}, step=1)
    child.set_status("FINISHED")
    parent.set_status("FINISHED")
    monkeypatch.setattr(command, "ROOT", tmp_path)
    monkeypatch.setattr(command, "RESULTS", tmp_path / "results")
    assert main(["analyze", "results", "--study", "quickstart", "--uri", uri]) == 0
    assert json.loads((tmp_path / "results" / "quickstart.json").read_text())["command"] == "mjp demo"
