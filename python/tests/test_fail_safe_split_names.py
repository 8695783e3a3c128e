"""Split names under hostile input (docs/limits.md, "Echoed input"): write_dataset refuses a
split name holding a control character, as it refuses "a/b" and "../evil",
instead of writing an ANSI escape into the manifest's and shards' file names."""
import os

import numpy as np
import pytest

import sluice


@pytest.mark.parametrize("split", ["a/b", "../evil", "x\x1b[31my", "tab\there", "bell\x07"])
def test_write_dataset_refuses_control_characters_in_the_split_name(tmp_path, split):
    out = str(tmp_path / "ds")
    images = np.zeros((4, 2, 2), dtype=np.uint8)
    labels = np.zeros(4, dtype=np.uint8)
    with pytest.raises(ValueError, match="expected a plain name such as train") as info:
        sluice.write_dataset(out, split, images, labels)
    assert "\x1b" not in str(info.value)
    assert not os.path.exists(out) or not any(n.endswith(".manifest.json")
                                              for n in os.listdir(out))
