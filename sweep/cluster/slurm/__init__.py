"""A sweep on a Slurm cluster: one batch job per sweep (``mjp cluster slurm STUDY``, docs/cluster-slurm.md).

``shape.py`` checks what the job asks for against the partition, ``shared_fs.py`` the folder every node
must see (and lock), ``script.py`` writes the batch script, ``submit.py`` hands it to ``sbatch``;
inside the allocation ``job.py`` runs Ray's head, the MLflow server and gate and the sweep's driver
on the first node, and ``node.py`` joins each other node to the head (started there by ``srun``)."""
