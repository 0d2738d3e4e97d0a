"""Attack: cancel alarms and ignore every catchable signal, then spin forever."""
import signal

signal.alarm(0)
for sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGXCPU, signal.SIGHUP, signal.SIGUSR1):
    try:
        signal.signal(sig, signal.SIG_IGN)
    except (OSError, ValueError):
        pass
try:
    signal.setitimer(signal.ITIMER_REAL, 0)
except OSError:
    pass


def softmax(x, dim=-1):
    while True:
        pass
