"""`tembo serve --unixsocket`: clients over a Unix domain socket, as
Redis's `unixsocket` (Redis.pm's unix-socket tests wanted one), beside the
TCP port.

    TEMBO_BIN=target/debug/tembo python3 -m pytest -q tests/server/test_unix_socket.py
"""

import os
import socket
import signal
import stat

import pytest
import redis

from test_acl import own_server  # noqa: F401  (a fixture)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.mark.parametrize("protocol", [2, 3])
def test_clients_over_the_unix_socket(own_server, protocol):
    start, d = own_server
    path = f"{d}/tembo.sock"
    p, port = start("--unixsocket", path, "--unixsocketperm", "700")
    assert port, p.stdout.read().decode() if p.poll() is not None else "tembo serve did not start"
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    c = redis.Redis(unix_socket_path=path, decode_responses=True, protocol=protocol)
    assert c.ping()
    assert c.set("k", "v")
    pipe = c.pipeline(transaction=True)
    pipe.incr("n").incr("n").hset("h", "f", "1")
    assert pipe.execute() == [1, 2, 1]
    # What CLIENT LIST says of a Unix-socket client: Redis's `path:0` and flag U.
    me = c.client_info()
    assert me["addr"] == f"{path}:0" and me["laddr"] == f"{path}:0"
    assert "U" in me["flags"]
    assert c.config_get("unixsocket") == {"unixsocket": path}
    assert c.config_get("unixsocketperm") == {"unixsocketperm": "700"}
    with pytest.raises(redis.ResponseError, match="immutable"):
        c.config_set("unixsocket", f"{d}/other.sock")
    # The TCP port serves the same data.
    tcp = redis.Redis(port=port, decode_responses=True)
    assert tcp.get("k") == "v" and tcp.get("n") == "2"
    assert "U" not in tcp.client_info()["flags"]
    tcp.close()
    c.close()


def test_the_socket_is_taken_replaced_and_removed(own_server):
    start, d = own_server
    path = f"{d}/tembo.sock"
    first, port = start("--unixsocket", path)
    assert port
    # A second server may not take a socket a live one answers on.
    second, _ = start("--unixsocket", path)
    assert second.wait(30) != 0
    assert b"another server listens there" in second.stdout.read()
    c = redis.Redis(unix_socket_path=path)
    assert c.set("kept", "yes")
    c.close()
    # kill -9 leaves the socket file behind; the next server replaces it.
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    assert os.path.exists(path)
    third, port = start("--unixsocket", path)
    assert port
    c = redis.Redis(unix_socket_path=path)
    assert c.get("kept") == b"yes"
    c.close()
    # A clean stop removes it, as Redis does.
    third.terminate()
    assert third.wait(30) == 0
    assert not os.path.exists(path)


def test_a_file_with_data_or_bad_permissions_refuse_to_start(own_server):
    start, d = own_server
    plain = f"{d}/not-a-socket"
    with open(plain, "w") as f:
        f.write("data")
    p, _ = start("--unixsocket", plain)
    assert p.wait(30) != 0
    assert b"not a socket" in p.stdout.read()
    with open(plain) as f:
        assert f.read() == "data"
    # An empty file is a placeholder (Redis.pm's test helper makes one with
    # File::Temp): it is replaced, as Redis replaces anything there.
    empty = f"{d}/placeholder"
    open(empty, "w").close()
    p, port = start("--unixsocket", empty)
    assert port
    assert stat.S_ISSOCK(os.stat(empty).st_mode)
    c = redis.Redis(unix_socket_path=empty)
    assert c.ping()
    c.close()
    p.terminate()
    assert p.wait(30) == 0
    p, _ = start("--unixsocket", f"{d}/t.sock", "--unixsocketperm", "9x")
    assert p.wait(30) != 0
    assert b"unixsocketperm" in p.stdout.read()


def test_a_long_pipeline_sent_before_any_reply_is_read(own_server):
    # hiredis's throughput test writes its whole pipeline before reading:
    # the server must read on while its replies wait for the client, or
    # both wait on full socket buffers (a Unix socket's are small).
    start, d = own_server
    path = f"{d}/tembo.sock"
    _, port = start("--unixsocket", path)
    assert port
    c = redis.Redis(unix_socket_path=path)
    c.rpush("l", *[f"element-{i}" for i in range(500)])
    c.close()
    for n, request, reply_head in [(200_000, b"PING\r\n", b"+PONG\r\n"), (6_000, b"LRANGE l 0 -1\r\n", b"*500\r\n")]:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(60)
        s.connect(path)
        s.sendall(request * n)
        seen, tail = 0, b""
        while seen < n:
            chunk = s.recv(1 << 20)
            assert chunk, f"connection closed after {seen} of {n} replies"
            data = tail + chunk
            seen += data.count(reply_head)
            tail = data[-(len(reply_head) - 1):]
        s.close()
