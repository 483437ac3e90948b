"""What a trial and Ray Data's tasks ask a cluster for: custom resources (never ``CPU`` among them),
and GPUs, CPUs or resources this machine lacks, refused locally but left to a cluster's autoscaler."""

import pytest

from trainables.errors import ConfigError


def test_a_trial_asks_for_its_custom_resources_and_refuses_cpu_among_them():
    from trainables.config.build import build_config
    from trainables.launch.trial import worker_resources

    base = {"model": {"name": "vit_tiny_patch16_224"}, "data": {"name": "digits"}}
    cfg = build_config(base, {"scaling.worker_resources": {"mjp_gpu": 1}}, source="test")
    assert worker_resources(cfg.scaling) == {"CPU": 1.0, "mjp_gpu": 1.0}
    with pytest.raises(ConfigError, match="'CPU'.*custom resources"):
        build_config(base, {"scaling.worker_resources": {"CPU": 2}}, source="test")


def test_ray_data_resources_place_the_decode_tasks_and_are_refused_where_no_node_has_them(tmp_path, monkeypatch):
    from trainables.config.build import build_config
    from trainables.data.ray_data import _placement
    from trainables.launch.ray_runtime import check_local_resources

    base = {"model": {"name": "vit_tiny_patch16_224"}, "data": {"name": "digits"}}
    cfg = build_config(base, {"data.ray_data_resources": {"mjp_data": 1}, "data.loader": "ray_data"}, source="test")
    assert _placement(cfg.data) == {"resources": {"mjp_data": 1.0}}
    assert _placement(build_config(base, {}, source="test").data) == {}
    with pytest.raises(ConfigError, match="'CPU'.*ray_data_resources"):
        build_config(base, {"data.ray_data_resources": {"CPU": 1}}, source="test")
    assert any(
        "does nothing with data.loader=torch" in w
        for w in build_config(base, {"data.ray_data_resources": {"mjp_data": 1}}, source="test").warnings()
    )
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ConfigError, match=r"data.ray_data_resources=\{'mjp_data': 1.0\}.*only a cluster"):
        check_local_resources(cfg, None)
    check_local_resources(cfg, "127.0.0.1:6379")  # a cluster's nodes declare them
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    check_local_resources(cfg, None)


def test_a_data_section_with_a_placement_is_hashable_as_ray_data_tasks_need():
    from trainables.config.build import build_config
    from trainables.data.ray_data import _transform

    def make():
        return build_config(
            {"data": {"name": "digits"}}, {"data.ray_data_resources": {"mjp_data": 1}, "data.img_size": 16}, source="test"
        ).data

    assert hash(make()) == hash(make()) and _transform(make()) is _transform(make())  # one transform per section


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU: use_gpu=true is runnable here")
def test_a_gpu_or_cpus_this_machine_lacks_are_refused_locally_but_left_to_a_clusters_autoscaler(monkeypatch):
    """A local Ray would wait forever for a GPU this machine lacks (nothing on screen), or
    pretend to have 64 CPUs and run 64 threads per trial on 2 cores; an address is a cluster."""
    import os

    from trainables.config.build import build_config
    from trainables.launch.ray_runtime import check_local_resources

    base = {"model": {"name": "vit_tiny_patch16_224"}, "data": {"name": "digits"}}
    gpu = build_config(base, {"scaling.use_gpu": True}, source="test")
    cpus = build_config(base, {"scaling.num_workers": 2, "scaling.cpus_per_worker": os.cpu_count()}, source="test")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(
        ConfigError, match=r"scaling.use_gpu=true asks for 1 GPU\(s\) per trial .* but this machine has 0 \(torch sees no CUDA devices\)"
    ):
        check_local_resources(gpu, None)
    with pytest.raises(
        ConfigError,
        match=(
            rf"scaling.num_workers=2 x scaling.cpus_per_worker={os.cpu_count()} = {2 * os.cpu_count()} CPUs per trial, "
            rf"but this machine has {os.cpu_count()}"
        ),
    ):
        check_local_resources(cpus, None)
    check_local_resources(build_config(base, {"scaling.cpus_per_worker": os.cpu_count()}, source="test"), None)  # all the cores: allowed
    for cfg in (gpu, cpus):
        check_local_resources(cfg, "127.0.0.1:6379")  # the cluster's autoscaler may provide them
        monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
        check_local_resources(cfg, None)
        monkeypatch.delenv("RAY_ADDRESS")
