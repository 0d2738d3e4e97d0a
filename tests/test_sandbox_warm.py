"""The fork-server imports probe modules when a run first names them
(issue 19): start-up no longer waits for every probe module and the
meta-device kernels, and children still find what their run uses loaded."""
from __future__ import annotations

from pathlib import Path

from grader.sandbox import Limits, ProbeCall, Sandbox

LIMITS = Limits(timeout_s=20, cpu_s=10, memory_mb=2048, output_limit_kb=16, threads=1)
LOADED = '''
import sys
def loaded():
    return sorted(m for m in sys.modules if m.startswith("coursekit.probes.") or m == "torch._dynamo")
'''
LOOK = ProbeCall("coursekit.probes.sandbox_selftest:call", {"name": "loaded", "args": []})


def test_probe_modules_are_loaded_in_the_server_when_a_run_first_needs_them(tmp_path):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "submission.py").write_text(LOADED)
    with Sandbox(LIMITS) as box:
        first = box.run(Path(folder), "submission", [LOOK])
        assert first.status == "ok", first.reason
        assert "coursekit.probes.masking" not in first.calls[0].value
        assert "torch._dynamo" not in first.calls[0].value  # the meta kernels: not loaded for nothing (~1.6 s)
        # A run naming a probe of the masking module (which uses the meta device); the call itself may fail.
        named = box.run(Path(folder), "submission", [ProbeCall("coursekit.probes.masking:no_such_probe", {}), LOOK])
        assert named.status == "ok", named.reason
        assert not named.calls[0].ok
        for loaded in (named.calls[1].value, box.run(Path(folder), "submission", [LOOK]).calls[0].value):
            assert {"coursekit.probes.masking", "torch._dynamo"} <= set(loaded), loaded


def test_a_probe_module_that_does_not_exist_fails_its_call_only(tmp_path):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "submission.py").write_text(LOADED)
    with Sandbox(LIMITS) as box:
        result = box.run(Path(folder), "submission", [ProbeCall("coursekit.probes.no_such_module:f", {}), LOOK])
    assert result.status == "ok", result.reason
    assert [c.ok for c in result.calls] == [False, True]
    assert "coursekit.probes.no_such_module" not in result.calls[1].value
