"""Arguments and limits a hostile caller reaches: an open-file limit below the shard count, ints
beyond 64 bits, bools where ints belong, and arguments of the wrong type (docs/python.md,
"Limits"; docs/limits.md, "Open files"). Each message is one line naming the argument, the
value and the real range; pybind11's "incompatible function arguments" never reaches the user."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import sluice

SHARDS = 59


@pytest.fixture(scope="module")
def many_shards(tmp_path_factory):
    """A split of 59 shards of 10 records each (labels 0..9 repeating)."""
    rng = np.random.RandomState(1)
    images = rng.randint(0, 256, (SHARDS * 10, 4, 4)).astype(np.uint8)
    labels = (np.arange(SHARDS * 10) % 10).astype(np.uint8)
    path = str(tmp_path_factory.mktemp("many_shards") / "dataset")
    sluice.write_dataset(path, "test", images, labels, records_per_shard=10, records_per_frame=5)
    return path


def _run_under_open_file_limit(limit, script, *args):
    """Runs `script` with `ulimit -n limit` (soft and hard), set before the script's own code."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(sluice.__file__))
    code = "import resource\nresource.setrlimit(resource.RLIMIT_NOFILE, (%d, %d))\n" % (
        limit, limit) + textwrap.dedent(script)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, timeout=300)


DATASET_SCRIPT = """
    import sys
    import sluice
    ds = sluice.Dataset(sys.argv[1], "test")
    labels = [ds[i][1] for i in range(len(ds))]                  # every shard, in order
    backwards = [ds[i][1] for i in range(len(ds) - 1, -1, 7)]   # and jumping back and forth
    images, sliced = ds[::-3]
    ds.verify()
    print("labels ok", labels == [i % 10 for i in range(len(ds))],
          backwards == [i % 10 for i in range(len(ds) - 1, -1, 7)],
          list(sliced) == [i % 10 for i in range(len(ds) - 1, -1, -3)])
"""


def test_dataset_reads_and_verifies_more_shards_than_the_open_file_limit(many_shards):
    # It opened every shard at once and failed (OSError) under `ulimit -n 40` before verify()
    # could run, although verify() holds one shard open at a time.
    out = _run_under_open_file_limit(40, DATASET_SCRIPT, many_shards)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "labels ok True True True" in out.stdout, out.stdout + out.stderr


LOADER_SCRIPT = """
    import sys
    import sluice
    try:
        sluice.Loader(sys.argv[1], batch_size=10, split="test")
    except OSError as e:
        print("error:", e)
"""


def test_loader_open_file_error_states_the_whole_sum(many_shards):
    # "needs 59 open files and this process may open at most 100" hid the 64 spare and the
    # files already open.
    out = _run_under_open_file_limit(100, LOADER_SCRIPT, many_shards)
    match = re.search(r"needs (\d+) shard files \+ (\d+) spare \+ (\d+) already open = (\d+) open "
                      r"files; this process may open at most 100 \(ulimit -n", out.stdout)
    assert match, out.stdout + out.stderr
    shards, spare, open_now, total = map(int, match.groups())
    assert (shards, spare) == (SHARDS, 64) and shards + spare + open_now == total > 100
    assert len(out.stdout.strip().splitlines()) == 1, out.stdout


def _one_line(error):
    text = str(error.value)
    assert "\n" not in text and "Invoked with" not in text and "incompatible" not in text, text
    return text


@pytest.mark.parametrize("key", [1.0, "a", True, None, [1]])
def test_dataset_index_of_another_type_is_a_type_error(many_shards, key):
    # A bool is refused, unlike a Python list's True == 1: as a record index it is more often a
    # mask or a flag passed by mistake than record 1.
    ds = sluice.Dataset(many_shards, "test")
    with pytest.raises(TypeError) as e:
        ds[key]
    assert _one_line(e).startswith("sluice.Dataset indices must be an int or a slice, got ")


@pytest.mark.parametrize("index", [2**70, -2**70, 2**63, 590])
def test_dataset_index_beyond_64_bits_is_an_index_error_naming_the_range(many_shards, index):
    ds = sluice.Dataset(many_shards, "test")
    with pytest.raises(IndexError) as e:
        ds[index]
    assert "record index %d out of range" % index in _one_line(e)
    assert "(590 records: expected -590 to 589)" in str(e.value)


@pytest.mark.parametrize("args, message", [
    ((5,), r"sluice.Dataset: path: expected a str or os.PathLike, got 5 \(int\)"),
    ((None,), r"sluice.Dataset: path: expected a str or os.PathLike, got None \(NoneType\)"),
    (("{dir}", 5), r"sluice.Dataset: split: expected a str or None, got 5 \(int\)"),
])
def test_dataset_arguments_of_the_wrong_type_are_one_line_type_errors(many_shards, args,
                                                                      message):
    with pytest.raises(TypeError, match=message) as e:
        sluice.Dataset(*[a.format(dir=many_shards) if isinstance(a, str) else a for a in args])
    _one_line(e)


