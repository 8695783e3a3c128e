"""sluice.write_dataset: a split of a shard dataset from numpy arrays or encoded JPEG/PNG files,
written by the code of `sluice-shard create` (docs/python.md, "Datasets"). The arguments' types
and ranges (those of its flags) are checked here; the arrays' shapes, the labels and the images'
signatures in C++ (python/src/writer.cc)."""
from collections.abc import Iterator

from . import _sluice
from ._args import (_int_arg, _manifest_name, _native_path, _output_dir_arg, _printable,
                    _text_arg, _type_name)


def write_dataset(out, split, images, labels, records_per_shard=16384, records_per_frame=256,
                  zstd_level=3, threads=0, layout=None, num_classes=None,
                  frame_bytes=4 << 20, codec=None, classes=None, sources=None,
                  max_image_pixels=_sluice.DEFAULT_MAX_IMAGE_PIXELS, verify_images="structure"):
    """Writes split `split` of a shard dataset into directory `out` (the code of
    `sluice-shard create`). Atomic; returns {"split", "records", "shards", "num_classes"}.

    images: a list of bytes, each an encoded JPEG or PNG file, stored as it is (shard
    version 2; frames close at records_per_frame records or frame_bytes raw bytes; codec
    "none" (the default for them) or "zstd"; classes: optional class names, index = label,
    recorded in the manifest; sources: optional, one str per image, e.g. its file path,
    recorded in the manifest to name a record that fails to decode). Each image is checked as
    `sluice-shard create` checks a folder's files, before anything is written; a refused one
    is named by its index (and source), all of them counted (ValueError):
      - verify_images="structure" (the default, as --verify-images=structure): the file's
        markers or chunks walked to its end, so a truncated or non-JPEG/PNG file is refused
        (docs/formats/shard.md, "Ingestion checks"); "decode": each image also decoded with
        training's decoder (slower; finds damaged compressed data, CMYK JPEGs, 16-bit PNGs);
        None: only the signature and the header's size are checked, for damaged images stored
        on purpose (training then refuses them when it decodes them);
      - max_image_pixels: an image whose header declares more pixels (width x height) is
        refused; default 89478485, PIL's Image.MAX_IMAGE_PIXELS, as `sluice-shard create
        --max-image-pixels`; None or 0: no bound.
    A generator or other iterator is refused: pass list(images).
    Or an array, uint8 or float32, one of
      [N, D]        feature vectors, stored as 1 channel of 1 x D (batches: [B, 1, 1, D]);
      [N, H, W]     one channel;
      [N, H, W, C]  layout="NHWC" (channels last, stored as is);
      [N, C, H, W]  layout="NCHW" (channels first, transposed to the stored H, W, C).
    A 4-D array without `layout` is read as NHWC only when its last dimension is at most 4 and
    its second more than 4; any other 4-D shape is refused (ValueError showing both readings).
    labels: uint8, int32 or int64 of shape [N], class indices in [0, num_classes);
    num_classes (None: the largest label + 1) is recorded in the manifest, and a negative or
    too large label is refused, naming the first such record and its value."""
    import numpy as np
    if isinstance(images, Iterator):  # NumPy would read it as one object, or consume it
        raise TypeError("images: got a %s; pass a list (list(images)): of bytes, each an "
                        "encoded JPEG or PNG file, or a uint8 or float32 array"
                        % _type_name(images))
    if isinstance(images, (list, tuple)):
        _refuse_zero_records(len(images), "an empty %s" % type(images).__name__, labels)
        return _write_encoded(out, split, images, labels, records_per_shard, records_per_frame,
                              zstd_level, threads, layout, num_classes, frame_bytes, codec,
                              classes, sources, max_image_pixels, verify_images)
    if (frame_bytes != 4 << 20 or codec is not None or classes is not None or sources is not None
            or max_image_pixels != _sluice.DEFAULT_MAX_IMAGE_PIXELS
            or not (isinstance(verify_images, str) and verify_images == "structure")):
        raise ValueError("frame_bytes, codec, classes, sources, max_image_pixels and "
                         "verify_images apply to "
                         "encoded images (a list of bytes); arrays are stored as zstd frames of "
                         "records_per_frame records")
    if layout is not None and layout not in ("NHWC", "NCHW"):
        raise ValueError("layout: expected None, 'NHWC' or 'NCHW', got %s" % _printable(layout))
    num_classes = _int_arg("num_classes", num_classes, 1, 2**31 - 1, none_ok=True,
                           meaning=" (None: the largest label + 1)")
    out, split, records_per_shard, records_per_frame, zstd_level, threads = _common_write_args(
        out, split, records_per_shard, records_per_frame, zstd_level, threads)
    images = np.asarray(images)
    if images.dtype == object:
        raise ValueError("images: dtype must be uint8 or float32, got object (an array of Python "
                         "objects); pass encoded JPEG/PNG files as a list of bytes, pixels as a "
                         "uint8 or float32 array")
    if images.ndim >= 1:
        _refuse_zero_records(images.shape[0], "an array of shape %s" % (images.shape,), labels)
    return _sluice.write_dataset(_native_path("out", out), split, images, np.asarray(labels),
                                 records_per_shard, records_per_frame, zstd_level, threads,
                                 layout or "", num_classes or 0)


