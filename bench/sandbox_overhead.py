"""Per-run overhead of the sandbox over the probe's own compute, next to the
naive alternative (a fresh ``python -c`` per run), measured in the same run.

    python bench/sandbox_overhead.py [--runs 50] [--naive-runs 10]

Overhead = median wall time of one run minus the median in-process compute
time of the same probe. CPU time (grader + fork-server + children) is shown
too: on a busy machine wall times include waiting for a core, CPU times do not.
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# The same libgomp wait policy as the fork-server's, so that the in-process
# compute is measured the way the children compute (set before torch loads).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from coursekit.loader import load_module  # noqa: E402
from coursekit.probes.sandbox_selftest import call  # noqa: E402
from grader.course import load_course  # noqa: E402
from grader.sandbox import Limits, ProbeCall, Sandbox, wire  # noqa: E402

MODULE = '''
import torch
def attention(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
    return weights @ v
'''
NAIVE = '''
import io, sys, torch
sys.path.insert(0, sys.argv[1])
import bench_module
q, k, v = torch.load(sys.argv[2])
buf = io.BytesIO()
torch.save(bench_module.attention(q, k, v), buf)
sys.stdout.buffer.write(buf.getvalue())
'''


def cpu_of(pid: int) -> float:
    """utime + stime + reaped children's, in seconds, of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def own_cpu(who: int = resource.RUSAGE_SELF) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--naive-runs", type=int, default=10)
    parser.add_argument("--threads", type=int, help="override course.yaml's grading.threads")
    args = parser.parse_args()
    limits = Limits.from_grading(load_course(check_files=False).grading)
    if args.threads:
        limits = dataclasses.replace(limits, threads=args.threads)
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        measure(args, limits, Path(tmp))


def measure(args: argparse.Namespace, limits: Limits, folder: Path) -> None:
    """Time the three ways of running the probe and print the comparison."""
    os.chmod(folder, 0o755)
    torch.manual_seed(0)
    inputs = [torch.randn(4, 16, 32) for _ in range(3)]
    (folder / "bench_module.py").write_text(MODULE)
    torch.save(inputs, folder / "inputs.pt")  # the naive path's own format (torch.save/torch.load)
    load = os.getloadavg()[0]

    module = load_module(folder, "bench_module")
    torch.set_num_threads(limits.threads)
    compute = []
    for _ in range(args.runs):
        start = time.perf_counter()
        expected = call(module, "attention", inputs)
        compute.append(time.perf_counter() - start)
    compute_s = statistics.median(compute)

    probe = [ProbeCall("coursekit.probes.sandbox_selftest:call", {"name": "attention", "args": inputs})]
    with Sandbox(limits) as box:
        first = box.run(folder, "bench_module", probe)  # starts the fork-server
        assert first.status == "ok" and torch.allclose(first.calls[0].value, expected), first
        server = box.info()["pid"]
        time.sleep(0.5)
        cpu_before = own_cpu() + cpu_of(server)
        walls = []
        for _ in range(args.runs):
            start = time.perf_counter()
            result = box.run(folder, "bench_module", probe)
            walls.append(time.perf_counter() - start)
            assert result.status == "ok", result.reason
        time.sleep(1.0)  # let the server reap the last children
        sandbox_cpu = (own_cpu() + cpu_of(server) - cpu_before) / args.runs

    naive, children_before = [], own_cpu(resource.RUSAGE_CHILDREN)
    for _ in range(args.naive_runs):
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", NAIVE, str(folder), str(folder / "inputs.pt")],
                             capture_output=True, check=True).stdout
        assert torch.allclose(torch.load(io.BytesIO(out)), expected)
        naive.append(time.perf_counter() - start)
    naive_cpu = (own_cpu(resource.RUSAGE_CHILDREN) - children_before) / args.naive_runs

    sandbox_s, naive_s = statistics.median(walls), statistics.median(naive)
    over, naive_over = sandbox_s - compute_s, naive_s - compute_s
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    print(f"probe compute, in-process (median of {args.runs}):  {ms(compute_s)}")
    print(f"sandbox run, wall (median of {args.runs}):          {ms(sandbox_s)}   "
          f"p10 {ms(sorted(walls)[len(walls) // 10])}   p90 {ms(sorted(walls)[len(walls) * 9 // 10])}")
    print(f"  overhead over compute:                    {ms(over)}   (goal <= 30 ms: "
          f"{'met' if over <= 0.030 else 'NOT met'})")
    print(f"  CPU per run, grader + server + child:     {ms(sandbox_cpu)}")
    print(f"fresh `python -c` per run, wall (median of {args.naive_runs}): {ms(naive_s)}")
    print(f"  overhead over compute:                    {ms(naive_over)}")
    print(f"  CPU per run:                              {ms(naive_cpu)}")
    print(f"naive / sandbox overhead: {naive_over / over:.0f}x")


if __name__ == "__main__":
    main()
