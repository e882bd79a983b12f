"""Shared by the harness's end-to-end tests on loopback."""
import socket


def free_port():
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago (for --master-port)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
