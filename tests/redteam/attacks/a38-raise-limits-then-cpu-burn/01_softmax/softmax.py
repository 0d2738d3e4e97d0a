"""Attack: raise the CPU limit back to infinity, ignore SIGXCPU, and burn CPU."""
import resource
import signal

for res in (resource.RLIMIT_CPU, resource.RLIMIT_AS, resource.RLIMIT_NPROC):
    try:
        resource.setrlimit(res, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        pass
signal.signal(signal.SIGXCPU, signal.SIG_IGN)


def softmax(x, dim=-1):
    n = 0
    while True:
        n += 1
