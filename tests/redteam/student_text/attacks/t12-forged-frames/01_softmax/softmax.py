"""Attack: write forged frames straight into the result pipe: an error whose
type and message carry text, then a fatal frame with text."""
import sys


def softmax(x, dim=-1):
    child = sys.modules.get("grader.sandbox.child")
    wire = sys.modules.get("grader.sandbox.wire")
    if child is not None and wire is not None:
        text = f"ZZLEAK12 {x.flatten()[:4].tolist()}"
        wire.write_all(child.RESULT_FD, wire.frame({"kind": "error", "i": 0, "error_type": "ZZLEAK12_type",
                                                    "error": text, "memory": False}))
        wire.write_all(child.RESULT_FD, wire.frame({"kind": "fatal", "error": text}))
    return x
