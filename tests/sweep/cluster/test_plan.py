"""``mjp sweep plan``: trials, epochs, resources, concurrency and the time and GPU-hours they make,
for this machine and for the shipped cluster.yaml, without data or Ray."""

import pytest

from sweep.cli import main
from sweep.cluster.plan import cluster_machines, make_plan
from sweep.study.load import load_study


def test_the_shipped_cluster_holds_four_8_gpu_trials():
    machines = cluster_machines("cluster.yaml")
    assert machines.gpus == 4 * 8 and machines.cpus == 4 * 96 + 8 * 64


def test_tune_on_the_cluster_is_capped_by_its_budget_not_the_machines(capsys):
    assert main(["sweep", "plan", "tune", "--cluster", "cluster.yaml", "--img-per-s", "10000"]) == 0
    out = capsys.readouterr().out
    trial_h = 100 * 1_281_167 / 10_000 / 3600  # 3.6 h
    assert "24 trials x 100 epochs x 1,281,167 training images" in out
    assert "each trial asks for 80.25 CPUs and 8 GPUs" in out
    assert "2 at a time: budget.max_concurrent=2 caps it, the machines hold 4" in out
    assert f"{trial_h:.1f} h per trial, {12 * trial_h:.1f} h wall, {24 * trial_h * 8:,.1f} GPU-hours" in out
    assert "ASHA stops some trials early" in out


def test_mask_ratio_fills_the_clusters_four_gpu_nodes(capsys):
    assert main(["sweep", "plan", "mask_ratio", "--cluster", "cluster.yaml", "--img-per-s", "10000"]) == 0
    out = capsys.readouterr().out
    assert "18 trials x 300 epochs" in out and "4 at a time (budget.max_concurrent=4, room for 4)" in out and "ASHA" not in out


def test_gpu_trials_without_a_figure_use_benchmarks_target_and_say_so():
    study = load_study("variants", check=False)
    plan = make_plan(study, cluster_machines("cluster.yaml"))
    assert plan.img_per_s == 7_000 * 8 and "a target: no GPU run has measured it" in plan.img_per_s_source
    assert plan.trials == 30 and plan.concurrent == 4
    assert plan.gpu_hours == pytest.approx(30 * 300 * 1_281_167 / 56_000 / 3600 * 8)


def test_a_local_cpu_plan_measures_and_runs_max_concurrent_at_once():
    from sweep.cluster.plan import local_machines

    study = load_study("quickstart", smoke=True, check=False)
    plan = make_plan(study, local_machines())
    assert plan.trials == 4 and plan.gpus_per_trial == 0 and plan.concurrent == 2
    assert plan.img_per_s > 0 and "measured now on this CPU" in plan.img_per_s_source
    assert plan.wall_hours == pytest.approx(2 * plan.epochs * plan.train_images / plan.img_per_s / 3600)


def test_a_slurm_shape_is_priced_with_the_starts_its_time_limit_takes(capsys):
    argv = ["sweep", "plan", "tune", "--img-per-s", "10000", "--slurm", "--nodes", "2", "--gpus-per-node", "8", "--cpus-per-node", "96"]
    assert main([*argv, "--time", "12:00:00"]) == 0
    out = capsys.readouterr().out
    trial_h = 100 * 1_281_167 / 10_000 / 3600  # 3.6 h; 24 trials, 2 at a time: 12 rounds
    assert "on a Slurm job of 2 nodes x (96 CPUs, 8 GPUs): 2 at a time" in out
    assert f"{12 * trial_h:.1f} h wall, {24 * trial_h * 8:,.1f} GPU-hours" in out
    usable_h = (12 * 3600 - 180 - 120) / 3600  # the signal's lead and a start, each time
    assert f"with --time 12:00:00: about {-(-12 * trial_h // usable_h):.0f} starts of the job" in out


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--slurm", "--nodes", "2"], "--slurm needs the job's shape"),
        (["--nodes", "2"], "describe a Slurm job: give them with --slurm"),
        (["--slurm", "--nodes", "0", "--gpus-per-node", "8", "--cpus-per-node", "8"], "--nodes 0: allowed is 1 or more"),
        (["--slurm", "--cluster", "cluster.yaml"], "--cluster and --slurm"),
    ],
)
def test_a_slurm_plan_without_its_shape_is_one_line(capsys, extra, says):
    assert main(["sweep", "plan", "tune", *extra]) == 2
    assert says in capsys.readouterr().err


def test_counts_of_one_are_singular(capsys):
    """`sweep plan quickstart` said "each trial asks for 1 CPUs"."""
    from sweep.cluster.plan import counted

    assert [counted(n, "CPU") for n in (0, 0.5, 1, 2)] == ["0 CPUs", "0.5 CPUs", "1 CPU", "2 CPUs"]
    assert main(["sweep", "plan", "quickstart", "--img-per-s", "400"]) == 0
    assert "each trial asks for 1 CPU and 0 GPUs" in capsys.readouterr().out
