"""python/examples/train_cnn.py, the CNN-with-augmentation example, runs a few steps on a
3-channel 32x32 dataset (Fashion-MNIST padded to 32x32, one differently scaled copy per channel,
written channels-first) and reports a finite loss and a test accuracy."""
import importlib.util
import math
import os
import re

import numpy as np

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "train_cnn.py")


def colour_32x32(images):
    """[N, 28, 28] u8 -> [N, 3, 32, 32] u8: padded by 2, three channels that differ."""
    padded = np.pad(images, ((0, 0), (2, 2), (2, 2)))
    return np.stack([padded, padded // 2, 255 - padded], axis=1)


def test_the_cnn_example_trains_through_the_loader_with_augmentation(fashion, tmp_path, capsys):
    import sluice
    out = str(tmp_path / "colour")
    for split, n in (("train", 2048), ("test", 512)):
        images, labels = fashion[split]
        sluice.write_dataset(out, split, colour_32x32(images[:n]), labels[:n], layout="NCHW",
                             num_classes=10)
    spec = importlib.util.spec_from_file_location("train_cnn", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.main([out, "--steps", "6", "--batch-size", "64", "--log-every", "3"]) == 0
    printed = capsys.readouterr().out
    losses = [float(v) for v in re.findall(r"step \d+ loss ([-\d.e+naif]+)", printed)]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses), printed
    accuracy = float(re.search(r"test accuracy ([\d.]+)", printed).group(1))
    assert 0.0 <= accuracy <= 1.0
