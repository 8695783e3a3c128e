"""The sixth hostile-input trial's findings (issue 35): each test failed before its fix."""
import numpy as np
import pytest
import torch

import sluice


@pytest.fixture
def ids_dataset(tmp_path):
    """120 1x1 u8 records whose pixel is the record's index: a batch names its records."""
    out = str(tmp_path / "ds")
    sluice.write_dataset(out, "train", np.arange(120, dtype=np.uint8).reshape(120, 1, 1),
                         np.zeros(120, np.uint8), records_per_frame=10)
    return out


@pytest.mark.parametrize("work_ahead", [True, False])
@pytest.mark.parametrize("taken", [1, 2, 5])
def test_a_replaced_iterator_raises_at_once_and_no_batch_is_delivered_twice(
        ids_dataset, work_ahead, taken):
    # The replaced iterator handed out the next batch its pipeline had built, and the new pass
    # delivered that batch again.
    loader = sluice.Loader(ids_dataset, batch_size=10, dtype=torch.uint8, work_ahead=work_ahead)
    first = iter(loader)
    seen = [int(v) for _ in range(taken) for v in next(first)[0].flatten()]
    second = iter(loader)
    with pytest.raises(RuntimeError, match=r"replaced by a newer iter\(\) of the same Loader"):
        next(first)
    with pytest.raises(RuntimeError, match=r"replaced by a newer iter\(\)"):
        next(first)  # and stays so
    seen += [int(v) for images, _ in second for v in images.flatten()]
    assert sorted(seen) == list(range(120))


def test_an_iterator_whose_pass_ended_still_stops_after_a_new_iter(ids_dataset):
    loader = sluice.Loader(ids_dataset, batch_size=10, dtype=torch.uint8)
    first = iter(loader)
    assert sum(len(y) for _, y in first) == 120
    second = iter(loader)
    with pytest.raises(StopIteration):
        next(first)
    assert sum(len(y) for _, y in second) == 120


def test_unchecked_images_still_need_a_header_that_gives_their_size(tmp_path):
    # A JPEG with no frame header was stored with verify_images=None; the manifest then recorded
    # no image sizes, and the whole split decoded under the 4096x4096 fallback (228 MB resident
    # where 15.6 MB sufficed).
    import io
    from PIL import Image
    buf = io.BytesIO()
    Image.new("RGB", (6, 5)).save(buf, format="JPEG")
    good = buf.getvalue()
    headerless = b"\xff\xd8\xff" + bytes(100)
    with pytest.raises(ValueError, match=r"^images\[1\]: .*nothing was written$"):
        sluice.write_dataset(str(tmp_path / "a"), "train", [good, headerless], [0, 1],
                             verify_images=None)
    assert not (tmp_path / "a" / "train.manifest.json").exists()
    # A truncated file whose header parses is what None stores.
    sluice.write_dataset(str(tmp_path / "b"), "train", [good, good[:-10]], [0, 1],
                         verify_images=None)
    assert len(sluice.Dataset(str(tmp_path / "b"))) == 2
