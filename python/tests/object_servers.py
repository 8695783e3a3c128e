"""Real servers on the loopback address for tests of clients that read objects over HTTP(S)
and S3.  Standard library only; everything listens on 127.0.0.1 (ports found by binding
port 0), keeps its files under a directory the caller gives, and is stopped when its
context manager exits (and, as a last resort, at interpreter exit).

    nginx_server(root_dir, tmp_dir, tls=False)      nginx serving root_dir (Range, ETag)
    swift_s3_server(tmp_dir)                        OpenStack Swift + s3api + tempauth + memcached
    fault_http_server(root_dir)                     Python HTTP/1.1 file server with faults
    delay_proxy(host, port, delay_s, bytes_per_s)   TCP proxy adding latency and a bandwidth cap

Nothing here changes network settings; the programs are the Debian ones (absolute paths).
"""
import atexit
import contextlib
import email.utils
import http.client
import http.server
import os
import posixpath
import queue
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import urllib.parse

LOOPBACK = "127.0.0.1"

NGINX = "/usr/sbin/nginx"
OPENSSL = "/usr/bin/openssl"
MEMCACHED = "/usr/bin/memcached"
AWS = "/usr/bin/aws"
CURL = "/usr/bin/curl"
SYSTEM_PYTHON = "/usr/bin/python3"
SWIFT_PROXY = "/usr/bin/swift-proxy-server"
SWIFT_ACCOUNT = "/usr/bin/swift-account-server"
SWIFT_CONTAINER = "/usr/bin/swift-container-server"
SWIFT_OBJECT = "/usr/bin/swift-object-server"

NGINX_PROGRAMS = (NGINX,)
NGINX_TLS_PROGRAMS = (NGINX, OPENSSL)
SWIFT_PROGRAMS = (SYSTEM_PYTHON, MEMCACHED, SWIFT_PROXY, SWIFT_ACCOUNT, SWIFT_CONTAINER,
                  SWIFT_OBJECT)
SWIFT_S3_PROGRAMS = SWIFT_PROGRAMS + (AWS,)


class ServerStartError(RuntimeError):
    """A server did not come up; the message carries its logs."""


def missing_programs(*paths):
    """The paths (of those given) that are not executable files."""
    return [p for p in paths if not (os.path.isfile(p) and os.access(p, os.X_OK))]


def swift_missing():
    """Programs or Python modules the Swift server needs that are absent: [] when usable."""
    missing = missing_programs(*SWIFT_PROGRAMS)
    if not missing:
        probe = subprocess.run(
            [SYSTEM_PYTHON, "-c", "import swift.common.middleware.s3api.s3api, "
             "swift.common.ring.builder"], capture_output=True)
        if probe.returncode != 0:
            missing.append("python3-swift (swift.common.middleware.s3api)")
    return missing


# ---------------------------------------------------------------------------------------------
# ports and processes

def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1 (held open together while choosing)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((LOOPBACK, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port():
    return free_ports(1)[0]


def port_open(port, host=LOOPBACK, timeout=0.2):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _read_tail(path, limit=20000):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace")
    except OSError as e:
        return "(cannot read %s: %s)" % (path, e)


_LIVE = set()
_LIVE_LOCK = threading.Lock()


class _Proc:
    """A child in its own session/process group, stdout+stderr appended to log_path."""

    def __init__(self, name, argv, log_path, env=None, cwd=None):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True,
                                          close_fds=True, env=env, cwd=cwd)
        self.pid = self.popen.pid
        with _LIVE_LOCK:
            _LIVE.add(self)

    def alive(self):
        return self.popen.returncode is None and not self._exited()

    def _exited(self):
        # WNOWAIT: leave the leader a zombie so its process group id cannot be reused before
        # the group is killed.
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) \
                is not None
        except ChildProcessError:
            return True

    def _killpg(self, sig):
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, graceful=True, timeout=5.0):
        """SIGTERM (graceful) or SIGKILL the whole process group; reap the leader."""
        if self.popen.returncode is None:
            if graceful:
                self._killpg(signal.SIGTERM)
                deadline = time.monotonic() + timeout
                while not self._exited() and time.monotonic() < deadline:
                    time.sleep(0.02)
            self._killpg(signal.SIGKILL)  # stragglers (e.g. nginx workers), or the leader
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        with _LIVE_LOCK:
            _LIVE.discard(self)

    def describe(self):
        state = "running" if self.alive() else "exited rc=%s" % self.popen.poll()
        return "%s (pid %d, %s): %s" % (self.name, self.pid, state, " ".join(self.argv))


@atexit.register
def _kill_leftovers():
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for p in procs:
        p.stop(graceful=False)


