"""sluice.Loader(transforms=...): batches are the chain's output in the asked dtype, each sample
what _sluice._apply_transforms gives for the same (seed, epoch, index); a chain that does not
fit the data or the dtype raises at construction; the state names the chain."""
import numpy as np
import pytest
import torch
import torchvision.transforms as TV

import sluice
import sluice.transforms as T
from sluice import _sluice

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261)
RECORDS, SIDE, BATCH = 45, 12, 8


@pytest.fixture
def colour(tmp_path):
    images = np.random.default_rng(7).integers(0, 256, size=(RECORDS, 3, SIDE, SIDE),
                                               dtype=np.uint8)
    labels = (np.arange(RECORDS) % 10).astype(np.uint8)
    sluice.write_dataset(tmp_path, "train", images, labels, records_per_frame=8, layout="NCHW")
    return {"dir": str(tmp_path), "images": images, "labels": labels}


def expected(chain, images, seed, epoch, index):
    # Unshuffled, the sample at global position p of an epoch is record p.
    return _sluice._apply_transforms(T.chain_text(chain), images[index], seed=seed, epoch=epoch,
                                     index=index)


@pytest.mark.parametrize("threads", [1, 2])
def test_batches_equal_the_chain_applied_per_sample(colour, threads):
    chain = [T.RandomCrop(10, padding=2), T.RandomHorizontalFlip(), T.Normalize(MEAN, STD)]
    loader = sluice.Loader(colour["dir"], batch_size=BATCH, seed=3, transforms=chain,
                           threads=threads)
    for epoch in range(2):
        position = 0
        for images, labels in loader:
            assert images.dtype == torch.float32 and images.shape[1:] == (3, 10, 10)
            assert images.is_contiguous()
            for i in range(images.shape[0]):
                want = expected(chain, colour["images"], 3, epoch, position + i)
                np.testing.assert_array_equal(images[i].numpy().view(np.uint32),
                                              want.view(np.uint32))
            np.testing.assert_array_equal(
                labels.numpy(), colour["labels"][position:position + images.shape[0]])
            position += images.shape[0]
        assert position == RECORDS


def test_torchvision_compose_and_uint8_batches(colour):
    tv = TV.Compose([TV.RandomCrop(8), TV.RandomHorizontalFlip()])
    loader = sluice.Loader(colour["dir"], batch_size=BATCH, dtype=torch.uint8, transforms=tv)
    images, _ = next(iter(loader))
    assert images.dtype == torch.uint8 and tuple(images.shape) == (BATCH, 3, 8, 8)
    for i in range(BATCH):
        np.testing.assert_array_equal(images[i].numpy(),
                                      expected(tv, colour["images"], 0, 0, i))
    # A u8 chain output is normalized per channel as without a chain.
    loader = sluice.Loader(colour["dir"], batch_size=BATCH, normalize=(MEAN, STD), transforms=tv)
    images, _ = next(iter(loader))
    want = (torch.from_numpy(expected(tv, colour["images"], 0, 0, 0)).float() / 255
            - torch.tensor(MEAN).view(3, 1, 1)) / torch.tensor(STD).view(3, 1, 1)
    torch.testing.assert_close(images[0], want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("transforms, message", [
    ([T.RandomCrop(20)], "RandomCrop"),
    ("Normalize(mean=[0.5, 0.5], std=[1, 1])", "Normalize"),
    ("Bogus()", "Bogus"),
])
def test_a_chain_that_does_not_fit_raises_at_construction(colour, transforms, message):
    with pytest.raises(ValueError, match="^transforms: .*" + message):
        sluice.Loader(colour["dir"], batch_size=BATCH, transforms=transforms)


def test_float_chain_output_refuses_uint8_batches_and_a_second_normalize(colour):
    chain = [T.Normalize(MEAN, STD)]
    with pytest.raises(ValueError, match="dtype u8 cannot hold them"):
        sluice.Loader(colour["dir"], batch_size=BATCH, dtype=torch.uint8, transforms=chain)
    with pytest.raises(ValueError, match="normalized twice"):
        sluice.Loader(colour["dir"], batch_size=BATCH, normalize=(0.5, 0.5), transforms=chain)


def test_state_with_other_transforms_is_refused(colour):
    a = sluice.Loader(colour["dir"], batch_size=BATCH, transforms=[T.RandomCrop(10)])
    state = a.state_dict()
    assert state["order"]["transforms"].startswith("RandomCrop(")
    same = sluice.Loader(colour["dir"], batch_size=BATCH, transforms="RandomCrop(size=10)")
    same.load_state_dict(state)  # the same chain, spelled otherwise
    other = sluice.Loader(colour["dir"], batch_size=BATCH, transforms=[T.RandomCrop(9)])
    with pytest.raises(ValueError, match="order.transforms"):
        other.load_state_dict(state)


def test_totensor_with_uint8_batches_is_refused_at_construction(colour):
    with pytest.raises(ValueError, match="ToTensor gives float32"):
        sluice.Loader(colour["dir"], 8, dtype=torch.uint8,
                      transforms=TV.Compose([TV.CenterCrop(8), TV.ToTensor()]))


def test_uint8_batches_of_a_float32_split_are_refused_at_construction(tmp_path):
    x = np.random.default_rng(0).random((16, 1, 4), dtype=np.float32)
    sluice.write_dataset(tmp_path, "train", x, np.arange(16) % 2)
    with pytest.raises(ValueError, match="dtype u8 needs u8 samples; this split stores f32"):
        sluice.Loader(str(tmp_path), 8, dtype=torch.uint8)
