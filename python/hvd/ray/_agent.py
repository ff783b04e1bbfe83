"""The launch agent of hvd.ray's elastic jobs (hvdrun --launch-agent; launcher/launch_agent.h):
``python .../hvd/ray/_agent.py HOST COMMAND [ARGS...]`` (by path, so that the hvd package is not
imported), run by hvdrun on the driver's machine in
place of one worker. It asks the executor in the driver (hvd/ray/_elastic.py, over the Unix
socket HVD_RAY_AGENT_SOCKET) to run the command on the Ray node at HOST, then stands for that
worker: the worker's output is its output, the worker's exit status its exit status, and
SIGTERM from hvdrun stops the worker. A worker whose node or actor is lost ends it with a
message naming the node.

It imports neither Ray nor hvd: one starts per worker, and hvdrun waits for none of them.
"""
import json
import os
import signal
import socket
import struct
import sys

# Frames both ways: a kind byte, a 4-byte length, the payload.
REQUEST, STOP = b"r", b"s"                    # agent -> executor
OUT, ERR, EXIT, LOST = b"o", b"e", b"x", b"l"  # executor -> agent
AGENT_ENV = "HVD_LAUNCH_AGENT_ENV"
SOCKET_ENV = "HVD_RAY_AGENT_SOCKET"


def frame(kind: bytes, payload: bytes) -> bytes:
    return kind + struct.pack("!I", len(payload)) + payload


def read_frame(sock):
    head = _read_exact(sock, 5)
    if head is None:
        return None, b""
    (length,) = struct.unpack("!I", head[1:])
    payload = _read_exact(sock, length) if length else b""
    if payload is None:
        return None, b""
    return head[:1], payload


def _read_exact(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _write(stream, data):
    stream.buffer.write(data)
    stream.buffer.flush()


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: python _agent.py HOST COMMAND [ARGS...] (run by hvdrun)")
    host, argv = sys.argv[1], sys.argv[2:]
    names = [n for n in os.environ.get(AGENT_ENV, "").split(",") if n in os.environ]
    request = {"host": host, "argv": argv, "env": {n: os.environ[n] for n in names},
               "cwd": os.getcwd()}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.environ[SOCKET_ENV])
    except (KeyError, OSError) as e:
        sys.exit(f"hvd.ray: the worker for node {host} cannot reach its executor ({e!r}): "
                 "the driver that runs the elastic job has gone")
    sock.sendall(frame(REQUEST, json.dumps(request).encode()))

    def stop(signum, _frame):
        try:
            sock.sendall(frame(STOP, str(signum).encode()))
        except OSError:
            pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        kind, payload = read_frame(sock)
        if kind == OUT:
            _write(sys.stdout, payload)
        elif kind == ERR:
            _write(sys.stderr, payload)
        elif kind == EXIT:
            code = int(payload)
            if code < 0:  # killed by a signal: so is this process, for hvdrun's summary
                try:
                    signal.signal(-code, signal.SIG_DFL)
                except (OSError, ValueError):
                    pass  # SIGKILL and SIGSTOP have no handler to reset
                os.kill(os.getpid(), -code)
            sys.exit(code)
        elif kind == LOST:
            sys.exit(f"hvd.ray: {payload.decode(errors='replace')}")
        else:
            sys.exit(f"hvd.ray: the executor stopped answering for the worker on node {host} "
                     "(the driver ended?)")


if __name__ == "__main__":
    main()