def wait_for_port(port, timeout, procs=(), what="server", log_paths=()):
    """Poll until 127.0.0.1:port accepts a connection; raise ServerStartError with the logs if
    a process in procs exits first or the timeout passes."""
    deadline = time.monotonic() + timeout
    while True:
        if port_open(port):
            return
        dead = [p for p in procs if not p.alive()]
        if dead or time.monotonic() > deadline:
            why = ("%s exited" % ", ".join(p.name for p in dead)) if dead else \
                "timed out after %.1f s" % timeout
            raise ServerStartError("%s on 127.0.0.1:%d did not start (%s)\n%s" % (
                what, port, why, _logs_text(procs, log_paths)))
        time.sleep(0.03)


def _logs_text(procs=(), log_paths=()):
    parts = [p.describe() for p in procs]
    seen = set()
    for path in [p.log_path for p in procs] + list(log_paths):
        if path in seen:
            continue
        seen.add(path)
        parts.append("----- %s -----\n%s" % (path, _read_tail(path)))
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# TLS certificates (openssl CLI)

_OPENSSL_CNF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = localhost
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[v3_leaf]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""


def make_tls_cert(directory):
    """A throw-away CA (ca.pem) and a server certificate signed by it (server.pem/server.key)
    for 127.0.0.1 and localhost.  Returns (ca_file, cert_file, key_file); ca_file is the CA
    bundle clients verify against (curl --cacert)."""
    os.makedirs(directory, exist_ok=True)
    cnf = os.path.join(directory, "openssl.cnf")
    with open(cnf, "w") as f:
        f.write(_OPENSSL_CNF)
    ca, ca_key = os.path.join(directory, "ca.pem"), os.path.join(directory, "ca.key")
    crt, key = os.path.join(directory, "server.pem"), os.path.join(directory, "server.key")
    csr = os.path.join(directory, "server.csr")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    env = dict(os.environ, OPENSSL_CONF=cnf)
    steps = [
        [OPENSSL, "req", "-x509", "-config", cnf, "-extensions", "v3_ca", *ec,
         "-keyout", ca_key, "-out", ca, "-days", "7", "-subj", "/CN=object_servers test CA"],
        [OPENSSL, "req", "-new", "-config", cnf, *ec, "-keyout", key, "-out", csr,
         "-subj", "/CN=localhost"],
        [OPENSSL, "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
         "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", "7",
         "-extfile", cnf, "-extensions", "v3_leaf", "-out", crt],
    ]
    for argv in steps:
        r = subprocess.run(argv, capture_output=True, env=env, cwd=directory)
        if r.returncode != 0:
            raise ServerStartError("openssl failed (%s): %s" % (
                " ".join(argv), (r.stderr or r.stdout).decode("utf-8", "replace")))
    return ca, crt, key


# ---------------------------------------------------------------------------------------------
# nginx

class NginxServer:
    """nginx (a single foreground process: master_process off) serving root_dir on
    127.0.0.1:port.

    Attributes: url, port, root_dir, dir (work dir), tls, ca_file/cert_file/key_file (tls),
    error_log, access_log.  stop() kills it (SIGKILL: a dying server);
    start() starts it again on the same port; logs() returns the error log."""

    def __init__(self, root_dir, tmp_dir, tls=False, port=None):
        self.root_dir = os.path.abspath(root_dir)
        self.tls = bool(tls)
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="nginx-", dir=tmp_dir)
        self.error_log = os.path.join(self.dir, "error.log")
        self.access_log = os.path.join(self.dir, "access.log")
        self.conf = os.path.join(self.dir, "nginx.conf")
        self.ca_file = self.cert_file = self.key_file = None
        if self.tls:
            self.ca_file, self.cert_file, self.key_file = make_tls_cert(
                os.path.join(self.dir, "tls"))
        self._proc = None
        self._write_conf()

    @property
    def url(self):
        return "%s://%s:%d" % ("https" if self.tls else "http", LOOPBACK, self.port)

    def _write_conf(self):
        d = self.dir
        for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            os.makedirs(os.path.join(d, "temp", sub), exist_ok=True)
        # One process (no master/worker split): SIGKILL then leaves no orphaned workers, and
        # it keeps our uid, so it can read pytest's 0700 tmp dirs when we are root.
        ssl = ""
        if self.tls:
            ssl = ("    ssl_certificate %s;\n    ssl_certificate_key %s;\n"
                   "    ssl_protocols TLSv1.2 TLSv1.3;\n" % (self.cert_file, self.key_file))
        conf = (
            "daemon off;\nmaster_process off;\nworker_processes 1;\n"
            "pid %(d)s/nginx.pid;\nlock_file %(d)s/nginx.lock;\n"
            "error_log %(d)s/error.log notice;\n"
            "events { worker_connections 512; }\n"
            "http {\n"
            "  types { text/html html; text/plain txt; }\n"
            "  default_type application/octet-stream;\n"
            "  access_log %(d)s/access.log;\n"
            "  client_body_temp_path %(d)s/temp/client_body;\n"
            "  proxy_temp_path %(d)s/temp/proxy;\n"
            "  fastcgi_temp_path %(d)s/temp/fastcgi;\n"
            "  uwsgi_temp_path %(d)s/temp/uwsgi;\n"
            "  scgi_temp_path %(d)s/temp/scgi;\n"
            "  sendfile on;\n  keepalive_timeout 60s;\n  keepalive_requests 100000;\n"
            "  server_tokens off;\n"
            "  server {\n"
            "    listen %(host)s:%(port)d%(ssl_flag)s;\n"
            "    server_name localhost;\n"
            "%(ssl)s"
            "    root %(root)s;\n"
            "    autoindex off;\n"
            "    etag on;\n"
            "  }\n"
            "}\n") % dict(d=d, host=LOOPBACK, port=self.port,
                          ssl_flag=" ssl" if self.tls else "", ssl=ssl, root=self.root_dir)
        with open(self.conf, "w") as f:
            f.write(conf)

    def running(self):
        return self._proc is not None and self._proc.alive()

    def start(self, timeout=15.0):
        if self.running():
            return
        self._wait_port_closed(5.0)
        argv = [NGINX, "-p", self.dir + "/", "-c", self.conf, "-e", self.error_log]
        last = None
        for _attempt in range(3):
            self._proc = _Proc("nginx", argv, os.path.join(self.dir, "stderr.log"), cwd=self.dir)
            try:
                wait_for_port(self.port, timeout, [self._proc], "nginx", [self.error_log])
                return
            except ServerStartError as e:
                last = e
                self._proc.stop(graceful=False)
                self._proc = None
                if "Address already in use" not in _read_tail(self.error_log):
                    break
                time.sleep(0.5)
        raise last

    def stop(self):
        """Kill nginx (SIGKILL to its process group) and wait until the port is closed."""
        if self._proc is not None:
            self._proc.stop(graceful=False)
            self._proc = None
        self._wait_port_closed(5.0)

    def close(self):
        if self._proc is not None:
            self._proc.stop(graceful=True, timeout=3.0)
            self._proc = None

    def _wait_port_closed(self, timeout):
        deadline = time.monotonic() + timeout
        while port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.02)

    def logs(self):
        return _logs_text([self._proc] if self._proc else [], [self.error_log])


