#!/usr/bin/env python3
"""env_probe.py: prints the GPU machine's environment and writes it as JSON.

Called by scripts/gpu-check.sh (part `env`) as `env_probe.py OUT.json`. Prints, then records:
nvidia-smi's GPU and driver, torch and its CUDA version, which libcudart / libcupti / libcuda
the torch process has mapped after torch.cuda.init() (read from /proc/self/maps: this is the
runtime labelguard's hooks meet in a real job), nvcc and compute-sanitizer versions, and
whether glib's development files are installed. Nothing here fails the run: a missing tool is
recorded as such. Tested GPU-free through its no-torch path (the selftest of gpu-check.sh).
"""
import json
import os
import platform
import re
import shutil
import subprocess
import sys


def cmd(argv, timeout=20):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return (p.stdout + p.stderr).strip() if p.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def mapped_libs(patterns):
    found = {}
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 6:
                    continue
                path = parts[5]
                base = os.path.basename(path)
                for key, rx in patterns.items():
                    if re.match(rx, base):
                        found.setdefault(key, [])
                        if path not in found[key]:
                            found[key].append(path)
    except OSError:
        pass
    return found


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else None
    env = {"host": platform.node(), "python": sys.version.split()[0] + " " + sys.executable,
           "machine": platform.machine()}
    smi = cmd(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap,memory.total",
               "--format=csv,noheader"])
    if smi:
        f = [x.strip() for x in smi.splitlines()[0].split(",")]
        env["gpu"] = f[0]
        env["driver"] = f[1] if len(f) > 1 else None
        env["compute_cap"] = f[2] if len(f) > 2 else None
        env["gpu_memory"] = f[3] if len(f) > 3 else None
    nv = cmd(["nvcc", "--version"]) or cmd([os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"), "--version"])
    if nv:
        m = re.search(r"release ([0-9.]+), V([0-9.]+)", nv)
        env["nvcc"] = m.group(2) if m else nv.splitlines()[-1]
    cs = shutil.which("compute-sanitizer") or (
        "/usr/local/cuda/bin/compute-sanitizer" if os.path.exists("/usr/local/cuda/bin/compute-sanitizer") else None)
    if cs:
        v = cmd([cs, "--version"])
        m = re.search(r"Version ([0-9.]+)", v or "")
        env["compute_sanitizer"] = (m.group(1) if m else "present") + " " + cs
    else:
        env["compute_sanitizer"] = "not found"
    glib = cmd(["pkg-config", "--modversion", "glib-2.0"])
    dpkg = cmd(["dpkg-query", "-W", "-f=${Version}", "libglib2.0-dev"])
    env["glib"] = ("dev %s (pkg-config)" % glib) if glib else (
        ("libglib2.0-dev %s" % dpkg) if dpkg else "glib development files not installed")
    try:
        import torch  # noqa: F401  (the GPU machine has it; this one may not)
        env["torch"] = torch.__version__
        env["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            torch.cuda.init()
            torch.zeros(1, device="cuda").add_(1)  # a launch: cudart + driver fully loaded
            env["torch_device"] = torch.cuda.get_device_name(0)
            env["torch_capability"] = "%d.%d" % torch.cuda.get_device_capability(0)
        else:
            env["torch_device"] = "torch.cuda.is_available() is False"
    except Exception as e:  # an import failure is a finding, not a crash
        env["torch"] = "unavailable: %s" % e
    pats = {"libcudart": r"libcudart\.so", "libcupti": r"libcupti\.so",
            "libcuda": r"libcuda\.so", "libnvrtc": r"libnvrtc"}
    libs = mapped_libs(pats)
    for k in ("libcudart", "libcupti", "libcuda", "libnvrtc"):
        env[k] = libs.get(k, [])
    # torch opens CUPTI only for its profiler: which one it opens is the one labelguard's CUPTI
    # layer will find already loaded (and whose subscriber slot the profiler then holds).
    try:
        import torch
        if torch.cuda.is_available():
            from torch.profiler import profile, ProfilerActivity
            with profile(activities=[ProfilerActivity.CUDA]):
                torch.ones(8, device="cuda").mul_(2)
                torch.cuda.synchronize()
            env["libcupti_after_profiler"] = mapped_libs(pats).get("libcupti", [])
    except Exception as e:
        env["libcupti_after_profiler"] = ["profiler failed: %s" % e]
    for k, v in env.items():
        print("%-18s %s" % (k, ", ".join(v) if isinstance(v, list) else v))
    if smi is None:
        print("nvidia-smi: not available")
    else:
        full = cmd(["nvidia-smi"])
        if full:
            print(full)
    if out:
        with open(out, "w") as f:
            json.dump(env, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
