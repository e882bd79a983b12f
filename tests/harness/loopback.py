"""Shared by the harness's end-to-end tests on loopback."""
import socket


def free_port():
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago (for --master-port)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def proc_state(pid):
    """The one-letter state of /proc/PID/stat ('T' stopped), '' once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def start_store(binary, work):
    """A `ncclsmoke store serve` on 127.0.0.1 and a port of its choosing, its stderr in
    work/store.log: (process, port). It answers while a rank is stopped (unlike rank 0's store)."""
    import os
    import subprocess
    import time
    log = open(os.path.join(work, "store.log"), "w")
    p = subprocess.Popen([binary, "store", "serve", "--host", "127.0.0.1", "--port", "0"],
                         stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    line = b""
    stop_by = time.monotonic() + 15
    while b"\n" not in line and time.monotonic() < stop_by:
        ch = p.stdout.read(1)
        if not ch:
            break
        line += ch
    words = line.decode(errors="replace").split()
    if "port" not in words:
        p.kill()
        raise RuntimeError(f"store serve did not start: {line!r}")
    return p, int(words[words.index("port") + 1])
