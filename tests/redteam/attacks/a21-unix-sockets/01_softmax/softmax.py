"""Attack: talk to local services over unix sockets (docker, dbus, the sandbox server)."""
import glob
import socket

for path in ["/var/run/docker.sock", "/run/dbus/system_bus_socket", *glob.glob("/tmp/**/*.sock", recursive=True)]:
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(b"GET /containers/json HTTP/1.0\r\n\r\n")
    except Exception:
        pass
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0grader")  # abstract namespace
except Exception:
    pass


def softmax(x, dim=-1):
    return x
