"""The fork-server imports a probe module the first time a run names it,
before it forks that run's child (grader.sandbox.server.load_probes): the
confined child finds it imported, and a server that has only run
exercise 01's probes has not paid for what 05's device checks need
(sympy, imported by the meta-device kernels). Nor does anyone import
torch._dynamo only for PyTorch's marks that a function is not to be
compiled (coursekit.probes.dynamo_deferral)."""
from __future__ import annotations

from pathlib import Path

import pytest

from grader.sandbox import Limits, ProbeCall, Sandbox
from grader.sandbox.requests import probe_modules

LIMITS = Limits(timeout_s=60, cpu_s=30, memory_mb=2048, output_limit_kb=16, threads=1)
# What the child's module reports: which of these were imported before it was.
LOADED_AT_IMPORT = """
import sys
BEFORE = {name: name in sys.modules for name in
          ("torch._dynamo", "torch.fx.experimental.symbolic_shapes", "coursekit.probes.softmax",
           "coursekit.probes.placement", "coursekit.probes.dispatch")}
def before():
    return BEFORE
"""


def _report(name: str = "before") -> ProbeCall:
    return ProbeCall("coursekit.probes.sandbox_selftest:call", {"name": name})


def test_probe_modules_are_each_call_s_probe_and_the_probe_a_recording_runs():
    calls = [ProbeCall("coursekit.probes.softmax:softmax_output", {"x": 1}),
             ProbeCall("coursekit.probes.dispatch:recorded_call",
                       {"probe": "coursekit.probes.masking:masked_scores", "kwargs": {}}),
             ProbeCall("coursekit.probes.softmax:softmax_gradient", {"probe": 3}),
             ProbeCall("coursekit.probes.softmax:softmax_output", {"probe": "os:system"})]
    assert probe_modules(calls) == ["coursekit.probes.dispatch", "coursekit.probes.masking",
                                    "coursekit.probes.softmax"]


@pytest.fixture()
def sandbox():
    with Sandbox(LIMITS) as box:  # a fresh server: what it has imported depends on its runs alone
        yield box


def _module(tmp_path: Path) -> Path:
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "submission.py").write_text(LOADED_AT_IMPORT)
    return folder


def test_a_run_finds_the_probe_modules_it_names_already_imported_and_nothing_heavy_else(sandbox, tmp_path):
    folder = _module(tmp_path)
    softmax = ProbeCall("coursekit.probes.softmax:softmax_output", {"x": [1.0]})
    run = sandbox.run(folder, "submission", [softmax, _report()], batches=[1, 1])
    assert run.status == "ok", run.reason
    seen = run.calls[1].value
    assert seen["coursekit.probes.softmax"] and seen["coursekit.probes.dispatch"]
    assert not seen["coursekit.probes.placement"] and not seen["torch.fx.experimental.symbolic_shapes"]
    assert not seen["torch._dynamo"]


def test_a_later_run_naming_a_heavy_probe_gets_a_child_forked_after_its_import(sandbox, tmp_path):
    folder = _module(tmp_path)
    assert sandbox.run(folder, "submission", [_report()]).status == "ok"  # a spare forked before
    placement = ProbeCall("coursekit.probes.placement:forward_placement",
                          {"cls": "Missing", "config": {}, "args": []})
    run = sandbox.run(folder, "submission", [placement, _report()], batches=[1, 1])
    assert run.status == "ok", run.reason
    seen = run.calls[1].value
    assert seen["coursekit.probes.placement"] and seen["torch.fx.experimental.symbolic_shapes"]
    assert not seen["torch._dynamo"]  # the meta kernels' marks for the compiler, deferred (dynamo_deferral)