@contextlib.contextmanager
def nginx_server(root_dir, tmp_dir, tls=False):
    """nginx serving root_dir statically on 127.0.0.1 (Range requests, ETag, no autoindex).
    Yields a NginxServer (.url, .ca_file, .stop(), .start())."""
    server = NginxServer(root_dir, tmp_dir, tls=tls)
    try:
        server.start()
        yield server
    finally:
        server.close()


# ---------------------------------------------------------------------------------------------
# OpenStack Swift + s3api

_SWIFT_WRAPPER = """\
import logging, runpy, sys
import swift.common.utils as utils
class _NoSyslog(logging.Handler):
    # logs go to the console handler (-v: stderr, redirected to a file), never to syslog
    def __init__(self, *args, **kwargs):
        logging.Handler.__init__(self)
    def emit(self, record):
        pass
utils.ThreadSafeSysLogHandler = _NoSyslog
script = sys.argv[1]
sys.argv = [script] + sys.argv[2:]
sys.path.pop(0)  # the wrapper's directory
runpy.run_path(script, run_name="__main__")
"""

_RING_SCRIPT = """\
import sys
from swift.common.ring import RingBuilder
etc = sys.argv[1]
for kind, port in zip(("account", "container", "object"), sys.argv[2:5]):
    builder = RingBuilder(6, 1, 1)
    builder.add_dev({"id": 0, "region": 1, "zone": 1, "ip": "127.0.0.1", "port": int(port),
                     "replication_ip": "127.0.0.1", "replication_port": int(port),
                     "device": "d1", "weight": 1.0, "meta": ""})
    builder.rebalance()
    builder.save("%s/%s.builder" % (etc, kind))
    builder.get_ring().save("%s/%s.ring.gz" % (etc, kind))
"""

_STORAGE_CONF = """\
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = {port}
workers = 0
bind_timeout = 3
user = {user}
swift_dir = {etc}
devices = {devices}
mount_check = false
disable_fallocate = true
fallocate_reserve = 0
log_level = {log_level}
log_name = {kind}-server

[pipeline:main]
pipeline = healthcheck {kind}-server

[app:{kind}-server]
use = egg:swift#{kind}

[filter:healthcheck]
use = egg:swift#healthcheck
"""

_PROXY_CONF = """\
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = {port}
workers = 0
bind_timeout = 3
user = {user}
swift_dir = {etc}
log_level = {log_level}
log_name = proxy-server

[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo versioned_writes proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true
allow_account_management = true

[filter:tempauth]
use = egg:swift#tempauth
reseller_prefix = AUTH_
user_{account}_{user_name} = {secret} .admin

[filter:s3api]
use = egg:swift#s3api
location = {region}
s3_acl = false
dns_compliant_bucket_names = true

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:{memcached_port}

[filter:catch_errors]
use = egg:swift#catch_errors

[filter:gatekeeper]
use = egg:swift#gatekeeper

[filter:healthcheck]
use = egg:swift#healthcheck

[filter:proxy-logging]
use = egg:swift#proxy_logging

[filter:listing_formats]
use = egg:swift#listing_formats

[filter:copy]
use = egg:swift#copy

[filter:slo]
use = egg:swift#slo

[filter:dlo]
use = egg:swift#dlo

[filter:versioned_writes]
use = egg:swift#versioned_writes
"""


