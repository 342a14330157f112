#!/usr/bin/env python3
"""Helpers of rendezvous_netns_test.sh for the rendezvous root's guard (docs/net-transport.md, "Who may hold the port").

  rendezvous_guard.py flood HOST PORT N DEADLINE_S
      opens N TCP connections to HOST:PORT that never speak, prints "connected N", then waits until the root has
      closed each (end of stream) or DEADLINE_S passed, and prints "closed K of N in T s".
  rendezvous_guard.py sniff IFACE OUT STOP_FILE
      captures every frame on IFACE (AF_PACKET) into OUT until STOP_FILE exists (at most 60 s); OUT.ready exists
      once the capture socket is bound, so the caller starts its traffic after it.
  rendezvous_guard.py secret ID_FILE CAPTURE
      exits 0 when CAPTURE holds rendezvous frames ("DFRV") but neither the unique id's token (8 bytes) nor its
      secret (16 bytes), else prints what it found and exits 1.
"""
import os
import socket
import sys
import time


def flood(host, port, n, deadline_s):
    socks = [socket.create_connection((host, int(port)), timeout=10) for _ in range(int(n))]
    print(f"connected {len(socks)}", flush=True)
    t0 = time.time()
    open_ = list(socks)
    while open_ and time.time() - t0 < float(deadline_s):
        still = []
        for s in open_:
            s.settimeout(0.01)
            try:
                while True:
                    data = s.recv(4096)
                    if not data:
                        break  # closed by the root
            except (socket.timeout, BlockingIOError):
                still.append(s)
                continue
            except OSError:
                pass  # reset by the root
            s.close()
        open_ = still
    print(f"closed {len(socks) - len(open_)} of {len(socks)} in {time.time() - t0:.1f} s", flush=True)


def sniff(iface, out, stop_file):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(3))
    s.bind((iface, 0))
    s.settimeout(0.1)
    open(out + ".ready", "w").close()
    data = bytearray()
    t0 = time.time()
    while not os.path.exists(stop_file) and time.time() - t0 < 60:
        try:
            data += s.recv(65535)
        except socket.timeout:
            pass
    with open(out, "wb") as f:
        f.write(data)


def secret(id_file, capture):
    raw = bytes.fromhex(open(id_file).read().strip())
    rv = raw[32:]  # the rendezvous payload: magic 8, token 8, family 2, port 2, scope 4, address 16, secret 16
    token, key = rv[8:16], rv[40:56]
    data = open(capture, "rb").read()
    frames = data.count(b"DFRV")
    leaked = [name for name, b in (("token", token), ("secret", key)) if b in data]
    print(f"captured {len(data)} bytes, {frames} rendezvous frame headers; in clear: {', '.join(leaked) or 'nothing'}")
    sys.exit(0 if frames > 0 and not leaked else 1)


if __name__ == "__main__":
    {"flood": flood, "sniff": sniff, "secret": secret}[sys.argv[1]](*sys.argv[2:])
