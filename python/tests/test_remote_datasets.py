"""Datasets in object storage (docs/storage.md): sluice-train, sluice-shard and sluice.Loader
reading s3:// (OpenStack Swift's s3api, filled with awscli), https:// and http:// (nginx) the way
they read a local directory, bit for bit; and the faults: a server killed mid-epoch, 503 storms, a
404 shard, a corrupted byte in transit, the dataset replaced mid-run, a full cache disk, a stop.
Every server runs on 127.0.0.1 only (object_servers.py)."""
import glob
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest
import torch

import sluice
from object_servers import (NGINX_PROGRAMS, NGINX_TLS_PROGRAMS, delay_proxy, fault_http_server,
                            missing_programs, nginx_server, swift_missing, swift_s3_server)

TOOLS = os.path.join(os.path.dirname(sluice.__file__), "..", "..", "tools")
TRAIN = os.path.join(TOOLS, "sluice-train")
SHARD = os.path.join(TOOLS, "sluice-shard")


def _need(*programs):
    missing = missing_programs(*programs)
    if missing:
        pytest.skip("not installed: %s" % ", ".join(missing))
    if not os.path.exists(TRAIN):
        pytest.skip("sluice-train is not built beside this sluice package (%s)" % TRAIN)


def _env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.pop("SLUICE_CA_BUNDLE", None)
    env.update(extra or {})
    return env


