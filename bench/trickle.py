#!/usr/bin/env python3
"""What one big request costs the server when it arrives in small pieces.

    bench/trickle.py PORT ARGS [CHUNK [PAUSE]]

Sends `SADD trickle m0 m1 ... m<ARGS-1>` to the server on 127.0.0.1:PORT,
CHUNK bytes at a time (default: all at once) with PAUSE seconds between
pieces (default 0.002), as a client on a slow link would; then prints the
reply, the server's CPU time for the request (user + system from /proc; the
server is found as the process whose command line has `--port PORT`) and
the wall time, and deletes the set. Run it with and without CHUNK: a
server that re-parses a request from its start at every read spends time
quadratic in the request's size on the trickled one.
"""

import os
import socket
import subprocess
import sys
import time


def cpu_ms(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 // os.sysconf("SC_CLK_TCK")


def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    chunk = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.002
    pid = int(subprocess.check_output(["pgrep", "-f", "--", f"--port {port}"]).split()[0])
    args = [b"SADD", b"trickle"] + [b"m%d" % i for i in range(n)]
    req = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    before, start = cpu_ms(pid), time.time()
    if chunk <= 0:
        s.sendall(req)
    else:
        for i in range(0, len(req), chunk):
            s.sendall(req[i : i + chunk])
            time.sleep(pause)
    reply = s.recv(100)
    print(f"{len(req)} bytes in {'one piece' if chunk <= 0 else f'{chunk}-byte pieces'}: reply {reply!r}, "
          f"server CPU {cpu_ms(pid) - before} ms, wall {time.time() - start:.2f} s")
    s.sendall(b"*2\r\n$3\r\nDEL\r\n$7\r\ntrickle\r\n")
    s.recv(100)


if __name__ == "__main__":
    main()