def test_dataset_takes_a_pathlike(many_shards):
    import pathlib
    assert len(sluice.Dataset(pathlib.Path(many_shards), "test")) == SHARDS * 10


def _maximum_threads():
    return sluice._sluice.RESOURCE_RANGES["threads"][1]


@pytest.mark.parametrize("argument, value, expected", [
    ("read_ahead_frames", 10**30, "[0, 1024]"),
    ("read_ahead_frames", -10**30, "[0, 1024]"),
    ("threads", 10**30, "[0, {threads}]"),
    ("decompress_threads", 2**63, "[0, {threads}]"),
    ("preprocess_threads", 2**64, "[0, {threads}]"),
    ("pool_size", 2**64, "[0, 1024]"),
    ("device_ring_depth", 2**70, "[2, 64]"),
    ("rank", 10**30, "[0, 4294967294]"),
    ("seed", 2**64, "[0, 18446744073709551615]"),
    ("world_size", 2**64, "[1, 4294967295]"),
    ("shuffle_window_frames", 10**30, "[0, 1048576]"),
    ("batch_size", 2**64, "[1, 2147483647]"),
])
def test_ints_beyond_64_bits_are_refused_naming_the_real_range(many_shards, argument, value,
                                                               expected):
    # read_ahead_frames=10**30 said "must be an int >= -9223372036854775808".
    kwargs = {"batch_size": 10, argument: value}
    with pytest.raises(ValueError) as e:
        sluice.Loader(many_shards, split="test", **kwargs)
    text = _one_line(e)
    assert text.startswith(argument + ": must be an int"), text
    assert " in " + expected.format(threads=_maximum_threads()) in text, text
    assert text.endswith("got %d" % value), text


INT_ARGUMENTS = ["batch_size", "seed", "threads", "decompress_threads", "preprocess_threads",
                 "pool_size", "device_ring_depth", "read_ahead_frames", "rank", "world_size",
                 "shuffle_window_frames"]


@pytest.mark.parametrize("argument", INT_ARGUMENTS)
def test_a_bool_is_a_type_error_for_every_int_argument(many_shards, argument):
    # batch_size=True was a ValueError while threads=True was a TypeError.
    kwargs = {"batch_size": 10, argument: True}
    with pytest.raises(TypeError) as e:
        sluice.Loader(many_shards, split="test", **kwargs)
    assert re.match(argument + r": expected an int( or None)?, got True \(bool\)$", _one_line(e))


def test_a_bool_epoch_is_a_type_error(many_shards):
    with pytest.raises(TypeError, match=r"set_epoch: epoch: expected an int, got True"):
        sluice.Loader(many_shards, batch_size=10, split="test").set_epoch(True)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"records_per_shard": "a"}, TypeError, r"records_per_shard: expected an int, got 'a'"),
    ({"records_per_shard": True}, TypeError, r"records_per_shard: expected an int, got True"),
    ({"records_per_frame": 2**32}, ValueError,
     r"records_per_frame: must be an int in \[1, 4294967295\], got 4294967296"),
    ({"zstd_level": 99}, ValueError, r"zstd_level: must be an int in \[1, 22\], got 99"),
    ({"threads": 1.5}, TypeError, r"threads: expected an int, got 1.5 \(float\)"),
    ({"threads": 10**30}, ValueError, r"threads: must be an int in \[0, \d+\]"),
    ({"split": 5}, TypeError, r"split: expected a str, got 5 \(int\)"),
    ({"out": 5}, TypeError, r"out: expected a str or os.PathLike, got 5 \(int\)"),
])
def test_write_dataset_arguments_are_checked_before_the_binding(tmp_path, kwargs, error,
                                                                message):
    arguments = dict(out=str(tmp_path / "d"), split="train",
                     images=np.zeros((4, 2, 2), np.uint8), labels=np.zeros(4, np.uint8))
    arguments.update(kwargs)
    with pytest.raises(error, match=message) as e:
        sluice.write_dataset(**arguments)
    _one_line(e)


@pytest.mark.parametrize("batch_size, error", [(True, TypeError), ("4", TypeError),
                                               (0, ValueError), (2**64, ValueError)])
def test_probe_batch_size_is_checked_as_the_loaders(batch_size, error):
    with pytest.raises(error, match=r"batch_size: ") as e:
        sluice.probe([], batch_size=batch_size)
    _one_line(e)


def test_probe_replay_steps_true_is_a_type_error():
    p = sluice.probe([np.zeros(2)])
    list(p)
    with pytest.raises(TypeError, match=r"replay: steps: expected an int, got True \(bool\)"):
        p.replay(steps=True)
