"""Checks of the loopback test servers in object_servers.py with real clients (curl, aws,
urllib/http.client).  Each test skips, naming the program, when it is not installed."""
import http.client
import os
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

import object_servers as osrv


def require(*programs):
    missing = osrv.missing_programs(*programs)
    if missing:
        pytest.skip("not installed: %s" % ", ".join(missing))


def curl(*args, check=True):
    """Run curl; returns (exit code, headers text, body bytes)."""
    require(osrv.CURL)
    r = subprocess.run([osrv.CURL, "-sS", "--max-time", "20", "-D", "-", *args],
                       capture_output=True, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError("curl %s: rc %d: %s" % (args, r.returncode, r.stderr.decode()))
    head, _, body = r.stdout.partition(b"\r\n\r\n")
    return r.returncode, head.decode("latin-1"), body


def header(head, name):
    for line in head.split("\r\n")[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == name.lower():
            return v.strip()
    return None


def status_line(head):
    return int(head.split("\r\n", 1)[0].split()[1])


@pytest.fixture
def files(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    data = os.urandom(1 << 20)
    (root / "blob.bin").write_bytes(data)
    (root / "sub" / "small.txt").write_bytes(b"0123456789abcdefghij")
    return root, data


# ---------------------------------------------------------------------------------------------
# nginx

def test_nginx_range_etag_restart(files, tmp_path):
    require(*osrv.NGINX_PROGRAMS, osrv.CURL)
    root, data = files
    with osrv.nginx_server(root, tmp_path) as srv:
        assert srv.url.startswith("http://127.0.0.1:")
        rc, head, body = curl("-r", "1000-1999", srv.url + "/blob.bin")
        assert status_line(head) == 206
        assert body == data[1000:2000]
        assert header(head, "Content-Range") == "bytes 1000-1999/%d" % len(data)
        etag = header(head, "ETag")
        assert etag and etag.startswith('"')
        rc, head, body = curl(srv.url + "/sub/small.txt")
        assert status_line(head) == 200 and body == b"0123456789abcdefghij"
        # no directory listings
        rc, head, body = curl(srv.url + "/sub/")
        assert status_line(head) in (403, 404)
        # a dead server refuses connections; it comes back on the same port
        port = srv.port
        srv.stop()
        rc, _, _ = curl(srv.url + "/sub/small.txt", check=False)
        assert rc == 7  # couldn't connect
        srv.start()
        assert srv.port == port
        rc, head, body = curl("-r", "-10", srv.url + "/blob.bin")
        assert status_line(head) == 206 and body == data[-10:]
        assert header(head, "ETag") == etag
    assert not osrv.port_open(port)


def test_nginx_tls(files, tmp_path):
    require(*osrv.NGINX_TLS_PROGRAMS, osrv.CURL)
    root, data = files
    with osrv.nginx_server(root, tmp_path, tls=True) as srv:
        assert srv.url.startswith("https://127.0.0.1:") and os.path.isfile(srv.ca_file)
        rc, head, body = curl("--cacert", srv.ca_file, "-r", "5-14", srv.url + "/blob.bin")
        assert status_line(head) == 206 and body == data[5:15]
        localhost = srv.url.replace("127.0.0.1", "localhost")
        rc, head, body = curl("--cacert", srv.ca_file, "--resolve",
                              "localhost:%d:127.0.0.1" % srv.port, localhost + "/sub/small.txt")
        assert body == b"0123456789abcdefghij"
        # without the CA the certificate does not verify
        rc, _, _ = curl(srv.url + "/sub/small.txt", check=False)
        assert rc == 60
        # Python's ssl verifies it too
        ctx = ssl.create_default_context(cafile=srv.ca_file)
        with urllib.request.urlopen(srv.url + "/sub/small.txt", context=ctx, timeout=10) as r:
            assert r.read() == b"0123456789abcdefghij"


# ---------------------------------------------------------------------------------------------
# Swift + s3api

def test_swift_s3(tmp_path):
    missing = osrv.swift_missing() + osrv.missing_programs(osrv.AWS)
    if missing:
        pytest.skip("not installed: %s" % ", ".join(missing))
    data = os.urandom(300000)
    src = tmp_path / "upload.bin"
    src.write_bytes(data)
    with osrv.swift_s3_server(tmp_path) as s3:
        print("swift startup %.2f s" % s3.startup_s)
        assert s3.endpoint.startswith("http://127.0.0.1:")
        assert s3.access_key == "test:tester" and s3.secret_key == "testing"
        env = s3.env()
        assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == s3.region
        assert not os.path.exists(env["AWS_CONFIG_FILE"])
        s3.aws("s3", "mb", "s3://bucket")
        s3.aws("s3", "cp", str(src), "s3://bucket/prefix/upload.bin")
        assert "bucket" in s3.aws("s3", "ls")
        listing = s3.aws("s3", "ls", "s3://bucket/prefix/")
        assert "upload.bin" in listing and str(len(data)) in listing
        out = tmp_path / "range.bin"
        meta = s3.aws("s3api", "get-object", "--bucket", "bucket", "--key",
                      "prefix/upload.bin", "--range", "bytes=100-199", str(out))
        assert "bytes 100-199/%d" % len(data) in meta
        assert out.read_bytes() == data[100:200]
        with pytest.raises(osrv.AwsCliError) as err:
            s3.aws("s3api", "head-object", "--bucket", "bucket", "--key", "nope")
        assert "404" in err.value.stderr or "Not Found" in err.value.stderr
        # signed requests also work through the delay proxy (Host is the proxy's)
        host, port = s3.endpoint.rsplit("/", 1)[1].split(":")
        with osrv.delay_proxy(host, int(port), delay_s=0.05) as proxy:
            out2 = tmp_path / "range2.bin"
            s3.aws("s3api", "get-object", "--bucket", "bucket", "--key", "prefix/upload.bin",
                   "--range", "bytes=0-9", str(out2), endpoint=proxy.url)
            assert out2.read_bytes() == data[:10]
            assert proxy.connections >= 1
        proxy_port = s3.ports["proxy"]
    assert not osrv.port_open(proxy_port)


# ---------------------------------------------------------------------------------------------
# fault server

def _get(url, headers=None, timeout=10):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def http_get(port, path, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def test_fault_server_basics(files):
    root, data = files
    with osrv.fault_http_server(root) as srv:
        assert srv.url.startswith("http://127.0.0.1:")
        status, h, body = _get(srv.url + "/blob.bin", {"Range": "bytes=10-29"})
        assert status == 206 and body == data[10:30]
        assert h["Content-Range"] == "bytes 10-29/%d" % len(data)
        etag = h["ETag"]
        assert etag.startswith('"') and etag.endswith('"')
        status, h, body = _get(srv.url + "/blob.bin")
        assert status == 200 and body == data and h["ETag"] == etag
        status, _, body = _get(srv.url + "/blob.bin", {"Range": "bytes=-5"})
        assert status == 206 and body == data[-5:]
        status, h, _ = _get(srv.url + "/blob.bin", {"Range": "bytes=%d-" % (len(data) + 5)})
        assert status == 416
        # If-Match
        status, _, body = _get(srv.url + "/blob.bin", {"If-Match": etag, "Range": "bytes=0-3"})
        assert status == 206 and body == data[:4]
        status, _, _ = _get(srv.url + "/blob.bin", {"If-Match": '"other"'})
        assert status == 412
        assert _get(srv.url + "/missing")[0] == 404
        assert _get(srv.url + "/../../etc/passwd")[0] == 404
        # HEAD and keep-alive on one connection
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        conn.request("HEAD", "/blob.bin")
        r = conn.getresponse()
        assert r.status == 200 and int(r.getheader("Content-Length")) == len(data)
        assert r.read() == b""
        conn.request("GET", "/sub/small.txt", headers={"Range": "bytes=2-4"})
        r = conn.getresponse()
        assert r.status == 206 and r.read() == b"234"
        conn.close()
        # curl sees the same
        require(osrv.CURL)
        rc, head, body = curl("-r", "100-163", srv.url + "/blob.bin")
        assert status_line(head) == 206 and body == data[100:164]
        assert srv.status_counts[206] >= 4 and srv.requests >= 10


def test_fault_server_faults(files):
    root, data = files
    with osrv.fault_http_server(root) as srv:
        # fail_next: 503 + Retry-After: 0 for n requests, then normal
        srv.fail_next(2)
        for _ in range(2):
            status, h, body = _get(srv.url + "/sub/small.txt")
            assert status == 503 and h.get("Retry-After") == "0" and body
        assert _get(srv.url + "/sub/small.txt")[2] == b"0123456789abcdefghij"
        srv.fail_next(1, status=500)
        assert _get(srv.url + "/sub/small.txt")[0] == 500
        assert srv.status_counts[503] == 2 and srv.status_counts[500] == 1
        # not_found
        srv.not_found("small.txt")
        assert _get(srv.url + "/sub/small.txt")[0] == 404
        assert _get(srv.url + "/blob.bin", {"Range": "bytes=0-0"})[0] == 206
        # corrupt: one byte flipped where covered, length unchanged
        srv.corrupt("blob.bin", 500000)
        status, h, body = _get(srv.url + "/blob.bin", {"Range": "bytes=499990-500009"})
        assert status == 206 and len(body) == 20
        assert body[10] == data[500000] ^ 0xFF
        assert body[:10] == data[499990:500000] and body[11:] == data[500001:500010]
        assert _get(srv.url + "/blob.bin", {"Range": "bytes=0-99"})[2] == data[:100]
        full = _get(srv.url + "/blob.bin")[2]
        assert len(full) == len(data) and full != data
        assert sum(a != b for a, b in zip(full, data)) == 1
        # reset_next: connection closed without an answer
        srv.reset_next(1)
        with pytest.raises(ConnectionResetError):
            http_get(srv.port, "/blob.bin")
        assert srv.resets == 1
        require(osrv.CURL)
        srv.reset_next(1)
        rc, _, _ = curl(srv.url + "/blob.bin", check=False)
        assert rc == 56  # recv failure: connection reset by peer
        srv.reset_next(1, rst=False)
        rc, _, _ = curl(srv.url + "/blob.bin", check=False)
        assert rc == 52  # empty reply from server
        assert srv.resets == 3
        rc, head, body = curl("-r", "0-9", srv.url + "/blob.bin")
        assert body == data[:10]
        # delay and concurrency counters
        srv.clear_faults()
        srv.reset_counters()
        srv.delay_s = 0.3
        results = []

        def fetch():
            results.append(_get(srv.url + "/sub/small.txt")[0])
        threads = [threading.Thread(target=fetch) for _ in range(4)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [200] * 4
        assert time.monotonic() - t0 >= 0.3
        assert srv.max_in_flight >= 2
        assert srv.requests == 4


# ---------------------------------------------------------------------------------------------
# delay proxy

def test_delay_proxy_latency(files):
    root, data = files
    with osrv.fault_http_server(root) as srv, \
            osrv.delay_proxy("127.0.0.1", srv.port, delay_s=0.05) as proxy:
        assert proxy.url == "http://127.0.0.1:%d" % proxy.port
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        n = 6
        t0 = time.monotonic()
        for i in range(n):
            conn.request("GET", "/sub/small.txt", headers={"Range": "bytes=%d-%d" % (i, i)})
            r = conn.getresponse()
            assert r.status == 206 and r.read() == b"0123456789abcdefghij"[i:i + 1]
        elapsed = time.monotonic() - t0
        conn.close()
        assert elapsed >= n * 0.05 * 0.95, elapsed
        assert srv.requests == n  # one keep-alive connection carried all requests


def test_delay_proxy_bandwidth(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    data = os.urandom(2 * 1000 * 1000)
    (root / "two_mb.bin").write_bytes(data)
    with osrv.fault_http_server(root) as srv, \
            osrv.delay_proxy("127.0.0.1", srv.port, delay_s=0.0,
                             bytes_per_s=1000 * 1000) as proxy:
        # one 2 MB download through the 1 MB/s cap (curl)
        require(osrv.CURL)
        t0 = time.monotonic()
        rc, head, body = curl(proxy.url + "/two_mb.bin")
        elapsed = time.monotonic() - t0
        assert body == data
        assert elapsed >= 1.8, elapsed
        # two concurrent downloads share the cap: 2 x 1 MB at 1 MB/s total takes ~2 s
        out = {}

        def fetch(name, rng):
            out[name] = _get(proxy.url + "/two_mb.bin", {"Range": rng}, timeout=30)

        t0 = time.monotonic()
        threads = [threading.Thread(target=fetch, args=("a", "bytes=0-999999")),
                   threading.Thread(target=fetch, args=("b", "bytes=1000000-1999999"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        assert out["a"][2] + out["b"][2] == data
        assert elapsed >= 1.8, elapsed
        assert elapsed < 15, elapsed
