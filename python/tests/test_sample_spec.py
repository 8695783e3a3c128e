"""Batches are contiguous [B, C, H, W] built from the batch's own sample spec, normalized per
channel."""
import numpy as np
import pytest
import torch

import sluice


@pytest.fixture
def colour(tmp_path):
    """20 records of 5x6 pixels of 3 channels, written channels last as NumPy images are."""
    rng = np.random.default_rng(7)
    images = rng.integers(0, 256, size=(20, 5, 6, 3), dtype=np.uint8)
    labels = (np.arange(20) % 10).astype(np.uint8)
    sluice.write_dataset(tmp_path, "train", images, labels, records_per_frame=8)
    return tmp_path, images, labels


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_colour_batches_are_contiguous_chw_equal_to_the_array_transposed(colour, dtype):
    path, images, labels = colour
    chw = torch.from_numpy(images.transpose(0, 3, 1, 2).copy())  # [N, 3, 5, 6]
    seen = 0
    for x, y in sluice.Loader(path, batch_size=8, shuffle=False, dtype=dtype):
        assert x.shape == (len(y), 3, 5, 6)
        assert x.is_contiguous()
        assert x.view(len(y), -1).shape == (len(y), 90)  # the README's flatten works
        want = chw[seen:seen + len(y)]
        if dtype == torch.uint8:
            assert torch.equal(x, want)
        else:
            assert torch.equal(x, want.to(torch.float32).div(255))
        assert torch.equal(y, torch.from_numpy(labels[seen:seen + len(y)].astype(np.int64)))
        seen += len(y)
    assert seen == 20


def test_per_channel_normalize_equals_the_scalar_formula_per_channel(colour):
    path, images, _ = colour
    mean, std = (0.49, 0.48, 0.45), (0.25, 0.24, 0.26)
    x, _ = next(iter(sluice.Loader(path, batch_size=4, shuffle=False,
                                   normalize=(mean, std))))
    chw = torch.from_numpy(images[:4].transpose(0, 3, 1, 2).copy()).to(torch.float32)
    for c in range(3):
        m, s = torch.tensor(mean[c], dtype=torch.float32), torch.tensor(std[c], dtype=torch.float32)
        assert torch.equal(x[:, c], (chw[:, c] / 255 - m) / s), c


def test_one_mean_and_std_apply_to_every_channel(colour):
    path, images, _ = colour
    x, _ = next(iter(sluice.Loader(path, batch_size=4, shuffle=False, normalize=(0.5, 0.25))))
    chw = torch.from_numpy(images[:4].transpose(0, 3, 1, 2).copy()).to(torch.float32)
    assert torch.equal(x, (chw / 255 - 0.5) / 0.25)


def test_a_mean_of_the_wrong_length_is_refused_naming_the_channel_count(colour):
    path, _, _ = colour
    with pytest.raises(ValueError, match="mean has 2 values; the samples have 3 channels"):
        sluice.Loader(path, batch_size=4, normalize=((0.5, 0.5), 0.25))
