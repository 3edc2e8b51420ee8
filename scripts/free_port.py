#!/usr/bin/env python3
"""A free TCP port on 127.0.0.1 for a server to take.

    python3 scripts/free_port.py [PORT...]    prints one, skipping the PORTs given

The port comes from 20000-31999, below the kernel's ephemeral range (32768-60999 by default),
on purpose: a port found by binding port 0 comes from that range, and between its release and
the server's bind any outgoing connection on the host may take it as its local port (a CI run's
server failed with "Address already in use" so). Below the range only an explicit bind takes
a port. Ports picked already whose servers have not started yet are passed to be skipped (in
Python, `free_port()` remembers what it handed out).
"""
import random
import socket
import sys

LOW, HIGH = 20000, 32000
_picked = set()


def free_port(skip=()):
    """A port on 127.0.0.1 that binds now, not in `skip`, never the same twice a process."""
    for port in random.sample(range(LOW, HIGH), HIGH - LOW):
        if port in _picked or port in skip:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _picked.add(port)
        return port
    raise SystemExit(f"no free port in {LOW}-{HIGH - 1} on 127.0.0.1")


if __name__ == "__main__":
    print(free_port({int(p) for p in sys.argv[1:]}))
