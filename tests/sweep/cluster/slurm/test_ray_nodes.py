"""The environment of a Slurm job's processes: the job's token, and none of the submitting shell's
Ray settings that would split the job's nodes or send them to another cluster."""

from sweep.cluster.slurm.ray_nodes import job_environment


def test_the_job_drops_the_shells_ray_address_token_and_single_node_switch(tmp_path, monkeypatch):
    token = tmp_path / "auth_token"
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")  # the twin's head, say
    monkeypatch.setenv("RAY_AUTH_TOKEN", "0" * 64)
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # the twin's: `ray start --address` then refuses
    env = job_environment(token)
    assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN_PATH"] == str(token)
    assert not {"RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"} & set(env)
