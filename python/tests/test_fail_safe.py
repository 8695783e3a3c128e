"""The loader under a careless caller: fork() after the threads started, arguments past
sluice-train's limits, data that is all corrupt, a state of another dataset, and the one-line
messages of bad arguments (docs/python.md, "Fork" and "Limits")."""
import os
import re
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import sluice

# A child that hangs is a failure, not a stuck CI job.
CHILD_TIMEOUT_S = int(os.environ.get("SLUICE_FORK_TEST_TIMEOUT_S", "120"))

FORK_SCRIPT = textwrap.dedent("""
    import os, sys
    import sluice
    path, case = sys.argv[1], sys.argv[2]
    loader = sluice.Loader(path, batch_size=100, shuffle=False)
    if case != "fork_first":
        it = iter(loader)
        next(it)
    pid = os.fork()
    if pid == 0:
        try:
            if case == "continue":
                next(it)
            elif case == "new_pass":
                next(iter(loader))
            elif case == "new_loader":
                next(iter(sluice.Loader(path, batch_size=100)))
            elif case == "dataset":  # random access starts no threads: it works anywhere
                print("child label", sluice.Dataset(path)[999][1])
                sys.exit(0)
            elif case == "fork_first":  # nothing started before fork(): the child may load
                n = sum(len(y) for _, y in loader)
                print("child delivered", n)
                sys.exit(0)
        except RuntimeError as e:
            print("child:", e)
            sys.exit(3)  # a normal exit: the inherited loader must not hang its teardown
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    print("child exit", os.waitstatus_to_exitcode(status))
    if case != "fork_first":
        print("parent continues", len(next(it)[1]))
""")

POOL_SCRIPT = textwrap.dedent("""
    import multiprocessing, sys
    import sluice
    path = sys.argv[1]

    def first_batch_labels(p):
        return len(next(iter(sluice.Loader(p, batch_size=10)))[1])

    next(iter(sluice.Loader(path, batch_size=10)))
    with multiprocessing.get_context("fork").Pool(1) as pool:
        try:
            print("pool got", pool.apply_async(first_batch_labels, (path,)).get(timeout=60))
        except RuntimeError as e:
            print("pool worker:", e)
""")


def _run(script, *args):
    """Runs `script` in a new session; on timeout its whole process group (the forked children
    too) is killed and the test fails."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(sluice.__file__))
    with subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env,
                          start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            pytest.fail("hung for %d s after fork(): %s%s" % (CHILD_TIMEOUT_S, stdout, stderr))
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 1,000-record dataset of 10 frames (its own, so the fork tests' children read it)."""
    rng = np.random.RandomState(0)
    images = rng.randint(0, 256, (1000, 28, 28)).astype(np.uint8)
    labels = (np.arange(1000) % 10).astype(np.uint8)
    path = str(tmp_path_factory.mktemp("small") / "dataset")
    sluice.write_dataset(path, "train", images, labels, records_per_frame=100)
    return path


@pytest.mark.parametrize("case", ["continue", "new_pass", "new_loader"])
def test_fork_after_start_raises_in_the_child_instead_of_hanging(small, case):
    out = _run(FORK_SCRIPT, small, case)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "child exit 3" in out.stdout, out.stdout + out.stderr
    message = re.search(r"child: (.*)", out.stdout).group(1)
    assert "fork() child" in message and "'spawn' or 'forkserver'" in message, message
    assert "parent continues 100" in out.stdout  # the parent's pass is untouched


def test_fork_before_any_start_lets_the_child_load(small):
    out = _run(FORK_SCRIPT, small, "fork_first")
    assert "child delivered 1000" in out.stdout and "child exit 0" in out.stdout, (
        out.stdout + out.stderr)


def test_dataset_random_access_works_in_a_fork_child(small):
    out = _run(FORK_SCRIPT, small, "dataset")
    assert "child label 9" in out.stdout and "child exit 0" in out.stdout, out.stdout + out.stderr