def _refuse_zero_records(count, what, labels):
    """ValueError for a split of zero records (`what` describes the empty images), or for no
    labels for `count` images: an empty list of labels is a float64 array to NumPy, and used to
    be refused for its dtype ("labels: dtype must be ..., got float64")."""
    import numpy as np
    if count == 0:
        raise ValueError("images: zero records (%s); a split needs at least one image, and "
                         "labels one label per image" % what)
    labels = np.asarray(labels)
    if labels.ndim == 1 and labels.shape[0] == 0:
        raise ValueError("labels: zero labels for %d images; expected one label per image "
                         "(an array of shape [%d])" % (count, count))


def _common_write_args(out, split, records_per_shard, records_per_frame, zstd_level, threads):
    """The arguments write_dataset takes for arrays and encoded images alike, checked against
    the ranges of sluice-shard create's flags; TypeError or ValueError naming the one wrong."""
    records_per_shard = _int_arg("records_per_shard", records_per_shard, 1)
    records_per_frame = _int_arg("records_per_frame", records_per_frame, 1, 2**32 - 1)
    zstd_level = _int_arg("zstd_level", zstd_level, 1, 22)
    threads = _int_arg("threads", threads, 0, _sluice.RESOURCE_RANGES["threads"][1],
                       meaning=" (0: all usable cores)")
    out = _output_dir_arg("out", out)
    if not isinstance(split, str):
        raise TypeError("split: expected a str, got %s (%s)" % (_printable(split),
                                                             _type_name(split)))
    split = _text_arg("split", split)
    return out, split, records_per_shard, records_per_frame, zstd_level, threads


def _write_encoded(out, split, images, labels, records_per_shard, records_per_frame,
                   zstd_level, threads, layout, num_classes, frame_bytes, codec, classes,
                   sources, max_image_pixels, verify_images):
    """write_dataset for a list of encoded images (arguments as write_dataset's)."""
    import numpy as np
    if verify_images is not None and (not isinstance(verify_images, str) or
                                      verify_images not in ("structure", "decode")):
        raise ValueError("verify_images: expected \"structure\", \"decode\" or None, got %s"
                         % _printable(verify_images))
    if layout is not None:
        raise ValueError("layout: applies to 4-D arrays, not to encoded images")
    codec = "none" if codec is None else codec
    if codec not in ("none", "zstd"):
        raise ValueError("codec: expected None, 'none' or 'zstd', got %s" % _printable(codec))
    if classes is not None:
        classes = list(classes)
        if not all(isinstance(c, str) for c in classes):
            raise TypeError("classes: expected a list of str (class names, index = label)")
        # As sluice-shard create records a folder's name: a byte that is not UTF-8 as \xNN.
        classes = [_manifest_name("classes[%d]" % i, c) for i, c in enumerate(classes)]
        first = {}
        for i, c in enumerate(classes):
            j = first.setdefault(c, i)
            if j != i:
                raise ValueError("classes: classes[%d] and classes[%d] would both be recorded as "
                                 "class %s (a byte that is not UTF-8 is written \\xNN); class "
                                 "names must differ" % (j, i, _printable(c)))
        if num_classes is not None and num_classes != len(classes):
            raise ValueError("classes: %d names for num_classes=%d" % (len(classes), num_classes))
        num_classes = len(classes)
    if sources is not None:
        sources = list(sources)
        if not all(isinstance(x, str) for x in sources) or len(sources) != len(images):
            raise TypeError("sources: expected a list of %d str (one per image)" % len(images))
        sources = [_manifest_name("sources[%d]" % i, x) for i, x in enumerate(sources)]
    num_classes = _int_arg("num_classes", num_classes, 1, 2**31 - 1, none_ok=True,
                           meaning=" (None: the largest label + 1)")
    out, split, records_per_shard, records_per_frame, zstd_level, threads = _common_write_args(
        out, split, records_per_shard, records_per_frame, zstd_level, threads)
    frame_bytes = _int_arg("frame_bytes", frame_bytes, 1, 2**31)
    max_image_pixels = _int_arg("max_image_pixels", max_image_pixels, 0, 2**63 - 1,
                                none_ok=True, meaning=" (None or 0: no bound)")
    return _sluice.write_encoded_dataset(_native_path("out", out), split, list(images),
                                         np.asarray(labels),
                                         records_per_shard, records_per_frame, frame_bytes,
                                         codec, zstd_level, threads, num_classes or 0,
                                         classes or [], sources or [], max_image_pixels or 0,
                                         verify_images or "none")