def _train(data, out, tmp, extra_args=(), env=None, check=True, timeout=300):
    """Runs one epoch of sluice-train on `data` (shuffled, seeded), exporting the weights to
    `out`; returns the CompletedProcess."""
    args = [TRAIN, "--data", data, "--epochs", "1", "--shuffle", "--seed", "7", "--device",
            "cpu", "--quiet", "--report=false", "--ceilings=false", "--threads", "2",
            "--export-safetensors", out, "--cache-dir", os.path.join(tmp, "cache")]
    args += list(extra_args)
    p = subprocess.run(args, env=_env(env), capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError("sluice-train failed (%d):\n%s" % (p.returncode, p.stderr[-4000:]))
    return p


@pytest.fixture(scope="module")
def served(fashion, tmp_path_factory):
    """A web root holding the Fashion-MNIST dataset under fm/, and the weights of one epoch
    trained from the local copy (the reference every remote run must equal)."""
    root = tmp_path_factory.mktemp("www")
    shutil.copytree(fashion["dir"], root / "fm")
    work = tmp_path_factory.mktemp("local")
    _need()
    local = str(work / "local.safetensors")
    _train(str(root / "fm"), local, str(work))
    with open(local, "rb") as f:
        weights = f.read()
    return {"root": str(root), "weights": weights}


def _same_weights(path, served_):
    with open(path, "rb") as f:
        assert f.read() == served_["weights"], "weights differ from the local run's"


def test_https_with_its_ca_trains_the_weights_of_local_disk(served, tmp_path):
    _need(*NGINX_TLS_PROGRAMS)
    with nginx_server(served["root"], str(tmp_path), tls=True) as web:
        out = str(tmp_path / "w.safetensors")
        _train(web.url + "/fm", out, str(tmp_path), env={"SLUICE_CA_BUNDLE": web.ca_file})
        _same_weights(out, served)
        # The second run reads the frames from the cache: same weights again, and the report
        # says every frame came from it.
        report = str(tmp_path / "r.json")
        _train(web.url + "/fm", out, str(tmp_path), env={"SLUICE_CA_BUNDLE": web.ca_file},
               extra_args=["--report-json", report])
        _same_weights(out, served)
        network = json.load(open(report))["network"]
        assert network["cache_on"] and network["cache_misses"] == 0 and network["cache_hits"] > 0
        # Without the CA the certificate is refused, naming what to set.
        p = _train(web.url + "/fm", out + ".no", str(tmp_path), check=False)
        assert p.returncode != 0
        assert "AWS_CA_BUNDLE or SLUICE_CA_BUNDLE" in p.stderr, p.stderr[-2000:]
        assert not os.path.exists(out + ".no")


MPIRUN = ["/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "--mca",
          "btl_vader_single_copy_mechanism", "none", "-np", "2"]


def test_two_mpi_ranks_from_http_share_one_cache_and_train_the_weights_of_local_disk(
        served, tmp_path):
    """docs/storage.md, "Data parallel": the ranks of one machine read one dataset URL and
    share one cache, and the weights are those of the same 2-rank job on local disk, byte for
    byte; a second job reads every frame from the cache its ranks filled."""
    _need(*NGINX_PROGRAMS, "/usr/bin/mpirun")
    probe = subprocess.run(MPIRUN + ["true"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip("mpirun cannot start a job here: %s" % probe.stderr[-500:])

    def mpi_train(data, out, extra=()):
        args = MPIRUN + [TRAIN, "--data", data, "--epochs", "1", "--shuffle", "--seed", "7",
                         "--device", "cpu", "--quiet", "--report=false", "--ceilings=false",
                         "--export-safetensors", out, "--cache-dir", str(tmp_path / "cache")]
        p = subprocess.run(args + list(extra), env=_env(), capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 0, "mpirun sluice-train failed (%d):\n%s" % (
            p.returncode, p.stderr[-4000:])
        with open(out, "rb") as f:
            return f.read()

    local = mpi_train(os.path.join(served["root"], "fm"), str(tmp_path / "local.safetensors"))
    assert local != served["weights"]  # two ranks: a different reduction order, other weights
    with nginx_server(served["root"], str(tmp_path)) as web:
        report = str(tmp_path / "r.json")
        cold = mpi_train(web.url + "/fm", str(tmp_path / "cold.safetensors"),
                         ["--report-json", report])
        assert cold == local, "2 ranks over http:// trained other weights than on local disk"
        first = json.load(open(report))["network"]
        assert first["cache_misses"] > 0
        warm = mpi_train(web.url + "/fm", str(tmp_path / "warm.safetensors"),
                         ["--report-json", report])
        assert warm == local
        second = json.load(open(report))["network"]
        assert second["cache_misses"] == 0 and second["cache_hits"] > 0, second


def test_http_loader_and_inspect_verify(served, tmp_path):
    _need(*NGINX_PROGRAMS)
    with nginx_server(served["root"], str(tmp_path)) as web:
        url = web.url + "/fm"
        remote = sluice.Loader(url, batch_size=500, shuffle=True, seed=3, split="test",
                               cache_dir=str(tmp_path / "cache"), read_concurrency=4)
        local = sluice.Loader(os.path.join(served["root"], "fm"), batch_size=500, shuffle=True,
                              seed=3, split="test")
        for (xr, yr), (xl, yl) in zip(remote, local):
            assert torch.equal(xr, xl) and torch.equal(yr, yl)
        ds = sluice.Dataset(url, split="test")
        assert len(ds) == 10000
        p = subprocess.run([SHARD, "verify", url], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert "OK %s/train.manifest.json" % url in p.stdout
        p = subprocess.run([SHARD, "inspect", url + "/test.manifest.json"], capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0 and "10000 records" in p.stdout, p.stderr


def test_a_pass_network_counts_are_its_own_whenever_the_report_is_asked(faulty):
    # The next pass's work-ahead pipeline goes on fetching after this pass ended: the report
    # asked later still gives what this pass's window fetched (frozen at its end).
    loader = sluice.Loader(faulty.url + "/fm", batch_size=500, cache_bytes=0)
    frames = sum(e["frame_count"] for e in
                 json.load(open(os.path.join(faulty.root, "fm", "train.manifest.json")))["shards"])
    for _ in loader:
        pass
    first = loader.report()["network"]
    time.sleep(1.0)  # the work-ahead's fetches, if any, land now
    assert loader.report()["network"] == first
    assert first["requests"] >= frames
    # Without work-ahead, a later pass fetches exactly its frames: the shards' headers and
    # indexes were read once, when the loader opened them.
    alone = sluice.Loader(faulty.url + "/fm", batch_size=500, cache_bytes=0, work_ahead=False)
    for _ in range(2):
        for _ in alone:
            pass
    assert alone.report()["network"]["requests"] == frames


def test_s3_bucket_filled_with_awscli_trains_the_weights_of_local_disk(served, tmp_path):
    _need(*NGINX_PROGRAMS)
    if swift_missing():
        pytest.skip("Swift with s3api missing: %s" % ", ".join(swift_missing()))
    with swift_s3_server(str(tmp_path)) as s3:
        s3.aws("s3", "mb", "s3://data")
        # A prefix with '=' and '+': keys that curl 7.88 would not encode on its own.
        s3.aws("s3", "cp", "--recursive", "--only-show-errors", os.path.join(served["root"], "fm"),
               "s3://data/run=1+fm")
        env = dict(s3.env())
        env = {k: v for k, v in env.items() if k.startswith("AWS_")}
        env["AWS_ENDPOINT_URL"] = s3.endpoint
        out = str(tmp_path / "w.safetensors")
        _train("s3://data/run=1+fm", out, str(tmp_path), env=env)
        _same_weights(out, served)
        # A wrong secret: 403, named, and the secret never printed.
        bad = dict(env, AWS_SECRET_ACCESS_KEY="not-the-secret-42")
        p = _train("s3://data/run=1+fm", out + ".bad", str(tmp_path), env=bad, check=False)
        assert p.returncode != 0
        assert "HTTP 403" in p.stderr and "s3://data/run=1+fm" in p.stderr, p.stderr[-2000:]
        assert "not-the-secret-42" not in p.stderr + p.stdout


@pytest.fixture
def faulty(served, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(served["root"], root)
    with fault_http_server(str(root)) as server:
        server.root = str(root)
        yield server


def _shard(root, index):
    return sorted(glob.glob(os.path.join(root, "fm", "train-*.shard")))[index]


def _slow(us=4000):
    # Each frame's read waits `us` more, so the run lasts long enough to be hit mid-epoch.
    return ["--inject-delay", "read:%d" % us, "--read-concurrency", "2"]


def _after_ranges(server, n, action):
    # Runs `action` once the server has answered n range requests: mid-epoch by the run's own
    # progress (its shards opened, frames read), not by a timer that a slow start outlasts.
    def wait():
        deadline = time.monotonic() + 120
        while server.status_counts.get(206, 0) < n and time.monotonic() < deadline:
            time.sleep(0.005)
        action()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


def test_a_503_storm_mid_epoch_is_retried_and_counted(served, faulty, tmp_path):
    _need()
    report = str(tmp_path / "r.json")
    timer = _after_ranges(faulty, 40, lambda: faulty.fail_next(6, 503))
    out = str(tmp_path / "w.safetensors")
    _train(faulty.url + "/fm", out, str(tmp_path),
           extra_args=_slow() + ["--report-json", report, "--cache-bytes", "0"])
    timer.join()
    _same_weights(out, served)
    assert faulty.status_counts.get(503, 0) == 6
    network = json.load(open(report))["network"]
    assert network["throttled"] == 6 and network["retries"] >= 6


def test_a_404_shard_fails_at_once_naming_it(faulty, tmp_path):
    _need()
    name = os.path.basename(_shard(faulty.root, 2))
    faulty.not_found(name)
    t0 = time.monotonic()
    out = str(tmp_path / "w.safetensors")
    p = _train(faulty.url + "/fm", out, str(tmp_path), check=False)
    assert p.returncode != 0 and not os.path.exists(out)
    assert "%s/fm/%s" % (faulty.url, name) in p.stderr and "does not exist" in p.stderr, p.stderr
    assert time.monotonic() - t0 < 60  # not retried for the budget


def test_a_corrupted_byte_in_transit_is_a_data_error_never_trained_on(faulty, tmp_path):
    _need()
    path = _shard(faulty.root, 1)
    faulty.corrupt(os.path.basename(path), os.path.getsize(path) // 2)
    out = str(tmp_path / "w.safetensors")
    p = _train(faulty.url + "/fm", out, str(tmp_path), check=False, extra_args=["--cache-bytes", "0"])
    assert p.returncode != 0 and not os.path.exists(out)
    assert "%s/fm/%s: frame " % (faulty.url, os.path.basename(path)) in p.stderr, p.stderr
    assert "at byte offset" in p.stderr


def test_the_dataset_replaced_mid_run_is_refused(faulty, tmp_path):
    _need()
    last = _shard(faulty.root, -1)

    def replace():
        data = bytearray(open(last, "rb").read())
        with open(last + ".new", "wb") as f:
            f.write(bytes(data))
        os.replace(last + ".new", last)  # same bytes, a new file: a new ETag

    timer = _after_ranges(faulty, 40, replace)  # every shard opened, the last not yet read
    out = str(tmp_path / "w.safetensors")
    p = _train(faulty.url + "/fm", out, str(tmp_path), check=False,
               extra_args=_slow() + ["--cache-bytes", "0"])
    timer.join()
    assert p.returncode != 0 and not os.path.exists(out)
    assert "changed" in p.stderr and os.path.basename(last) in p.stderr, p.stderr[-2000:]


def test_a_server_killed_mid_epoch_is_retried_until_it_is_back(served, tmp_path):
    _need(*NGINX_PROGRAMS)
    with nginx_server(served["root"], str(tmp_path)) as web:
        def bounce():
            web.stop()
            time.sleep(1.0)
            web.start()

        timer = threading.Timer(0.4, bounce)
        timer.start()
        out = str(tmp_path / "w.safetensors")
        _train(web.url + "/fm", out, str(tmp_path),
               extra_args=_slow() + ["--cache-bytes", "0"])
        timer.join()
        _same_weights(out, served)
        # Killed for good: the retry budget ends the run, naming the URL.
        web.stop()
        p = _train(web.url + "/fm", out + ".x", str(tmp_path), check=False,
                   env={"SLUICE_RETRY_SECONDS": "2"})
        assert p.returncode != 0 and "gave up after" in p.stderr and web.url in p.stderr, p.stderr


def test_a_full_cache_disk_means_no_cache_not_a_failed_run(served, faulty, tmp_path):
    _need()
    cache = tmp_path / "tiny"
    cache.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(cache)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a 256 KB tmpfs here (needs root): no full disk to test with")
    try:
        out = str(tmp_path / "w.safetensors")
        report = str(tmp_path / "r.json")
        p = subprocess.run([TRAIN, "--data", faulty.url + "/fm", "--epochs", "1", "--shuffle",
                            "--seed", "7", "--device", "cpu", "--quiet", "--report=false",
                            "--ceilings=false", "--threads", "2", "--export-safetensors", out,
                            "--cache-dir", str(cache), "--report-json", report],
                           env=_env(), capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        _same_weights(out, served)
        assert "the remote read cache stops writing" in p.stderr
        assert json.load(open(report))["network"]["cache_writes_off"]
    finally:
        subprocess.run(["umount", str(cache)], check=False)


def test_a_stop_ends_requests_in_flight_promptly(faulty, tmp_path):
    _need()
    faulty.delay_s = 3.0  # every request takes 3 s
    proc = subprocess.Popen([TRAIN, "--data", faulty.url + "/fm", "--epochs", "1", "--device",
                             "cpu", "--quiet", "--ceilings=false", "--cache-bytes", "0"],
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)  # the manifest and the shards' heads opened; frames in flight
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 4.0, err[-2000:]
    assert proc.returncode != 0


def test_the_read_concurrency_is_tuned_and_a_fixed_one_too_small_is_advised(faulty):
    # 50 ms per request while tuning: 16 in flight are then 320 requests a second, which this
    # process's Python server answers with cores to spare (at 20 ms, 800 a second, one run
    # of the climb could stall at 8 on a loaded machine).
    faulty.delay_s = 0.05
    url = faulty.url + "/fm"
    tuned = sluice.Loader(url, batch_size=256, dtype=torch.uint8, work_ahead=False,
                          cache_bytes=0)
    assert sum(x.shape[0] for x, _ in tuned) == 60000
    network = tuned.report()["network"]
    assert network["read_concurrency_tuned"] and network["read_concurrency"] >= 16, network
    faulty.delay_s = 0.02  # 20 ms per request
    fixed = sluice.Loader(url, batch_size=256, dtype=torch.uint8, work_ahead=False,
                          cache_bytes=0, read_concurrency=2)
    assert sum(x.shape[0] for x, _ in fixed) == 60000
    report = fixed.report()
    assert not report["network"]["read_concurrency_tuned"]
    assert report["network"]["mean_in_flight"] >= 1.5, report["network"]
    # Latency, not bandwidth: the requests spent their time waiting for a first byte.
    assert report["network"]["receiving_fraction"] < 0.5, report["network"]
    advice = report["verdict"]["advice"]
    assert any("read" in json.dumps(a) and "4" in json.dumps(a) for a in advice), advice
    assert "read_concurrency=4" in report["verdict"]["sentence"], report["verdict"]["sentence"]


def test_behind_a_bandwidth_cap_more_concurrency_is_not_advised(served, tmp_path):
    """A store whose bandwidth, not its latency, holds the reads: the bytes arrive back to back
    (a response arriving nearly all the time one is in flight), so more requests in flight
    cannot raise the rate (measured 0.92-0.94x for 2 -> 4 behind 10 MB/s), and the report does
    not advise them (docs/storage.md, "What the report shows")."""
    _need(*NGINX_PROGRAMS)
    with nginx_server(served["root"], str(tmp_path)) as web, \
            delay_proxy("127.0.0.1", web.port, delay_s=0.0, bytes_per_s=10e6) as proxy:
        loader = sluice.Loader(proxy.url + "/fm", batch_size=256, dtype=torch.uint8,
                               work_ahead=False, cache_bytes=0, read_concurrency=2)
        assert sum(x.shape[0] for x, _ in loader) == 60000
        report = loader.report()
    network = report["network"]
    assert network["receiving_fraction"] >= 0.9, network
    assert report["verdict"]["limiting_stage"] == "read", report["verdict"]["sentence"]
    advice = [a for a in report["verdict"]["advice"] if "concurrency" in json.dumps(a)]
    assert not advice, report["verdict"]["sentence"]
    assert any("the remote reads were bandwidth-bound" in note for note in report["notes"]), \
        report["notes"]


def test_an_image_folder_over_http_gives_the_batches_of_local_disk(tmp_path):
    _need(*NGINX_PROGRAMS)
    from PIL import Image
    import numpy as np
    folder = tmp_path / "photos"
    rng = np.random.default_rng(5)
    for k in range(3):
        (folder / ("class%d" % k)).mkdir(parents=True)
        for i in range(12):
            h, w = rng.integers(40, 90, size=2)
            pixels = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / ("class%d" % k) / ("%02d.jpg" % i), quality=90)
    root = tmp_path / "www"
    p = subprocess.run([SHARD, "create", "--image-folder", str(folder), "--out",
                        str(root / "photos"), "--split", "train"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    chain = "DecodeImage(), RandomResizedCrop(32), RandomHorizontalFlip(), Normalize(mean=[0.5], std=[0.25])"
    with nginx_server(str(root), str(tmp_path)) as web:
        remote = sluice.Loader(web.url + "/photos", batch_size=8, shuffle=True, seed=2,
                               transforms=chain, cache_dir=str(tmp_path / "cache"))
        local = sluice.Loader(str(root / "photos"), batch_size=8, shuffle=True, seed=2,
                              transforms=chain)
        count = 0
        for (xr, yr), (xl, yl) in zip(remote, local):
            assert torch.equal(xr, xl) and torch.equal(yr, yl)
            count += xr.shape[0]
        assert count == 36
        assert remote.classes == ["class0", "class1", "class2"]
