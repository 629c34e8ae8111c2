# Lit configuration for Partita's compiler tests.
import importlib.util
import os
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "Partita"

# A test that hangs fails on its own after 15 minutes (the slowest takes
# about 4) instead of holding the suite; lit needs psutil to end it.
try:
    import psutil  # noqa: F401
    lit_config.maxIndividualTestTime = 900
except ImportError:
    lit_config.note("psutil is not installed: tests run without a time limit")
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.partita_obj_root, "test")
# Inputs/ holds files that tests read; unit/ and fuzz/ are built by CMake.
config.excludes = ["Inputs", "windows", "lab.json", "pairs.json", "CMakeLists.txt", "unit", "fuzz", "lit.cfg.py",
                   "lit.site.cfg.py"]

config.substitutions.append(("%examples",
                             os.path.join(config.partita_src_root, "examples")))
config.substitutions.append(("%inputs",
                             os.path.join(config.test_source_root, "Import",
                                          "Inputs")))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.partita_tools_dir,
                             append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
tool_dirs = [config.partita_tools_dir, config.llvm_tools_dir]
tools = ["plan-opt", "importer-corpus-replay", "topology-corpus-replay"]
# plan-run is built where MPI and OpenBLAS are found; the runtime's tests
# say REQUIRES: plan-run.
if os.path.exists(os.path.join(config.partita_tools_dir, "plan-run")):
    tools += ["plan-run", "partita-comm-check", "partita-guarded-run",
              "plan-loader-corpus-replay", "partita-kernel-run"]
    config.available_features.add("plan-run")
# The CUDA backend is built where CMake finds CUDA, cuBLASLt and NCCL; its
# GPU tests need a device as well (nvidia-smi lists one).
if config.partita_have_cuda in ("ON", "1", "TRUE"):
    config.available_features.add("cuda-backend")
    import shutil
    import subprocess
    smi = shutil.which("nvidia-smi")
    if smi and subprocess.run([smi, "-L"], capture_output=True,
                              text=True).stdout.startswith("GPU "):
        config.available_features.add("cuda-device")
        tools += ["partita-cuda-kernel-run"]
# The CUDA backend built for the CPU emulator (runtime/cuda/emulator), where
# CUDA's headers and Boost.Context are found.
if config.partita_have_cuda_emulator in ("ON", "1", "TRUE"):
    tools += ["partita-cuda-emulated-run", "partita-cuda-emulated-kernel-run"]
    config.available_features.add("cuda-emulator")
llvm_config.add_tool_substitutions(tools, tool_dirs)

# The published Megatron-LM table the cost model is calibrated against lives
# in the shared data beside the repository.
megatron_table = os.path.join(config.partita_src_root, "..", "shared", "data",
                              "megatron-sc21-table1.json")
if os.path.exists(megatron_table):
    config.available_features.add("megatron-table")
config.substitutions.append(("%megatron_table", megatron_table))
config.substitutions.append(("%bench", os.path.join(config.partita_src_root,
                                                    "bench")))
# The Python running lit (Debian's, with python3-numpy for the reference
# executor).
config.substitutions.append(("%python", sys.executable))
# PyTorch (Debian's python3-torch), the independent oracle of the kernels'
# forward and backward (Runtime/kernel-oracle.test).
if importlib.util.find_spec("torch") is not None:
    config.available_features.add("torch")
config.substitutions.append(("%build", config.partita_obj_root))
config.substitutions.append(("%docs", os.path.join(config.partita_src_root,
                                                   "docs")))

# The multi-host tests (Cluster/) run on a namespace cluster of
# scripts/cluster.sh: they need root, Linux namespaces, sshd, munged and
# the Slurm daemons. Elsewhere they are skipped, and lit says why.
def cluster_unavailable():
    import shutil
    import subprocess
    if os.geteuid() != 0:
        return "they need root"
    for program in ["unshare", "nsenter", "ip", "tc", "/usr/sbin/sshd",
                    "munged", "slurmd", "slurmctld", "srun"]:
        if not shutil.which(program):
            return f"{program} is not installed (scripts/install-deps.sh)"
    trial = subprocess.run(["unshare", "--net", "--uts", "--mount", "--pid",
                            "--fork", "--mount-proc", "true"],
                           capture_output=True, text=True)
    if trial.returncode != 0:
        return f"this machine cannot create namespaces ({trial.stderr.strip()})"
    return None


cluster_reason = cluster_unavailable()
if cluster_reason is None and "plan-run" in config.available_features:
    config.available_features.add("cluster")
elif "plan-run" in config.available_features:
    lit_config.note(f"the multi-host tests (Cluster/) are skipped: {cluster_reason}")