def _http_status(port, path, timeout=2.0):
    """Status of GET http://127.0.0.1:port/path, or None when it cannot be reached."""
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


class SwiftS3Server:
    """An all-in-one Swift (account, container, object, proxy with s3api + tempauth) and a
    memcached, all on 127.0.0.1, data under tmp_dir.

    Attributes: endpoint ("http://127.0.0.1:PORT"), access_key ("test:tester"),
    secret_key ("testing"), region ("us-east-1"), dir, log_dir, ports (dict name->port),
    startup_s.  Methods: env(), aws(*args), logs()."""

    ACCOUNT = "test"
    USER = "tester"
    SECRET = "testing"
    REGION = "us-east-1"

    def __init__(self, tmp_dir, log_level="INFO"):
        self.dir = tempfile.mkdtemp(prefix="swift-", dir=tmp_dir)
        self.etc = os.path.join(self.dir, "etc")
        self.devices = os.path.join(self.dir, "devices")
        self.log_dir = os.path.join(self.dir, "logs")
        self.aws_dir = os.path.join(self.dir, "aws")
        for d in (self.etc, os.path.join(self.devices, "d1"), self.log_dir, self.aws_dir):
            os.makedirs(d, exist_ok=True)
        self.log_level = log_level
        self.access_key = "%s:%s" % (self.ACCOUNT, self.USER)
        self.secret_key = self.SECRET
        self.region = self.REGION
        names = ("proxy", "account", "container", "object", "memcached")
        self.ports = dict(zip(names, free_ports(len(names))))
        self.endpoint = "http://%s:%d" % (LOOPBACK, self.ports["proxy"])
        self.startup_s = None
        self._procs = []

    # -- configuration ----------------------------------------------------------------------
    def _write_confs(self):
        user = "root" if os.geteuid() == 0 else _current_user()
        common = dict(user=user, etc=self.etc, devices=self.devices, log_level=self.log_level)
        for kind in ("account", "container", "object"):
            with open(os.path.join(self.etc, "%s-server.conf" % kind), "w") as f:
                f.write(_STORAGE_CONF.format(kind=kind, port=self.ports[kind], **common))
        with open(os.path.join(self.etc, "proxy-server.conf"), "w") as f:
            f.write(_PROXY_CONF.format(
                port=self.ports["proxy"], memcached_port=self.ports["memcached"],
                account=self.ACCOUNT, user_name=self.USER, secret=self.SECRET,
                region=self.region, **common))

    def _log(self, name):
        return os.path.join(self.log_dir, name + ".log")

    def _spawn(self, name, argv):
        proc = _Proc(name, argv, self._log(name), env=self._server_env(), cwd=self.dir)
        self._procs.append(proc)
        return proc

    def _server_env(self):
        env = dict(os.environ)
        for k in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP"):
            env.pop(k, None)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def _swift(self, kind, program):
        conf = os.path.join(self.etc, "%s-server.conf" % kind)
        return self._spawn(kind, [SYSTEM_PYTHON, self._wrapper, program, conf, "-v"])

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, timeout=60.0, attempts=3):
        """Start memcached, build the rings, start the four Swift servers; wait until each
        answers (memcached: 'version'; Swift: GET /healthcheck).  A port taken between
        choosing and binding it makes it start again on fresh ports (attempts in all)."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        for attempt in range(attempts):
            try:
                self._start_once(deadline)
                self.startup_s = time.monotonic() - t0
                return
            except ServerStartError:
                logs = self.logs()
                self.close()
                bind_failed = any(m in logs for m in (
                    "Could not bind", "Address already in use", "failed to listen"))
                if not bind_failed or attempt == attempts - 1 or time.monotonic() > deadline:
                    raise
                names = list(self.ports)
                self.ports = dict(zip(names, free_ports(len(names))))
                self.endpoint = "http://%s:%d" % (LOOPBACK, self.ports["proxy"])
                os.makedirs(os.path.join(self.log_dir, "failed-%d" % attempt))
                for n in os.listdir(self.log_dir):
                    if n.endswith(".log"):
                        os.rename(os.path.join(self.log_dir, n),
                                  os.path.join(self.log_dir, "failed-%d" % attempt, n))

    def _start_once(self, deadline):
        self._write_confs()
        self._wrapper = os.path.join(self.etc, "run_swift_server.py")
        with open(self._wrapper, "w") as f:
            f.write(_SWIFT_WRAPPER)
        memcached = self._spawn("memcached", [
            MEMCACHED, "-l", LOOPBACK, "-p", str(self.ports["memcached"]), "-U", "0",
            "-m", "32", "-c", "256", "-t", "2"] + (["-u", "root"] if os.geteuid() == 0 else []))
        ring_script = os.path.join(self.etc, "make_rings.py")
        with open(ring_script, "w") as f:
            f.write(_RING_SCRIPT)
        rings = self._spawn("rings", [SYSTEM_PYTHON, ring_script, self.etc,
                                      str(self.ports["account"]), str(self.ports["container"]),
                                      str(self.ports["object"])])
        storage = [self._swift("account", SWIFT_ACCOUNT),
                   self._swift("container", SWIFT_CONTAINER),
                   self._swift("object", SWIFT_OBJECT)]
        # the proxy loads the rings when it starts: wait for them
        while rings.popen.poll() is None:
            if time.monotonic() > deadline:
                raise ServerStartError("building the Swift rings timed out\n" + self.logs())
            time.sleep(0.02)
        if rings.popen.returncode != 0:
            raise ServerStartError("building the Swift rings failed\n" + self.logs())
        self._procs.remove(rings)
        rings.stop()
        proxy = self._swift("proxy", SWIFT_PROXY)
        self._wait_memcached(memcached, deadline)
        for proc in storage + [proxy]:
            self._wait_healthy(proc, deadline)

    def _wait_memcached(self, proc, deadline):
        port = self.ports["memcached"]
        while True:
            if proc.alive():
                try:
                    with socket.create_connection((LOOPBACK, port), timeout=1.0) as s:
                        s.sendall(b"version\r\n")
                        if s.recv(100).startswith(b"VERSION"):
                            return
                except OSError:
                    pass
            else:
                raise ServerStartError("memcached exited during startup\n" + self.logs())
            if time.monotonic() > deadline:
                raise ServerStartError("memcached not answering on 127.0.0.1:%d in time\n%s"
                                       % (port, self.logs()))
            time.sleep(0.03)

    def _wait_healthy(self, proc, deadline):
        port = self.ports[proc.name]
        while True:
            if _http_status(port, "/healthcheck") == 200:
                return
            if not proc.alive():
                raise ServerStartError("swift %s server exited during startup\n%s" % (
                    proc.name, self.logs()))
            if time.monotonic() > deadline:
                raise ServerStartError("swift %s server not healthy on 127.0.0.1:%d in time\n%s"
                                       % (proc.name, port, self.logs()))
            time.sleep(0.05)

    def close(self):
        for proc in reversed(self._procs):
            proc.stop(graceful=True, timeout=3.0)
        self._procs = []

    def logs(self):
        paths = sorted(os.path.join(self.log_dir, n) for n in os.listdir(self.log_dir)
                       if n.endswith(".log"))
        return _logs_text(self._procs, paths)

    # -- clients ----------------------------------------------------------------------------
    def env(self):
        """os.environ plus credentials/region for AWS clients; config files pointed at paths
        that do not exist so no user configuration is read."""
        env = dict(os.environ)
        for k in list(env):  # no profile, session token, endpoint... from the caller
            if k.startswith("AWS_"):
                del env[k]
        env.update({
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_CONFIG_FILE": os.path.join(self.aws_dir, "no-such-config"),
            "AWS_SHARED_CREDENTIALS_FILE": os.path.join(self.aws_dir, "no-such-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_PAGER": "",
            "AWS_CLI_AUTO_PROMPT": "off",
        })
        return env

    def aws(self, *args, endpoint=None, timeout=120, input=None):
        """Run /usr/bin/aws --endpoint-url <endpoint> *args with env(); return stdout (str).
        endpoint overrides self.endpoint (e.g. a delay_proxy in front of the proxy server).
        Raises AwsCliError (a RuntimeError: rc, stdout, stderr; the message also has the
        tail of the proxy log) when it fails."""
        argv = [AWS, "--endpoint-url", endpoint or self.endpoint, *[str(a) for a in args]]
        r = subprocess.run(argv, env=self.env(), capture_output=True, timeout=timeout,
                           input=input, cwd=self.dir)
        if r.returncode != 0:
            raise AwsCliError(argv, r.returncode, r.stdout.decode("utf-8", "replace"),
                              r.stderr.decode("utf-8", "replace"),
                              _read_tail(self._log("proxy"), 3000))
        return r.stdout.decode("utf-8", "replace")


class AwsCliError(RuntimeError):
    def __init__(self, argv, returncode, stdout, stderr, server_log=""):
        self.argv, self.returncode, self.stdout, self.stderr = argv, returncode, stdout, stderr
        super().__init__("%s failed (rc %d)\nstdout: %s\nstderr: %s\n--- proxy log tail ---\n%s"
                         % (" ".join(argv), returncode, stdout, stderr, server_log))


def _current_user():
    import pwd
    return pwd.getpwuid(os.geteuid()).pw_name


@contextlib.contextmanager
def swift_s3_server(tmp_dir, log_level="INFO"):
    """All-in-one OpenStack Swift with the S3 API on 127.0.0.1 (path-style addressing).
    Yields a SwiftS3Server (.endpoint, .access_key, .secret_key, .region, .env(), .aws())."""
    server = SwiftS3Server(tmp_dir, log_level=log_level)
    try:
        server.start()
        yield server
    finally:
        server.close()


# ---------------------------------------------------------------------------------------------
# fault-injecting HTTP file server

class _FaultHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FaultHTTP/1.0"
    sys_version = ""
    timeout = 60  # idle keep-alive connections are closed after this

    def log_message(self, fmt, *args):  # no per-request logging
        pass

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.state._track(self.connection, True)

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass
        self.server.state._track(self.connection, False)

    def do_GET(self):
        self._serve(head=False)

    def do_HEAD(self):
        self._serve(head=True)

    def _simple(self, status, body=b"", headers=(), head=False):
        body = body or (b"%d %s\n" % (status, http.client.responses.get(status, "").encode()))
        # Counted before the answer is sent: a client that has read it sees the count.
        self.server.state._count(status)
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _serve(self, head):
        st = self.server.state
        st._enter()
        try:
            delay = st.delay_s
            if delay:
                time.sleep(delay)
            fault = st._take_fault()
            if fault in ("reset", "close"):
                self.close_connection = True
                try:
                    if fault == "reset":  # abortive close: the client gets an RST
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                   struct.pack("ii", 1, 0))
                        # detach: the makefile()s keep the socket object open otherwise
                        os.close(self.connection.detach())
                    else:  # orderly close (FIN): the client sees an empty reply
                        self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if fault is not None:
                headers = [("Retry-After", "0")] if fault == 503 else []
                self._simple(fault, headers=headers, head=head)
                return
            self._serve_file(head)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            st._leave()

    def _serve_file(self, head):
        st = self.server.state
        url_path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if st._is_not_found(url_path):
            self._simple(404, head=head)
            return
        rel = posixpath.normpath("/" + url_path).lstrip("/")
        full = os.path.join(st.root_dir, *[p for p in rel.split("/") if p])
        if not rel or not os.path.isfile(full):
            self._simple(404, head=head)
            return
        try:
            f = open(full, "rb")
        except OSError:
            self._simple(404, head=head)
            return
        with f:
            fs = os.fstat(f.fileno())
            size = fs.st_size
            etag = '"%x-%x"' % (size, fs.st_mtime_ns)
            if_match = self.headers.get("If-Match")
            if if_match is not None and if_match.strip() != "*":
                tags = [t.strip() for t in if_match.split(",")]
                if etag not in tags:
                    self._simple(412, head=head, headers=[("ETag", etag)])
                    return
            start, end, status = 0, size - 1, 200
            rng = self.headers.get("Range")
            if rng is not None:
                parsed = _parse_range(rng, size)
                if parsed == "unsatisfiable":
                    self._simple(416, head=head, headers=[("Content-Range", "bytes */%d" % size),
                                                          ("ETag", etag)])
                    return
                if parsed is not None:
                    start, end = parsed
                    status = 206
            length = max(0, end - start + 1)
            st._count(status)  # before the answer, as in _simple
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", etag)
            self.send_header("Last-Modified", email.utils.formatdate(fs.st_mtime, usegmt=True))
            if status == 206:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
            self.end_headers()
            if head or length == 0:
                return
            flips = st._corruptions(url_path)
            f.seek(start)
            pos, left = start, length
            while left > 0:
                chunk = f.read(min(left, 256 * 1024))
                if not chunk:  # file shrank: keep the promised length
                    chunk = b"\0" * left
                chunk_end = pos + len(chunk)
                hits = [o for o in flips if pos <= o < chunk_end]
                if hits:
                    chunk = bytearray(chunk)
                    for o in hits:
                        chunk[o - pos] ^= 0xFF
                    chunk = bytes(chunk)
                self.wfile.write(chunk)
                pos, left = chunk_end, left - len(chunk)


def _parse_range(value, size):
    """(start, end) for a single 'bytes=a-b' / 'bytes=a-' / 'bytes=-n'; None to ignore the
    header (malformed or several ranges: serve the whole file); 'unsatisfiable' for 416."""
    value = value.strip()
    if not value.lower().startswith("bytes="):
        return None
    spec = value[6:].strip()
    if "," in spec or "-" not in spec:
        return None
    a, b = (s.strip() for s in spec.split("-", 1))
    try:
        if a == "":
            n = int(b)
            if n <= 0:
                return "unsatisfiable"
            return (max(0, size - n), size - 1) if size else "unsatisfiable"
        start = int(a)
        end = int(b) if b else None
    except ValueError:
        return None
    if start < 0 or (end is not None and end < start):
        return None
    if start >= size:
        return "unsatisfiable"
    return start, size - 1 if end is None else min(end, size - 1)


class _FaultState:
    def __init__(self, root_dir):
        self.root_dir = os.path.abspath(root_dir)
        self.lock = threading.Lock()
        self.delay_s = 0.0
        self.requests = 0
        self.resets = 0
        self.status_counts = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self._fail = []          # [remaining, status]
        self._reset = []         # "reset" | "close", one per request to drop
        self._not_found = set()
        self._corrupt = []       # (suffix, offset)
        self._conns = set()

    def _track(self, conn, add):
        with self.lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _enter(self):
        with self.lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self):
        with self.lock:
            self.in_flight -= 1

    def _count(self, status):
        with self.lock:
            self.status_counts[status] = self.status_counts.get(status, 0) + 1

    def _take_fault(self):
        with self.lock:
            if self._reset:
                kind = self._reset.pop(0)
                self.resets += 1
                return kind
            while self._fail and self._fail[0][0] <= 0:
                self._fail.pop(0)
            if self._fail:
                self._fail[0][0] -= 1
                return self._fail[0][1]
            return None

    def _is_not_found(self, path):
        with self.lock:
            return any(path.endswith(s) for s in self._not_found)

    def _corruptions(self, path):
        with self.lock:
            return [o for s, o in self._corrupt if path.endswith(s)]


class FaultHTTPServer:
    """Handle on a running fault server.  url; delay_s (settable); fail_next(n, status=503);
    reset_next(n); not_found(path_suffix); corrupt(path_suffix, offset); clear_faults();
    counters requests, status_counts, max_in_flight, resets; reset_counters()."""

    def __init__(self, root_dir):
        self._state = _FaultState(root_dir)
        self._httpd = _ThreadingServer((LOOPBACK, 0), _FaultHandler)
        self._httpd.state = self._state
        self.port = self._httpd.server_address[1]
        self.url = "http://%s:%d" % (LOOPBACK, self.port)
        self.root_dir = self._state.root_dir
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                         kwargs={"poll_interval": 0.05},
                                         name="fault-http-%d" % self.port, daemon=True)
        self._thread.start()

    # faults
    def fail_next(self, n, status=503):
        with self._state.lock:
            self._state._fail.append([int(n), int(status)])

    def reset_next(self, n, rst=True):
        """Drop the connection without answering for the next n requests: with an RST
        (rst=True, the client reads ECONNRESET) or an orderly close (rst=False: an empty
        reply)."""
        with self._state.lock:
            self._state._reset.extend(["reset" if rst else "close"] * int(n))

    def not_found(self, path_suffix):
        with self._state.lock:
            self._state._not_found.add(path_suffix)

    def corrupt(self, path_suffix, offset):
        with self._state.lock:
            self._state._corrupt.append((path_suffix, int(offset)))

    def clear_faults(self):
        with self._state.lock:
            self._state._fail.clear()
            self._state._reset.clear()
            self._state._not_found.clear()
            self._state._corrupt.clear()
        self._state.delay_s = 0.0

    def reset_counters(self):
        with self._state.lock:
            self._state.requests = 0
            self._state.resets = 0
            self._state.status_counts = {}
            self._state.max_in_flight = self._state.in_flight

    # settings and counters
    @property
    def delay_s(self):
        return self._state.delay_s

    @delay_s.setter
    def delay_s(self, value):
        self._state.delay_s = float(value)

    @property
    def requests(self):
        return self._state.requests

    @property
    def resets(self):
        return self._state.resets

    @property
    def status_counts(self):
        with self._state.lock:
            return dict(self._state.status_counts)

    @property
    def max_in_flight(self):
        return self._state.max_in_flight

    @property
    def in_flight(self):
        return self._state.in_flight

    def close(self):
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._state.lock:
            conns = list(self._state._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(5)


class _ThreadingServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


@contextlib.contextmanager
def fault_http_server(root_dir):
    """Threaded HTTP/1.1 file server for root_dir on 127.0.0.1 with programmable faults.
    Yields a FaultHTTPServer."""
    server = FaultHTTPServer(root_dir)
    try:
        yield server
    finally:
        server.close()


# ---------------------------------------------------------------------------------------------
# delaying, bandwidth-capping TCP proxy

class TokenBucket:
    """Shared byte budget: rate bytes/s, burst capacity; take(n) blocks until n bytes are
    allowed (debt-based, so many takers together never exceed the rate)."""

    def __init__(self, rate, burst=None):
        self.rate = float(rate)
        self.capacity = float(burst if burst is not None else max(16384.0, self.rate / 20.0))
        self.tokens = self.capacity
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def take(self, n, stop_event=None):
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
            self.last = now
            self.tokens -= n
            wait = -self.tokens / self.rate if self.tokens < 0 else 0.0
        if wait > 0:
            if stop_event is not None:
                stop_event.wait(wait)
            else:
                time.sleep(wait)


class DelayProxy:
    """TCP proxy on 127.0.0.1 to (target_host, target_port).

    Client->server bytes go through a latency line: each chunk is forwarded delay_s after it
    arrived (so every HTTP request reaches the server delay_s late; chunks do not add up).
    Server->client bytes of all connections together are capped at bytes_per_s by one token
    bucket (None: no cap).  Attributes: port, url, delay_s and bytes_per_s (both may be
    changed while it runs), connections (accepted so far), active (open now)."""

    def __init__(self, target_host, target_port, delay_s=0.02, bytes_per_s=None):
        self.target = (target_host, int(target_port))
        self.delay_s = float(delay_s)
        self._bucket = None
        self._chunk = 65536
        self.bytes_per_s = bytes_per_s
        self.connections = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._socks = set()
        self._threads = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((LOOPBACK, 0))
        self._listener.listen(128)
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self.url = "http://%s:%d" % (LOOPBACK, self.port)
        self._accept_thread = threading.Thread(target=self._accept_loop, daemon=True,
                                               name="delay-proxy-%d" % self.port)
        self._accept_thread.start()

    @property
    def bytes_per_s(self):
        return self._bucket.rate if self._bucket is not None else None

    @bytes_per_s.setter
    def bytes_per_s(self, rate):
        if not rate:
            self._bucket, self._chunk = None, 65536
        else:
            # Small reads so that, as on a real bottleneck link, the bytes of every response in
            # flight interleave: 16 KB at most (2,500 chunks a second at 40 MB/s). With 64 KB
            # chunks a 116 KB frame came in two bursts, and between bursts every response in
            # flight could be waiting for its first byte while the link was in fact busy.
            self._chunk = int(max(1024, min(16384, rate / 50)))
            # A burst of one chunk: a link cannot bank the time it was idle (a bucket of 1 MB
            # at 20 MB/s let 50 ms of traffic through at once after an idle spell, so the mean
            # rate held at the cap while the link sat idle a fifth of the time).
            self._bucket = TokenBucket(rate, burst=self._chunk)

    @property
    def active(self):
        with self._lock:
            return len(self._socks) // 2

    def _spawn(self, target, *args):
        t = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads = [x for x in self._threads if x.is_alive()]
            self._threads.append(t)
        t.start()

    def _accept_loop(self):
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                time.sleep(0.01)
                continue
            self.connections += 1
            self._spawn(self._connect, client)

    def _connect(self, client):
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            _close_quietly(client)
            return
        for s in (client, upstream):
            s.settimeout(None)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            if self._stop.is_set():
                _close_quietly(client)
                _close_quietly(upstream)
                return
            self._socks.update((client, upstream))
        done = [0]
        line = queue.Queue()
        self._spawn(self._read_up, client, line)
        self._spawn(self._write_up, line, client, upstream, done)
        self._pump_down(upstream, client, done)

    def _read_up(self, client, line):
        """client -> latency line: (time due, bytes); None data marks EOF."""
        try:
            while not self._stop.is_set():
                data = client.recv(65536)
                if not data:
                    break
                line.put((time.monotonic() + self.delay_s, data))
        except OSError:
            pass
        finally:
            # EOF (or error, or closing): forward what is queued, then half-close upstream
            line.put((time.monotonic() + self.delay_s, None))

    def _write_up(self, line, client, upstream, done):
        try:
            while not self._stop.is_set():
                due, data = line.get()
                wait = due - time.monotonic()
                if wait > 0 and self._stop.wait(wait):
                    break
                if data is None:
                    break
                upstream.sendall(data)
        except OSError:
            pass
        self._half_done(upstream, client, upstream, done)

    def _pump_down(self, upstream, client, done):
        try:
            while not self._stop.is_set():
                data = upstream.recv(self._chunk)
                if not data:
                    break
                bucket = self._bucket
                if bucket is not None:
                    bucket.take(len(data), self._stop)
                if self._stop.is_set():
                    break
                client.sendall(data)
        except OSError:
            pass
        self._half_done(client, client, upstream, done)

    def _half_done(self, dst, client, upstream, done):
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        with self._lock:
            done[0] += 1
            last = done[0] == 2
            if last:
                self._socks.discard(client)
                self._socks.discard(upstream)
        if last:
            _close_quietly(client)
            _close_quietly(upstream)

    def close(self):
        self._stop.set()
        _close_quietly(self._listener)
        with self._lock:
            socks = list(self._socks)
            threads = list(self._threads)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._accept_thread.join(5)
        for t in threads:
            t.join(5)
        for s in socks:
            _close_quietly(s)


def _close_quietly(s):
    try:
        s.close()
    except OSError:
        pass


@contextlib.contextmanager
def delay_proxy(target_host, target_port, delay_s=0.02, bytes_per_s=None):
    """TCP proxy on 127.0.0.1 forwarding to target_host:target_port, adding delay_s to every
    client->server chunk and capping the total server->client rate at bytes_per_s.
    Yields a DelayProxy (.port, .url)."""
    proxy = DelayProxy(target_host, target_port, delay_s=delay_s, bytes_per_s=bytes_per_s)
    try:
        yield proxy
    finally:
        proxy.close()
