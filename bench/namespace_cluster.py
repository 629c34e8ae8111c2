"""What the multi-host benches share: the namespace cluster of
scripts/cluster.sh in a folder of their own, plan-opt and plan-run of a
build on PATH, and the 12-sequence tiny Llama of test/Cluster."""

import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")
MODEL = os.path.join(ROOT, "test", "Cluster", "Inputs", "tiny-llama-b12.json")


class BenchCluster:
    def __init__(self, build, keep):
        self.bin_dir = os.path.abspath(os.path.join(build, "bin"))
        self.out = keep or tempfile.mkdtemp()
        os.makedirs(self.out, exist_ok=True)
        self.env = dict(os.environ,
                        PARTITA_CLUSTER_DIR=os.path.join(self.out, "cluster"),
                        PATH=self.bin_dir + os.pathsep + os.environ["PATH"])

    def run(self, *command):
        """Runs `command` in the bench's folder; fails on a failure."""
        return subprocess.run(command, check=True, capture_output=True,
                              text=True, env=self.env, cwd=self.out)

    def cluster(self, *words):
        return self.run(CLUSTER, *words)

    def down(self):
        subprocess.run([CLUSTER, "down"], env=self.env)

    def hostfile(self, hosts):
        path = os.path.join(self.out, f"hosts{hosts}")
        with open(path, "w") as f:
            f.write("".join(f"node{i} slots=2\n" for i in range(1, hosts + 1)))
        return path
