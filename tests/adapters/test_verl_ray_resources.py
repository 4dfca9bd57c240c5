"""``--check-only`` against a running Ray instance: the one test of the start-up checks that
starts Ray, kept apart from tests/adapters/test_verl_dataset_and_config.py so that module can
run beside the engines (tests/conftest.py's ``ENGINES``)."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")


def test_check_only_counts_the_running_clusters_cpus(dataset_dir, capsys) -> None:
    """Connected to a running Ray instance (3 CPUs, 1 GPU), ``--check-only`` counts 3 CPUs for
    the GPU bundle, 1 per storage unit and 1 for TransferQueue's controller against it."""
    import ray

    from teamgym.adapters.verl.train import main

    ray.init(num_cpus=3, num_gpus=1, include_dashboard=False, log_to_driver=False)
    try:
        args = [
            "--check-only",
            f"teamgym.dataset_dir={dataset_dir}",
            "actor_rollout_ref.rollout.agent.num_workers=1",
            "data.train_batch_size=4",
            "trainer.n_gpus_per_node=1",
            "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        ]
        assert main(args) == 2
        assert "node 0: 5 of 3 CPUs" in capsys.readouterr().err
    finally:
        ray.shutdown()
