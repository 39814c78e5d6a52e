"""A secure producer in a process of its own, for tests that stop it with SIGSTOP:
``python tests/secure_procs.py CERT TRUST TOPIC``. Prints ``READY ENDPOINT ADDRESS``,
then sends a record every 5 ms (HEADs every 50 ms) until stdin closes."""

from __future__ import annotations

import sys
import threading

import dafka


def main(cert: str, trust: str, topic: str) -> int:
    done = threading.Event()
    with dafka.Producer(topic, cert=cert, trust=trust, min_acks=0, head_interval=0.05) as p:
        print(f"READY {p.endpoint} {p.address}", flush=True)
        threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
        i = 0
        while not done.wait(0.005):
            p.send(b"%08d" % i)
            i += 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