def test_multiprocessing_fork_pool_worker_raises_instead_of_hanging(small):
    out = _run(POOL_SCRIPT, small)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "pool worker:" in out.stdout and "fork() child" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("argument, value, message", [
    ("threads", 20000, "threads: 20000 is more than the maximum"),
    ("decompress_threads", 20000, "decompress_threads: 20000 is more than the maximum"),
    ("pool_size", 10**6, "pool_size: 1000000 is more than the maximum 1024 (batch buffers)"),
    ("pool_size", 1, "pool_size: must be 0 (auto) or >= 2, got 1"),
    ("read_ahead_frames", 10**6, "read_ahead_frames: 1000000 is more than the maximum 1024"),
])
def test_resources_past_the_cli_limits_are_refused(small, argument, value, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        sluice.Loader(small, batch_size=10, **{argument: value})


def test_device_ring_depth_past_the_cli_limit_is_refused(small):
    with pytest.raises(ValueError, match=re.escape(
            "device_ring_depth: 10000000 is more than the maximum 64 (device batch slots)")):
        sluice.Loader(small, batch_size=10, device="sim", device_ring_depth=10**7)


def test_batch_buffers_larger_than_memory_are_refused_before_allocating(small):
    # 1,024 buffers of 2**31 - 1 records: petabytes; refused by the memory check, not by malloc.
    with pytest.raises(OSError, match=r"the batch buffers \(pool_size=1024, "
                                      r"batch_size=2147483647\) needs .* available"):
        sluice.Loader(small, batch_size=2**31 - 1, pool_size=1024)


@pytest.fixture
def all_corrupt(small, tmp_path):
    """A copy of `small` whose every frame has a flipped byte (the header and index intact)."""
    import json
    import shutil
    dst = tmp_path / "all_corrupt"
    shutil.copytree(small, dst)
    manifest = json.loads((dst / "train.manifest.json").read_text())
    for shard in manifest["shards"]:
        data = bytearray((dst / shard["file"]).read_bytes())
        # Random pixels barely compress: each frame is ~78 KB. A byte every 2 KB after the
        # 64-byte header, short of the footer index (under 2 KB for 10 frames), hits them all.
        for offset in range(80, len(data) - 2048, 2048):
            data[offset] ^= 0x5A
        (dst / shard["file"]).write_bytes(bytes(data))
    return str(dst)


def test_all_frames_corrupt_with_skip_raises_naming_the_dataset_and_counts(all_corrupt):
    loader = sluice.Loader(all_corrupt, batch_size=10, shuffle=False, on_corrupt="skip")
    with pytest.raises(sluice.DataLossError) as e:
        for _ in loader:
            pass
    text = str(e.value)
    assert "train.manifest.json" in text and "max_corrupt_fraction=0.01" in text, text
    assert re.search(r"\d+ of 1000 records read in epoch 0 were skipped as corrupt", text), text


def test_max_corrupt_fraction_one_accepts_what_it_skips(all_corrupt):
    loader = sluice.Loader(all_corrupt, batch_size=10, shuffle=False, on_corrupt="skip",
                           max_corrupt_fraction=1.0)
    delivered = sum(len(y) for _, y in loader)
    assert delivered + loader.skipped()["records"] == 1000


def test_load_state_dict_refuses_a_state_of_another_dataset(small, fashion):
    other = sluice.Loader(fashion["dir"], batch_size=10).state_dict()
    other["order"] = sluice.Loader(small, batch_size=10).state_dict()["order"]
    with pytest.raises(ValueError, match="another dataset"):
        sluice.Loader(small, batch_size=10).load_state_dict(other)


@pytest.mark.parametrize("change, message", [
    # 2**32: the state after the last epoch (at step 0; test_fail_safe_round5.py).
    ({"epoch": 2**63}, r"epoch: must be an int in \[0, 4294967296\] \(4294967296: after the "
                       r"last epoch, at step 0\), got 9223372036854775808"),
    ({"epoch": -1}, r"epoch: must be an int in \[0, 4294967296\] .*, got -1"),
    ({"step": 1000}, r"step: must be an int in \[0, 100\]"),
    ({"order": None}, r"state\['order'\] must be a dict as state_dict\(\) gives, got None"),
    ({"epoch": "1"}, r"epoch: expected an int, got '1' \(str\)"),
])
def test_load_state_dict_refuses_a_state_out_of_bounds(small, change, message):
    loader = sluice.Loader(small, batch_size=10)
    state = dict(loader.state_dict(), **change)
    with pytest.raises((ValueError, TypeError), match=message):
        loader.load_state_dict(state)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"seed": -1}, ValueError, r"seed: must be an int in \[0, 18446744073709551615\], got -1"),
    ({"pool_size": -5}, ValueError, r"pool_size: must be an int or None >= 0 .*got -5"),
    ({"rank": 0.5}, TypeError, r"rank: expected an int or None, got 0.5 \(float\)"),
    ({"threads": "4"}, TypeError, r"threads: expected an int or None, got '4' \(str\)"),
    ({"world_size": 0}, ValueError, r"world_size: must be an int or None in \[1, "),
    ({"max_corrupt_fraction": 2}, ValueError, r"max_corrupt_fraction: must be a finite number"),
    ({"shuffle": "no"}, TypeError, r"shuffle: expected True or False, got 'no' \(str\)"),
    ({"drop_last": 2}, TypeError, r"drop_last: expected True or False, got 2 \(int\)"),
    ({"normalize": (float("nan"), 1)}, ValueError,
     r"normalize: mean must be a finite number in \[-10, 10\], got nan"),
    ({"normalize": (0.5, float("inf"))}, ValueError,
     r"normalize: std must be a finite number in \[1e-06, 1000\], got inf"),
    ({"normalize": (0.5, 0)}, ValueError, r"normalize: std must be a finite number .*got 0.0"),
    # The range and message of sluice-train's --read-ahead (pipeline/resource_limits.h).
    ({"read_ahead_frames": -1}, ValueError, r"read_ahead_frames: must be >= 0, got -1"),
])
def test_bad_argument_types_are_one_clear_line(small, kwargs, error, message):
    with pytest.raises(error, match=message) as e:
        sluice.Loader(small, batch_size=10, **kwargs)
    assert "Invoked with" not in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("path", [None, b"/tmp/dataset", 3])
def test_a_path_that_is_not_str_or_pathlike_is_a_type_error(path):
    with pytest.raises(TypeError, match=r"path: expected a str or os.PathLike, got "):
        sluice.Loader(path, batch_size=10)


def test_read_ahead_zero_is_accepted_as_by_the_cli(small):
    import pathlib
    loader = sluice.Loader(pathlib.Path(small), batch_size=100, shuffle=False,
                           read_ahead_frames=0)
    assert sum(len(y) for _, y in loader) == 1000


def test_set_epoch_refuses_a_negative_epoch(small):
    with pytest.raises(ValueError, match=r"set_epoch: epoch: must be an int in \[0, 4294967295\]"):
        sluice.Loader(small, batch_size=10).set_epoch(-1)


def test_dataset_index_error_names_the_index_given(small):
    ds = sluice.Dataset(small)
    with pytest.raises(IndexError,
                       match=r"record index -1001 out of range .* expected -1000 to 999"):
        ds[-1001]
    assert ds[-1000][1] == 0
