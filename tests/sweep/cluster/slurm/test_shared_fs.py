"""The job's shared folder: a mount table read as the kernel writes it, and the filesystems whose
flock does not hold across nodes refused in one line."""

from pathlib import Path

import pytest

from sweep.cluster.slurm.shared_fs import check_shared_dir, lock_problem, mount_of, parse_mountinfo
from trainables.errors import ConfigError

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:40 / /home rw,relatime shared:20 - nfs4 srv:/home rw,vers=4.2,local_lock=none,addr=10.0.0.2
41 22 0:41 / /scratch rw,relatime - nfs srv:/scratch rw,vers=3,nolock,local_lock=all
42 22 0:42 / /lustre rw - lustre mds@o2ib:/fs rw,localflock
43 22 0:43 / /lustre2 rw - lustre mds@o2ib:/fs2 rw,flock
44 22 0:44 / /gpfs rw - gpfs fs0 rw
45 22 0:45 / /tmp rw,nosuid - tmpfs tmpfs rw
46 40 0:46 / /home/with\\040space rw - nfs4 srv:/x rw,local_lock=flock
"""


def test_each_path_lies_on_its_longest_mount():
    mounts = parse_mountinfo(MOUNTINFO)
    assert mount_of(Path("/home/ada/mjp"), mounts).fstype == "nfs4"
    assert mount_of(Path("/homework"), mounts).point == "/"
    assert mount_of(Path("/home/with space/x"), mounts).options >= {"local_lock=flock"}


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("/home/ada", None),
        ("/gpfs/proj", None),
        ("/lustre2/proj", None),
        ("/scratch/ada", "NFS mounted with nolock at /scratch"),
        ("/home/with space", "NFS mounted with local_lock=flock"),
        ("/lustre/proj", "Lustre mounted with localflock (one node only)"),
    ],
)
def test_a_filesystem_whose_flock_holds_on_one_node_only_is_named(path, problem):
    found = lock_problem(mount_of(Path(path), parse_mountinfo(MOUNTINFO)))
    assert found == problem if problem is None else problem in found


def test_a_shared_folder_on_this_machine_alone_is_refused_unless_the_nodes_are_this_machine(tmp_path):
    local = f"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n23 22 8:2 / {tmp_path} rw - ext4 /dev/sda2 rw\n"
    with pytest.raises(ConfigError, match=r"on ext4 at .*a filesystem of this machine alone"):
        check_shared_dir(tmp_path, nodes_are_this_machine=False, mountinfo=local)
    check_shared_dir(tmp_path, nodes_are_this_machine=True, mountinfo=local)  # a test cluster on one host
    nfs = f"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n23 22 0:9 / {tmp_path} rw - nfs srv:/x rw,nolock\n"
    with pytest.raises(ConfigError, match="nolock"):
        check_shared_dir(tmp_path, nodes_are_this_machine=False, mountinfo=nfs)
    with pytest.raises(ConfigError, match="no such directory"):
        check_shared_dir(tmp_path / "absent", nodes_are_this_machine=True, mountinfo=local)
