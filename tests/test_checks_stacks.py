"""The checks exercises 09 and 10 share are declared once
(grader/checks/stacks.py): a third stack is a StackKind and a table of rows,
and the rules that hold for every stack (which checks count only once the
outputs are right, the probe of each kind of row) come with it."""
from __future__ import annotations

import pytest

from grader.checks import text
from grader.checks.encoder import ENCODER
from grader.checks.forbidden import unwrapped
from grader.checks.stacks import Case, StackKind, stack_checks

# A decoder-only block: the encoder's inputs (x and one mask), its own probes.
BLOCK = StackKind(exercise="99", word="block", layer="Block", stack="Blocks", names="attn, mlp, ln1, ln2",
                  oracle=ENCODER.oracle, to_course=ENCODER.to_course, inputs=ENCODER.inputs,
                  behaviour_inputs=ENCODER.behaviour_inputs, placement_args=ENCODER.placement_args,
                  placements=(("Block", False, "padding"),))
SAID = text("checked", "已检查")
TABLE = [
    Case("99-layer-behaviour", "behaviour", count=1, seed=1, message=SAID),
    Case("99-layer-output", "output", count=2, masks=("padding", "none"), seed=2, message=SAID),
    Case("99-layer-parameters", "structure", count=1, seed=3, message=SAID),
    Case("99-blocks-output", "output", stack=True, count=1, masks=("none",), seed=4, message=SAID),
    Case("99-blocks-gradients", "gradients", stack=True, count=2, masks=("padding",), seed=5, message=SAID),
    Case("99-device", "device", seed=6),
]


def test_a_third_stack_is_a_table():
    checks = {c.id: c for c in stack_checks(BLOCK, TABLE)}
    assert list(checks) == [c.id for c in TABLE] + ["99-no-forbidden-calls"]
    # Behaviour and structure count once the layer computes its outputs, devices once the stack does.
    assert checks["99-layer-behaviour"].requires == ("99-layer-output",)
    assert checks["99-layer-parameters"].requires == ("99-layer-output",)
    assert checks["99-device"].requires == ("99-blocks-output",)
    assert checks["99-no-forbidden-calls"].requires == ("99-layer-behaviour",)
    assert checks["99-layer-output"].requires == () and checks["99-blocks-gradients"].requires == ()
    # Every call recorded (09-11 forbid PyTorch's attention layers by what runs): the probe each records.
    probes = {cid: {unwrapped(call).probe for call in check.build_calls()} for cid, check in checks.items()
              if cid != "99-no-forbidden-calls"}
    assert probes["99-layer-output"] == {"coursekit.probes.block:block_layer_output"}
    assert probes["99-blocks-output"] == {"coursekit.probes.block:block_output"}
    assert probes["99-blocks-gradients"] == {"coursekit.probes.block:block_gradient_values"}
    assert probes["99-layer-behaviour"] == {"coursekit.probes.block:block_behaviour"}
    assert probes["99-layer-parameters"] == {"coursekit.probes.block:block_layer_structure"}
    mask_kinds = [unwrapped(call).kwargs["mask"] is None for call in checks["99-layer-output"].build_calls()]
    assert mask_kinds == [False, True]   # the mask kinds take turns


def test_every_stack_row_says_what_students_see():
    with pytest.raises(ValueError, match="needs a message"):
        stack_checks(BLOCK, [Case("99-layer-output", "output", count=1, masks=("none",), seed=1),
                             Case("99-blocks-output", "output", stack=True, count=1, masks=("none",), seed=2),
                             Case("99-layer-behaviour", "behaviour", count=1, seed=3, message=SAID)])
