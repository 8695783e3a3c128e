"""Fail-safe tests of a transform list given to sluice.Loader (docs/limits.md, "Echoed input"):
bounded before it is parsed, and quoted in errors escaped and cut at 200 characters."""
import time

import numpy as np
import pytest

import sluice


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    rng = np.random.RandomState(0)
    images = rng.randint(0, 256, (200, 28, 28)).astype(np.uint8)
    labels = (np.arange(200) % 10).astype(np.uint8)
    path = str(tmp_path_factory.mktemp("echo") / "dataset")
    sluice.write_dataset(path, "train", images, labels, records_per_frame=100)
    return path


def test_loader_refuses_a_transform_list_over_the_bound_at_once(small):
    # A 4 MB list took 18 s and 3.3 GB resident, and raised a 10 MB message.
    text = "RandomHorizontalFlip(), " * ((4 << 20) // 24)
    start = time.monotonic()
    with pytest.raises(ValueError) as error:
        sluice.Loader(small, batch_size=10, transforms=text)
    assert time.monotonic() - start < 2
    message = str(error.value)
    assert "bytes, more than the maximum 65536" in message
    assert len(message) < 400, message[:400]


def test_loader_quotes_a_transform_argument_escaped_and_cut(small):
    value = "\x1b[31m" + "k" * 60000
    with pytest.raises(ValueError) as error:
        sluice.Loader(small, batch_size=10, transforms="Resize(32, interpolation='%s')" % value)
    message = str(error.value)
    assert "\x1b" not in message
    assert "\\x1b[31mkkk" in message
    assert "(60005 bytes)" in message
    assert len(message) < 600, message[:600]
