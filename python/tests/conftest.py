"""Session fixtures: Fashion-MNIST as arrays, sharded once with sluice.write_dataset, and the
same IDX files laid out for torchvision (FashionMNIST/raw/)."""
import gzip
import os
import shutil

import numpy as np
import pytest

DATA = os.environ.get("SLUICE_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _read_idx(name):
    with gzip.open(os.path.join(DATA, name + ".gz"), "rb") as f:
        raw = f.read()
    header = 16 if "images" in name else 8
    return raw, np.frombuffer(raw, dtype=np.uint8, offset=header)


@pytest.fixture(scope="session")
def fashion(tmp_path_factory):
    """{"dir": dataset dir (train + test splits), "torch_root": torchvision root,
    "train": (images [N,28,28] u8, labels [N] u8), "test": (...)}."""
    if not os.path.exists(os.path.join(DATA, FILES["train"][0] + ".gz")):
        pytest.skip("Fashion-MNIST IDX files not found in %s (dataset-fashion-mnist)" % DATA)
    import sluice
    root = tmp_path_factory.mktemp("fashion")
    out = {"dir": str(root / "dataset"), "torch_root": str(root / "torch")}
    raw_dir = root / "torch" / "FashionMNIST" / "raw"
    raw_dir.mkdir(parents=True)
    for split, (images_name, labels_name) in FILES.items():
        images_raw, images = _read_idx(images_name)
        labels_raw, labels = _read_idx(labels_name)
        images = images.reshape(-1, 28, 28)
        out[split] = (images, labels)
        sluice.write_dataset(out["dir"], split, images, labels)
        (raw_dir / images_name).write_bytes(images_raw)
        (raw_dir / labels_name).write_bytes(labels_raw)
    return out


@pytest.fixture
def corrupt_copy(fashion, tmp_path):
    """A copy of the dataset with one byte flipped inside a frame of the test split's first shard;
    returns (dir, shard file name)."""
    import json
    dst = tmp_path / "corrupt"
    shutil.copytree(fashion["dir"], dst)
    manifest = json.loads((dst / "test.manifest.json").read_text())
    shard = manifest["shards"][0]["file"]
    data = bytearray((dst / shard).read_bytes())
    # One byte an eighth into the file: inside a frame's zstd data (the header is 64 bytes,
    # the footer index sits at the end), so that frame's XXH3 no longer matches.
    data[len(data) // 8] ^= 0x5A
    (dst / shard).write_bytes(bytes(data))
    return str(dst), shard
