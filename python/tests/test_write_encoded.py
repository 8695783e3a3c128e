"""sluice.write_dataset with a list of encoded images (JPEG/PNG bytes, shard version 2), and
sluice.Dataset giving back (bytes, label)."""
import io
import json
import os

import numpy as np
import pytest

import sluice

PIL = pytest.importorskip("PIL.Image")


def _png(array):
    buf = io.BytesIO()
    PIL.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()


def _jpeg(array):
    buf = io.BytesIO()
    PIL.fromarray(array).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def _images(n=30, seed=0):
    """n images of different sizes: PNG (grey and RGB) and JPEG mixed."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        a = rng.integers(0, 256, (8 + i % 5, 10 + i % 7, 3), dtype=np.uint8)
        out.append((_png(a[:, :, 0]), a[:, :, 0]) if i % 3 == 0 else
                   (_png(a), a) if i % 3 == 1 else (_jpeg(a), None))
    return out


def _files(d):
    return {name: open(os.path.join(d, name), "rb").read() for name in sorted(os.listdir(d))}


def test_encoded_records_come_back_as_their_bytes_and_labels(tmp_path):
    images = _images()
    data = [b for b, _ in images]
    labels = np.arange(len(data)) % 4
    info = sluice.write_dataset(tmp_path, "train", data, labels, records_per_frame=4,
                                frame_bytes=2000, classes=["a", "b", "c", "d"])
    assert info == {"split": "train", "records": 30, "shards": 1, "num_classes": 4}
    ds = sluice.Dataset(tmp_path)
    assert len(ds) == 30
    assert ds.encoding == "image" and ds.shape is None and ds.classes == ["a", "b", "c", "d"]
    for i, (expected, array) in enumerate(images):
        sample, label = ds[i]
        assert sample == expected and label == labels[i]
        if array is not None:  # PNG is lossless: the stored bytes decode to the original
            np.testing.assert_array_equal(np.asarray(PIL.open(io.BytesIO(sample))), array)
    samples, got = ds[28:3:-5]
    assert samples == data[28:3:-5]
    np.testing.assert_array_equal(got, labels[28:3:-5])
    assert ds[-1][0] == data[-1]
    ds.verify()
    manifest = json.loads((tmp_path / "train.manifest.json").read_text())
    assert manifest["version"] == 2
    # The largest image, from the headers as PIL reads them: each maximum on its own.
    sizes = [PIL.open(io.BytesIO(b)).size for b in data]  # (width, height)
    assert manifest["sample"] == {"dtype": "u8", "encoding": "image",
                                  "max_width": max(w for w, _ in sizes),
                                  "max_height": max(h for _, h in sizes),
                                  "max_pixels": max(w * h for w, h in sizes),
                                  # the first image of the largest area
                                  "max_pixels_record": max(range(len(sizes)),
                                                           key=lambda i: (sizes[i][0] * sizes[i][1],
                                                                          -i))}
    assert "record_sources" not in manifest
    assert manifest["options"]["codec"] == "none"


def test_encoded_output_is_byte_identical_for_one_and_two_threads(tmp_path):
    data = [b for b, _ in _images(60, seed=3)]
    labels = np.arange(60) % 7
    for codec in ("none", "zstd"):
        for threads in (1, 2):
            sluice.write_dataset(tmp_path / ("%s%d" % (codec, threads)), "train", data, labels,
                                 records_per_frame=8, frame_bytes=3000, codec=codec,
                                 threads=threads)
        assert _files(tmp_path / (codec + "1")) == _files(tmp_path / (codec + "2"))


def test_bad_encoded_items_are_refused_naming_the_record(tmp_path):
    data = [b for b, _ in _images(3)]
    with pytest.raises(TypeError, match=r"images\[1\]: expected bytes .*got str"):
        sluice.write_dataset(tmp_path, "train", [data[0], "x.png", data[2]], [0, 1, 2])
    with pytest.raises(ValueError, match=r"images\[1\]: zero bytes, expected a JPEG or PNG"):
        sluice.write_dataset(tmp_path, "train", [data[0], b"", data[2]], [0, 1, 2])
    with pytest.raises(ValueError, match=r"^images\[2\]: not a JPEG or PNG image \(starts with "
                                         r"47 49 46 38 39 61 2E 2E; [^;]*; nothing was written$"):
        sluice.write_dataset(tmp_path, "train", [data[0], data[1], b"GIF89a.."], [0, 1, 2])
    # Unchecked, the header check still refuses it, in the same words.
    with pytest.raises(ValueError, match=r"^images\[2\]: not a JPEG or PNG image \(starts with "
                                         r"47 49 46 38 39 61 2E 2E; [^;]*; nothing was written$"):
        sluice.write_dataset(tmp_path, "train", [data[0], data[1], b"GIF89a.."], [0, 1, 2],
                             verify_images=None)
    with pytest.raises(ValueError, match=r"labels: expected an array of shape \[N\] with N = 3"):
        sluice.write_dataset(tmp_path, "train", data, [0, 1])
    with pytest.raises(ValueError, match=r"classes: 2 names for num_classes=3"):
        sluice.write_dataset(tmp_path, "train", data, [0, 1, 0], classes=["a", "b"],
                             num_classes=3)
    with pytest.raises(ValueError, match=r"codec: expected None, 'none' or 'zstd'"):
        sluice.write_dataset(tmp_path, "train", data, [0, 1, 2], codec="lz4")
    with pytest.raises(ValueError,
                       match=r"frame_bytes, codec, classes, sources, max_image_pixels and "
                             r"verify_images apply to encoded"):
        sluice.write_dataset(tmp_path, "train", np.zeros((3, 2, 2), np.uint8), [0, 1, 2],
                             codec="zstd")
    assert not os.path.exists(tmp_path / "train.manifest.json")


def _cmyk_jpeg():
    buf = io.BytesIO()
    PIL.new("CMYK", (12, 10), (10, 20, 30, 40)).save(buf, format="JPEG")
    return buf.getvalue()


def test_a_truncated_image_is_refused_by_the_structure_check_naming_it_and_writing_nothing(
        tmp_path):
    images = [b for b, _ in _images(6)]
    jpeg = images[2]  # i % 3 == 2: a JPEG
    images[2] = jpeg[:len(jpeg) // 2]  # no EOI: cut in its entropy-coded data
    out = tmp_path / "ds"
    with pytest.raises(ValueError, match=r"^images\[2\] \(c/2\.jpg\): truncated JPEG.*"
                                         r"verify_images=None stores such images unchecked.*"
                                         r"nothing was written$"):
        sluice.write_dataset(str(out), "train", images, list(range(6)),
                             sources=["c/%d.jpg" % i for i in range(6)])
    assert not out.exists() or os.listdir(out) == []
    # Stored on purpose, unchecked: the bytes come back as given.
    sluice.write_dataset(str(out), "train", images, list(range(6)), verify_images=None)
    ds = sluice.Dataset(str(out))
    assert [ds[i][0] for i in range(6)] == images


def test_every_refused_image_is_counted_and_the_first_five_named(tmp_path):
    images = [b for b, _ in _images(12)]
    for i in range(1, 12, 2):  # six damaged: PNGs and JPEGs cut short
        images[i] = images[i][:len(images[i]) - 20]
    with pytest.raises(ValueError) as e:
        sluice.write_dataset(str(tmp_path / "ds"), "train", images, [0] * 12)
    message = str(e.value)
    for i in (1, 3, 5, 7, 9):
        assert "images[%d]: " % i in message
    assert "images[11]" not in message
    assert "; and 1 more (6 images refused)" in message


def test_verify_images_decode_refuses_what_only_a_decode_finds(tmp_path):
    images = [b for b, _ in _images(3)] + [_cmyk_jpeg()]
    # The structure check passes a CMYK JPEG (its markers are whole); training's decoder does not.
    sluice.write_dataset(str(tmp_path / "a"), "train", images, [0, 1, 2, 3])
    with pytest.raises(ValueError, match=r"^images\[3\]: .*CMYK.*verify_images=\"decode\""):
        sluice.write_dataset(str(tmp_path / "b"), "train", images, [0, 1, 2, 3],
                             verify_images="decode")
    assert not (tmp_path / "b" / "train.manifest.json").exists()
    sluice.write_dataset(str(tmp_path / "c"), "train", images[:3], [0, 1, 2],
                         verify_images="decode")
    assert len(sluice.Dataset(str(tmp_path / "c"))) == 3


@pytest.mark.parametrize("value", ["yes", "", "Structure", 1, True, ["decode"]])
def test_verify_images_takes_structure_decode_or_none_only(tmp_path, value):
    images = [b for b, _ in _images(2)]
    with pytest.raises(ValueError, match="verify_images: expected \"structure\", \"decode\" or "
                                         "None, got "):
        sluice.write_dataset(str(tmp_path / "ds"), "train", images, [0, 1], verify_images=value)


def test_verify_images_with_an_array_is_refused_as_the_clis_flag(tmp_path):
    with pytest.raises(ValueError, match="verify_images apply to encoded images"):
        sluice.write_dataset(str(tmp_path / "ds"), "train", np.zeros((2, 4, 4), np.uint8), [0, 1],
                             verify_images="decode")


def test_unchecked_items_are_all_counted_and_sources_are_printed_escaped(tmp_path):
    # With verify_images=None, items refused by the writer's own signature check were not in the
    # count ("2 images refused" for 5), and sources reached the message raw (an ANSI escape, a
    # newline, a 1 MB string whole).
    good = [b for b, _ in _images(1)][0]
    # The last is cut after its header: None stores it, as damage stored on purpose.
    items = [good, b"", b"x", b"\x89PNG", good[:30], good[:40]]
    sources = ["s0", "a\x1b[31mred\nnext", "s2", "s3", "x" * 1000000, "s5"]
    with pytest.raises(ValueError) as e:
        sluice.write_dataset(str(tmp_path / "ds"), "train", items, [0] * 6, sources=sources,
                             verify_images=None)
    message = str(e.value)
    assert "(4 images refused)" in message and "images[5]" not in message
    assert "\x1b" not in message and "\n" not in message
    assert "\\x1b[31m" in message
    assert len(message) < 4000
    assert message.endswith("nothing was written")
    assert not (tmp_path / "ds" / "train.manifest.json").exists()