def test_outside_the_server_a_probe_module_pays_nothing_at_import():
    """A student's `pytest exercises/05` imports the placement probe; the
    meta kernels' and optimisers' first-use cost (sympy, torch._dynamo,
    ~2 s) comes only where a test needs them, or never (a stub's tests
    fail first)."""
    import subprocess
    import sys

    code = ("import sys; import coursekit.probes.placement, coursekit.probes.training, coursekit.probes.gpt; "
            "print('torch._dynamo' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


# Meta kernels and optimisers at work, and which of them imported torch._dynamo.
_DYNAMO_AFTER = """
import gc, sys
import torch
from coursekit.probes.dynamo_deferral import defer_dynamo
if "freeze" in sys.argv:  # as the fork-server does before it loads a probe module
    gc.freeze()
if "defer" in sys.argv:
    defer_dynamo()
seen = {}
x = torch.zeros(3, 3, device="meta")
x.masked_fill(torch.ones(3, 3, dtype=torch.bool, device="meta").triu(1), float("-inf")).softmax(-1)
seen["meta"] = "torch._dynamo" in sys.modules
model = torch.nn.Linear(3, 3)
optimisers = [torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.AdamW(model.parameters())]
optimisers[0].zero_grad()
seen["made"] = "torch._dynamo" in sys.modules
for optimiser in optimisers:
    model(torch.ones(2, 3)).sum().backward()
    with torch.enable_grad():
        optimiser.step()
    assert torch.is_grad_enabled()
seen["stepped"] = "torch._dynamo" in sys.modules
seen["frozen_after"] = gc.get_freeze_count() > 0
# Once torch._dynamo is imported, a deferred mark and step become PyTorch's own.
import torch._dynamo
step = torch.optim.AdamW.step
while step.__code__.co_name != "_use_grad":  # under the profiling hook
    step = step.__wrapped__
fn = torch.optim.Optimizer.zero_grad.__wrapped__
before = type(getattr(fn, "__dynamo_disable", None)).__name__, step.__code__.co_names
optimisers[1].zero_grad()
model(torch.ones(2, 3)).sum().backward()
optimisers[1].step()
seen["mark"] = [before[0], type(getattr(fn, "__dynamo_disable", None)).__name__]
seen["graph_break"] = ["graph_break" in before[1], "graph_break" in step.__code__.co_names]
print(seen)
"""


@pytest.mark.parametrize("how", ["defer", "defer freeze", "as shipped"])
def test_meta_kernels_and_optimisers_import_no_torch_dynamo_once_deferred(how):
    """PyTorch's marks that a function is not to be compiled, and every
    optimiser's step, import torch._dynamo (1.4 s) on their first call;
    dynamo_deferral.defer_dynamo makes them run without it, in the server
    (whose heap is frozen) as in a student's pytest, and hands over to
    PyTorch's own once something imports torch._dynamo. As PyTorch ships,
    the first meta kernel imports it: the test can fail."""
    import ast
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _DYNAMO_AFTER, *how.split()],
                          cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    seen = ast.literal_eval(done.stdout.strip())
    if how == "as shipped":
        assert seen["meta"] and seen["made"] and seen["stepped"]
        assert seen["graph_break"] == [True, True]
        return
    assert not seen["meta"] and not seen["made"] and not seen["stepped"]
    assert seen["frozen_after"] == ("freeze" in how)
    assert seen["mark"] == ["_UntilDynamoImported", "function"]
    assert seen["graph_break"] == [False, True]


_COMPILED_AFTER_DEFERRAL = """
import sys
import torch
from coursekit.probes.dynamo_deferral import defer_dynamo
defer_dynamo()
torch.zeros(3, 3, device="meta").masked_fill(torch.ones(3, 3, dtype=torch.bool, device="meta"), 0.0)
assert "torch._dynamo" not in sys.modules
def f(a, m):
    return torch.softmax(a.masked_fill(m, float("-inf")), -1) @ a
a, m = torch.randn(4, 4), torch.ones(4, 4, dtype=torch.bool).triu(1)
for backend in ("eager", "aot_eager"):  # aot_eager traces the reference kernels the marks are on
    assert torch.allclose(torch.compile(f, backend=backend)(a, m), f(a, m)), backend
torch.zeros(2, 2, device="meta").masked_fill(torch.ones(2, 2, dtype=torch.bool, device="meta"), 0.0)
# A training step compiled whole, optimiser included, after deferred eager steps.
def train(compiled):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 3)
    optimiser = torch.optim.AdamW(model.parameters(), lr=0.1)
    def step(x):
        optimiser.zero_grad()
        model(x).pow(2).sum().backward()
        optimiser.step()
    step = torch.compile(step, backend="eager") if compiled else step
    for _ in range(3):
        step(torch.ones(2, 3))
    return model.weight.detach()
assert torch.allclose(train(compiled=True), train(compiled=False), atol=1e-5)
print("ok")
"""


def test_code_compiled_after_the_deferral_computes_what_eager_code_does():
    """A student's own torch.compile in a process where the marks were
    deferred (their pytest, after a placement test): once torch._dynamo
    is imported the real marks take over, and compiled code computes what
    eager code does."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _COMPILED_AFTER_DEFERRAL], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


# A softmax written by hand, the usual way, recorded as the no-forbidden-calls
# check records it; which operator objects the recording had to build.
_BUILT_WHILE_RECORDING = """
import sys
import torch
from coursekit.probes import warm
from coursekit.probes.dispatch import recording

torch.manual_seed(7)
state = torch.random.get_rng_state()
if sys.argv[1] == "warm":
    warm.operators()
assert torch.equal(torch.random.get_rng_state(), state), "the warm-up moved the global random state"
assert torch.is_grad_enabled()
built = []
build = torch._C._get_operation_overload
torch._C._get_operation_overload = lambda *args: (built.append(args[0]), build(*args))[1]
x = torch.randn(3, 4, dtype=torch.float64).masked_fill(torch.eye(3, 4, dtype=torch.bool), float("-inf"))
with recording():
    top = x.amax(-1, keepdim=True)
    e = torch.exp(x - torch.where(torch.isfinite(top), top, torch.zeros_like(top)))
    (e / e.sum(-1, keepdim=True)).clone()
print(len(built))
"""


@pytest.mark.parametrize("warmed", [True, False])
def test_after_the_server_s_operator_warm_up_a_recorded_call_builds_no_operator_object(warmed):
    """The dispatch mode's Python object for an operator is built on its
    first use in a process (~0.3 ms each); built once in the fork-server
    (warm.operators, called by its warm-up), no child builds them again.
    Without the warm-up the same code builds a dozen: the check can fail."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _BUILT_WHILE_RECORDING, "warm" if warmed else "cold"],
                          cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    built = int(done.stdout)
    assert (built == 0) if warmed else (built >= 10), built
