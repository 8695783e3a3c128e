"""sluice: the pipeline as a PyTorch data loader, and shards from Python (docs/python.md).

    import sluice
    loader = sluice.Loader("out/dataset", batch_size=32, shuffle=True)  # was DataLoader(...)
    for images, labels in loader:    # images [B, 1, 28, 28] float32 (ToTensor), labels int64
        ...
    print(loader.report_text())      # which stage limits the run: your step, or the data

    p = sluice.probe(dataloader)     # any other loader: its wait, your step, and what
    for x, y in p: ...               # replacing it would gain (p.replay(steps=50))

Batches are zero-copy views of the pipeline's buffers (DLPack); a buffer goes back to the
pipeline when torch frees the last tensor that views it. A caller that keeps many batches gets
copies once it holds half of the buffers (docs/python.md, "Zero copy").
"""
import inspect
import math
import numbers
import os
import time
from collections.abc import Mapping

import torch
import torch.utils.dlpack

from . import _sluice
from ._sluice import DataLossError, Dataset
from . import transforms as _transforms
from .probe import Probe, probe

__all__ = ["Loader", "Dataset", "DataLossError", "write_dataset", "probe", "Probe"]

_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.uint8: "u8"}


def write_dataset(out, split, images, labels, records_per_shard=16384, records_per_frame=256,
                  zstd_level=3, threads=0, layout=None, num_classes=None,
                  frame_bytes=4 << 20, codec=None, classes=None, sources=None):
    """Writes split `split` of a shard dataset into directory `out` (the code of
    `sluice-shard create`). Atomic; returns {"split", "records", "shards", "num_classes"}.

    images: a list of bytes, each an encoded JPEG or PNG file, stored as it is (shard
    version 2; frames close at records_per_frame records or frame_bytes raw bytes; codec
    "none" (the default for them) or "zstd"; classes: optional class names, index = label,
    recorded in the manifest; sources: optional, one str per image, e.g. its file path,
    recorded in the manifest to name a record that fails to decode); an empty or non-JPEG/PNG
    item is refused naming its index.
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
    if isinstance(images, (list, tuple)):
        return _write_encoded(out, split, images, labels, records_per_shard, records_per_frame,
                              zstd_level, threads, layout, num_classes, frame_bytes, codec,
                              classes, sources)
    if frame_bytes != 4 << 20 or codec is not None or classes is not None or sources is not None:
        raise ValueError("frame_bytes, codec, classes and sources apply to encoded images (a "
                         "list of bytes); arrays are stored as zstd frames of records_per_frame "
                         "records")
    if layout is not None and layout not in ("NHWC", "NCHW"):
        raise ValueError("layout: expected None, 'NHWC' or 'NCHW', got %r" % (layout,))
    num_classes = _int_arg("num_classes", num_classes, 1, 2**31 - 1, none_ok=True,
                           meaning=" (None: the largest label + 1)")
    out, split, records_per_shard, records_per_frame, zstd_level, threads = _common_write_args(
        out, split, records_per_shard, records_per_frame, zstd_level, threads)
    return _sluice.write_dataset(out, split, np.asarray(images), np.asarray(labels),
                                 records_per_shard, records_per_frame, zstd_level, threads,
                                 layout or "", num_classes or 0)


def _common_write_args(out, split, records_per_shard, records_per_frame, zstd_level, threads):
    """The arguments write_dataset takes for arrays and encoded images alike, checked against
    the ranges of sluice-shard create's flags; TypeError or ValueError naming the one wrong."""
    records_per_shard = _int_arg("records_per_shard", records_per_shard, 1)
    records_per_frame = _int_arg("records_per_frame", records_per_frame, 1, 2**32 - 1)
    zstd_level = _int_arg("zstd_level", zstd_level, 1, 22)
    threads = _int_arg("threads", threads, 0, _sluice.RESOURCE_RANGES["threads"][1],
                       meaning=" (0: all usable cores)")
    out = _path_arg("out", out)
    if not isinstance(split, str):
        raise TypeError("split: expected a str, got %r (%s)" % (split, type(split).__name__))
    return out, split, records_per_shard, records_per_frame, zstd_level, threads


def _write_encoded(out, split, images, labels, records_per_shard, records_per_frame,
                   zstd_level, threads, layout, num_classes, frame_bytes, codec, classes,
                   sources):
    """write_dataset for a list of encoded images (arguments as write_dataset's)."""
    import numpy as np
    if layout is not None:
        raise ValueError("layout: applies to 4-D arrays, not to encoded images")
    codec = "none" if codec is None else codec
    if codec not in ("none", "zstd"):
        raise ValueError("codec: expected None, 'none' or 'zstd', got %r" % (codec,))
    if classes is not None:
        classes = list(classes)
        if not all(isinstance(c, str) for c in classes):
            raise TypeError("classes: expected a list of str (class names, index = label)")
        if num_classes is not None and num_classes != len(classes):
            raise ValueError("classes: %d names for num_classes=%d" % (len(classes), num_classes))
        num_classes = len(classes)
    if sources is not None:
        sources = list(sources)
        if not all(isinstance(x, str) for x in sources) or len(sources) != len(images):
            raise TypeError("sources: expected a list of %d str (one per image)" % len(images))
    num_classes = _int_arg("num_classes", num_classes, 1, 2**31 - 1, none_ok=True,
                           meaning=" (None: the largest label + 1)")
    out, split, records_per_shard, records_per_frame, zstd_level, threads = _common_write_args(
        out, split, records_per_shard, records_per_frame, zstd_level, threads)
    frame_bytes = _int_arg("frame_bytes", frame_bytes, 1, 2**31)
    return _sluice.write_encoded_dataset(out, split, list(images), np.asarray(labels),
                                         records_per_shard, records_per_frame, frame_bytes,
                                         codec, zstd_level, threads, num_classes or 0,
                                         classes or [], sources or [])


_INT64_MAX = 2**63 - 1
_MAX_BATCH_SIZE = 2**31 - 1   # as sluice-train's --batch-size: the backends index with int32
_MAX_SHUFFLE_WINDOW = 2**20   # as --shuffle-window (frames; 0 means the whole split)
_MAX_EPOCH = 2**32 - 1        # set_epoch, load_state_dict


def _int_arg(name, value, minimum, maximum=_INT64_MAX, none_ok=False, meaning=""):
    """`value` as an int in [minimum, maximum] (None passes when none_ok); TypeError or
    ValueError naming the argument, the value and what is expected otherwise."""
    if value is None and none_ok:
        return None
    expected = "an int" + (" or None" if none_ok else "")
    # A bool is an int to Python, but True as a count or a size is a slip: a TypeError here as
    # for every int argument.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s: expected %s, got %r (%s)" % (name, expected, value,
                                                          type(value).__name__))
    value = int(value)
    if value < minimum or value > maximum:
        # ">= min" only for a value below it: a value above an unnamed maximum gets the range.
        bound = (">= %d" % minimum if maximum == _INT64_MAX and value < minimum
                 else "in [%d, %d]" % (minimum, maximum))
        raise ValueError("%s: must be %s %s%s, got %d" % (name, expected, bound, meaning, value))
    return value


def _resource_arg(name, value, none_ok=False, meaning=""):
    """A resource argument of the Loader: the type and the sign here, the range in C++ with
    sluice-train's message (pipeline/resource_limits.h); a value beyond int64, which cannot
    reach C++, is refused here naming the real range."""
    minimum, maximum = _sluice.RESOURCE_RANGES[name]
    if isinstance(value, numbers.Integral) and -_INT64_MAX - 1 <= value <= _INT64_MAX:
        maximum = _INT64_MAX
        if name == "read_ahead_frames":  # its minimum too is C++'s, with --read-ahead's message
            minimum = -_INT64_MAX - 1
    return _int_arg(name, value, minimum, maximum, none_ok=none_ok, meaning=meaning)


def _bool_arg(name, value):
    """`value` if it is a bool; TypeError naming the argument otherwise ('no' and 2 are not)."""
    if not isinstance(value, bool):
        raise TypeError("%s: expected True or False, got %r (%s)" % (name, value,
                                                                    type(value).__name__))
    return value


def _path_arg(name, value):
    """`value` as a str path; TypeError naming the argument unless it is a str or an
    os.PathLike giving one (None, bytes and numbers are not paths here)."""
    path = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(path, str):
        raise TypeError("%s: expected a str or os.PathLike, got %r (%s)" % (name, value,
                                                                           type(value).__name__))
    return path


# normalize=(mean, std): the ranges of sluice-train's --normalize-mean and --normalize-std.
_NORMALIZE_RANGES = (("mean", -10.0, 10.0), ("std", 1e-6, 1e3))


def _normalize_arg(normalize):
    """(mean, std) as lists of floats (one value for every channel, or one per channel), each
    value finite and in its range (std also > 0); ValueError naming the one that is not."""
    try:
        mean, std = normalize
        values = (_channel_values(mean), _channel_values(std))
    except (TypeError, ValueError):
        raise ValueError("normalize: expected (mean, std), each a number or one number per "
                         "channel, or None, got %r" % (normalize,)) from None
    for channel_values, (what, low, high) in zip(values, _NORMALIZE_RANGES):
        for value in channel_values:
            if not (math.isfinite(value) and low <= value <= high):
                raise ValueError("normalize: %s must be a finite number in [%g, %g], got %r"
                                 % (what, low, high, value))
    return values


def _distributed_default(rank, world_size):
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        if rank is None:
            rank = dist.get_rank()
        if world_size is None:
            world_size = dist.get_world_size()
    return (0 if rank is None else rank), (1 if world_size is None else world_size)


def _device_name(device):
    """The device as sluice names it (--device's grammar, device/device_spec.h): 'cpu',
    'sim[:N]' or 'cuda:N'; 'cuda' is torch's current CUDA device, 'auto' a CUDA device when
    there is one, else the CPU."""
    platform, ordinal = _sluice.parse_device(str(device))
    if platform == "cuda" and ordinal < 0:
        ordinal = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return platform if ordinal < 0 else "%s:%d" % (platform, ordinal)


def _channel_values(v):
    """A mean or std: one number (every channel) or a sequence of one per channel."""
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return [float(v)]
    values = [float(x) for x in v]
    if not values:
        raise ValueError("empty")
    return values


# DataLoader's (and its Dataset's) arguments that sluice.Loader does not take, and what to use
# instead: the table "From DataLoader" in docs/python.md, one line each.
_FROM_DATALOADER = {
    "dataset": "pass the shard dataset's directory or manifest as path (write it once with "
               "sluice.write_dataset or sluice-shard create)",
    "sampler": "sluice has no sampler: the order is its deterministic, resumable shuffle "
               "(shuffle, seed, shuffle_window_frames); DistributedSampler is rank/world_size",
    "batch_sampler": "sluice has no batch sampler: pass batch_size (the global batch), "
                     "shuffle and drop_last",
    "num_workers": "sluice has no worker processes: the pipeline's threads are threads=N "
                   "(None or 0: all usable cores)",
    "collate_fn": "batches arrive already stacked ([B, C, H, W] images, [B] int64 labels); "
                  "sluice has no collate step",
    "pin_memory": "sluice uploads batches itself: pass device='cuda' for batches on the GPU",
    "pin_memory_device": "pass device='cuda:N': batches are delivered on that GPU",
    "timeout": "sluice has no worker processes to wait for; a missing or corrupt shard is an "
               "error at once (or a counted skip with on_corrupt='skip')",
    "worker_init_fn": "sluice has no worker processes to initialise; the order's randomness "
                      "is seed",
    "multiprocessing_context": "sluice has no worker processes (its threads are threads=N); "
                               "for fork see docs/python.md, \"Fork\"",
    "generator": "pass seed=N (an int in [0, 2**64 - 1]); the shuffle derives from it",
    "prefetch_factor": "read_ahead_frames (frames decompressed ahead) and pool_size (batch "
                       "buffers in flight) set how far the pipeline runs ahead",
    "persistent_workers": "sluice has no workers; a Loader keeps its dataset and device "
                          "between epochs",
    "transform": "pass transforms=[...] (sluice.transforms ops or torchvision's of the same "
                 "names, a Compose, or a --transforms string; docs/transforms.md); dtype and "
                 "normalize cover ToTensor and a final Normalize",
    "target_transform": "sluice has no label transforms; labels arrive as int64 [B]",
}


def _refuse_other_arguments(other_arguments):
    """TypeError for the first argument Loader does not take: DataLoader's name what replaces
    them (docs/python.md, "From DataLoader"); any other lists the Loader's arguments."""
    for name in other_arguments:
        if name in _FROM_DATALOADER:
            raise TypeError("sluice.Loader: %s is DataLoader's: %s (docs/python.md, \"From "
                            "DataLoader\")" % (name, _FROM_DATALOADER[name]))
        known = [p for p in inspect.signature(Loader.__init__).parameters
                 if p not in ("self", "other_arguments")]
        raise TypeError("sluice.Loader: unexpected argument %r; its arguments: %s"
                        % (name, ", ".join(known)))


class Loader:
    """Iterates (images, labels) batches of a shard dataset, in sluice's deterministic order.

    images: [B, C, H, W] in `dtype` (torchvision's ToTensor layout; float values x/255,
    bitwise equal to ToTensor, or (x/255 - mean)/std with normalize=(mean, std)); uint8 gives
    the raw pixels. labels: int64 [B]. batch_size is the global batch size: with world_size N
    each rank gets its slice of every global batch (docs/architecture.md, "Data parallel").
    One iteration is one epoch; the next iteration starts the next epoch (set_epoch sets it).
    Defaults are sluice-train's (no shuffle; threads None or 0: all usable cores); split picks
    a split of a dataset directory. transforms: ops each sample goes through before `dtype`
    and `normalize` (a list of sluice.transforms ops or torchvision's of the same names, a
    Compose, or a --transforms string; docs/transforms.md, "Using a chain"); the images are
    then the chain's output shape. DataLoader's arguments are refused naming their sluice
    equivalent (docs/python.md, "From DataLoader").
    """

    def __init__(self, path, batch_size, shuffle=False, seed=0, drop_last=False, device="cpu",
                 dtype=torch.float32, normalize=None, threads=None, rank=None, world_size=None,
                 on_corrupt="fail", shuffle_window_frames=64, pool_size=None,
                 device_ring_depth=_sluice.DEFAULT_DEVICE_RING_DEPTH, device_zero_copy=True,
                 decompress_threads=None, preprocess_threads=None, read_ahead_frames=4,
                 max_corrupt_fraction=0.01, split=None, transforms=None, **other_arguments):
        _refuse_other_arguments(other_arguments)
        self._arguments = {k: v for k, v in locals().items()
                           if k not in ("self", "other_arguments")}  # check_advice
        path = _path_arg("path", path)
        if split is not None and not isinstance(split, str):
            raise TypeError("split: expected a str or None, got %r (%s)"
                            % (split, type(split).__name__))
        path = _sluice._split_manifest(path, split)
        shuffle = _bool_arg("shuffle", shuffle)
        drop_last = _bool_arg("drop_last", drop_last)
        device_zero_copy = _bool_arg("device_zero_copy", device_zero_copy)
        batch_size = _int_arg("batch_size", batch_size, 1, _MAX_BATCH_SIZE)
        seed = _int_arg("seed", seed, 0, 2**64 - 1)
        shuffle_window_frames = _int_arg("shuffle_window_frames", shuffle_window_frames, 0,
                                         _MAX_SHUFFLE_WINDOW, meaning=" (0: the whole split)")
        # Types and signs here; the maxima are sluice-train's (pipeline/resource_limits.h).
        # 0 as sluice-train's --threads=0 (all usable cores) and --decompress-threads=0 (threads).
        threads = _resource_arg("threads", threads, none_ok=True,
                                meaning=" (None or 0: all usable cores)")
        decompress_threads = _resource_arg("decompress_threads", decompress_threads,
                                           none_ok=True, meaning=" (None or 0: threads)")
        preprocess_threads = _resource_arg("preprocess_threads", preprocess_threads,
                                           none_ok=True, meaning=" (None or 0: threads)")
        pool_size = _resource_arg("pool_size", pool_size, none_ok=True,
                                  meaning=" (None: automatic)")
        device_ring_depth = _resource_arg("device_ring_depth", device_ring_depth)
        read_ahead_frames = _resource_arg("read_ahead_frames", read_ahead_frames)
        rank = _int_arg("rank", rank, 0, 2**32 - 2, none_ok=True, meaning=" (below world_size)")
        world_size = _int_arg("world_size", world_size, 1, 2**32 - 1, none_ok=True)
        if isinstance(max_corrupt_fraction, bool) or not isinstance(max_corrupt_fraction,
                                                                    numbers.Real):
            raise TypeError("max_corrupt_fraction: expected a number in [0, 1], got %r"
                            % (max_corrupt_fraction,))
        if not (math.isfinite(max_corrupt_fraction) and 0 <= max_corrupt_fraction <= 1):
            raise ValueError("max_corrupt_fraction: must be a finite number in [0, 1], got %r"
                             % (max_corrupt_fraction,))
        self._max_corrupt_fraction = float(max_corrupt_fraction)
        if dtype not in _DTYPES:
            raise ValueError("dtype: must be torch.float32, torch.float16 or torch.uint8, got %r"
                             % (dtype,))
        mean, std = [0.0], [1.0]
        if normalize is not None:
            if dtype == torch.uint8:
                raise ValueError("normalize: uint8 batches carry raw pixels; normalize needs "
                                 "dtype torch.float32 or torch.float16")
            mean, std = _normalize_arg(normalize)
        if on_corrupt not in ("fail", "skip"):
            raise ValueError("on_corrupt: must be 'fail' or 'skip', got %r" % (on_corrupt,))
        rank, world_size = _distributed_default(rank, world_size)
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError("rank %r / world_size %r: need world_size >= 1 and "
                             "0 <= rank < world_size" % (rank, world_size))
        self._device = _device_name(device)
        self._torch_device = torch.device(self._device if self._device.startswith("cuda")
                                          else "cpu")
        # The chain as sluice-train's --transforms takes it; built against the dataset by
        # _LoaderCore (ValueError naming the op that does not fit).
        transforms_text = _transforms.chain_text(transforms)
        if dtype == torch.uint8 and _transforms.has_to_tensor(transforms):
            raise ValueError("transforms: ToTensor gives float32 x/255, but dtype=torch.uint8 "
                             "delivers raw pixels; drop ToTensor or use dtype=torch.float32")
        self.rank, self.world_size = rank, world_size
        self._core = _sluice._LoaderCore(
            str(path), batch_size, bool(shuffle), int(seed), int(shuffle_window_frames),
            bool(drop_last), self._device, _DTYPES[dtype], mean, std, threads or 0, rank,
            world_size, on_corrupt, pool_size or 0, device_ring_depth, bool(device_zero_copy),
            decompress_threads or 0, preprocess_threads or 0, int(read_ahead_frames),
            transforms_text)
        self._order = {"batch_size": batch_size, "seed": int(seed), "shuffle": bool(shuffle),
                       "window": int(shuffle_window_frames), "drop_last": bool(drop_last),
                       "transforms": self._core.transforms_identity()}
        self._epoch = 0
        self._step = 0
        self._pass = None
        self._pass_epoch = None
        self._epoch_rates = []  # (epoch, samples, seconds, samples/s) of each finished pass

    def __len__(self):
        """Batches per epoch: global steps (every rank gets every step when world_size > 1;
        with one rank, batches that on_corrupt='skip' emptied entirely are not delivered)."""
        return self._core.steps_per_epoch()

    def set_epoch(self, epoch):
        """The next iteration delivers epoch `epoch` (an int in [0, 2**32 - 1]) from its first
        step (as on DistributedSampler). Without it, each iteration delivers the epoch after
        the last."""
        self._epoch, self._step = _int_arg("set_epoch: epoch", epoch, 0, _MAX_EPOCH), 0

    def state_dict(self):
        """Where the next batch comes from: {"order": {...}, "dataset": {"manifest_xxh3",
        "records"}, "epoch": e, "step": s}."""
        epoch, step = self._epoch, self._step
        if step >= len(self):  # the epoch's last batch was delivered
            epoch, step = epoch + 1, 0
        return {"order": dict(self._order), "dataset": self._dataset_identity(),
                "epoch": epoch, "step": step}

    def _dataset_identity(self):
        # What sluice-train's checkpoints record of the data (engine/job/resume.cc).
        return {"manifest_xxh3": self._core.manifest_xxh3(), "records": self._core.record_count()}

    def load_state_dict(self, state):
        """Resumes at state["epoch"], state["step"]: the next iteration continues the epoch
        exactly where the saved loader stopped. The state must be of this dataset and this
        order (as sluice-train's checkpoints), with the step within the epoch."""
        if not isinstance(state, Mapping):
            raise TypeError("load_state_dict: expected the dict of state_dict(), got %r"
                            % (type(state).__name__,))
        for key in ("order", "dataset", "epoch", "step"):
            if key not in state:
                raise ValueError("load_state_dict: the state has no %r (expected the dict of "
                                 "state_dict(): order, dataset, epoch, step)" % key)
        for key in ("order", "dataset"):
            if not isinstance(state[key], Mapping):
                raise TypeError("load_state_dict: state[%r] must be a dict as state_dict() "
                                "gives, got %r" % (key, state[key]))
        order = state["order"]
        for key, value in self._order.items():
            if order.get(key) != value:
                raise ValueError("load_state_dict: order.%s is %r in the state but %r in this "
                                 "loader; resuming needs the same order" % (key, order.get(key), value))
        mine = self._dataset_identity()
        theirs = {key: state["dataset"].get(key) for key in mine}
        if theirs != mine:
            raise ValueError(
                "load_state_dict: the state is of another dataset (manifest XXH3 %s, %s records) "
                "than this loader's %s (%s, %d records); resuming needs the same dataset"
                % (theirs["manifest_xxh3"], theirs["records"], self._core.manifest_path(),
                   mine["manifest_xxh3"], mine["records"]))
        epoch = _int_arg("load_state_dict: epoch", state["epoch"], 0, _MAX_EPOCH)
        step = _int_arg("load_state_dict: step", state["step"], 0, len(self),
                        meaning=" (the steps of an epoch)")
        if step == len(self):
            if epoch == _MAX_EPOCH:
                raise ValueError("load_state_dict: the state is past the last epoch %d"
                                 % _MAX_EPOCH)
            epoch, step = epoch + 1, 0
        self._epoch, self._step = epoch, step

    def __iter__(self):
        previous, self._pass = self._pass, None
        if previous is not None:
            previous.cancel()
        # Dropped before the next pass starts: once no batch of it is alive, its pipeline gives
        # its buffers back for the next one to reuse instead of allocating (and page-faulting)
        # its own.
        del previous
        self._pass = self._core.start(self._epoch, self._step)
        self._pass_epoch = self._epoch
        return _Iterator(self, self._pass)

    def _last_pass(self, what):
        if self._pass is None:
            raise ValueError("%s: the loader has not been iterated yet" % what)
        return self._pass

    def report(self, check_advice=False, steps=100, rounds=2):
        """The bottleneck report of the latest pass (the current or last epoch) as a dict, in
        the schema of `sluice-train --report-json` (docs/report-schema.md); the compute stage is
        the Python code between next() calls.

        check_advice=True runs each piece of the verdict's advice as an experiment and adds
        "advice_check" (docs/python.md): `steps` batches from the start of the epoch, with your
        step's measured mean time simulated as a sleep, as the loader was and with the advised
        argument changed, `rounds` times each in turn; the better rate of each is kept."""
        report = self._last_pass("report()").report_json()
        if check_advice:
            report["advice_check"] = _check_advice(self._arguments, report, steps, rounds)
        return report

    def report_text(self, check_advice=False, steps=100, rounds=2):
        """The report's table, verdict and figures, as text; with check_advice=True, followed
        by the measured before and after of each piece of advice (see report())."""
        text = self._last_pass("report_text()").report_text()
        if check_advice:
            report = self._last_pass("report_text()").report_json()
            text += _advice_check_text(_check_advice(self._arguments, report, steps, rounds),
                                       steps, rounds)
        return text

    def report_html(self, path):
        """Writes the report of the latest pass as one self-contained HTML page at `path` (no
        network, no script): the chain of stages with the limiting one marked, the verdict,
        the rate of each pass this loader finished, and a timeline of your step against the
        wait for data (docs/bottleneck.md, "The picture"). Returns the path."""
        self._last_pass("report_html()").report_html(str(path), list(self._epoch_rates))
        return str(path)

    def skipped(self):
        """on_corrupt='skip': {"frames", "records", "messages"} skipped in the latest pass."""
        s = self._last_pass("skipped()").stats_json()
        return {"frames": s["skipped_frames"], "records": s["skipped_records"],
                "messages": list(s["corrupt_frames"])}


# The Loader argument each advice setting names (docs/report-schema.md, verdict.advice[]).
_ADVICE_ARGUMENTS = {"read-ahead": "read_ahead_frames", "decompress-threads": "decompress_threads",
                     "preprocess-threads": "preprocess_threads", "pool-size": "pool_size",
                     "device-ring-depth": "device_ring_depth"}
# Why the others are not rerun here.
_ADVICE_NOT_RUN = {
    "h2d-format": "dtype changes what your step receives (it must normalize on the device): "
                  "a rerun without your step cannot measure it",
    "cuda-graph": "a setting of sluice-train's CUDA backend, not of the loader",
    "zstd-level": "a setting of the dataset (sluice-shard create), not of the loader"}


def _step_seconds(report):
    """Your step's mean time in the reported pass: the compute stage's busy time per step."""
    steps = report.get("steps", 0)
    for row in report["stages"]:
        if row["stage"] == "compute" and steps > 0:
            return row["busy_ns"] / 1e9 / steps
    return 0.0


def _span_rate(arguments, steps, step_seconds):
    """Samples/s of the first `steps` batches of epoch 0 on a Loader with `arguments`, each
    followed by a sleep of `step_seconds` in place of the training step."""
    loader = Loader(**arguments)
    samples = 0
    start = time.perf_counter()
    for index, (images, _labels) in enumerate(loader):
        samples += images.shape[0]
        if step_seconds > 0:
            time.sleep(step_seconds)
        if index + 1 >= steps:
            break
    seconds = time.perf_counter() - start
    loader._pass.cancel()
    return samples / seconds if seconds > 0 else 0.0


def _check_advice(arguments, report, steps, rounds):
    """Each piece of report's advice rerun as an experiment (Loader.report(check_advice=True))."""
    if steps < 1 or rounds < 1:
        raise ValueError("check_advice: steps and rounds must be >= 1, got %r and %r"
                         % (steps, rounds))
    step_seconds = _step_seconds(report)
    checks = []
    for advice in report["verdict"]["advice"]:
        check = {"setting": advice["setting"], "value": advice["value"], "text": advice["text"],
                 "note": "", "before_samples_per_s": 0.0, "after_samples_per_s": 0.0,
                 "speedup": 0.0, "steps": steps, "step_seconds": step_seconds}
        name = _ADVICE_ARGUMENTS.get(advice["setting"])
        if name is None:
            check["note"] = _ADVICE_NOT_RUN.get(advice["setting"], "not a Loader argument")
            checks.append(check)
            continue
        after = dict(arguments, **{name: int(advice["value"])})
        for _ in range(rounds):
            check["before_samples_per_s"] = max(check["before_samples_per_s"],
                                                _span_rate(arguments, steps, step_seconds))
            check["after_samples_per_s"] = max(check["after_samples_per_s"],
                                               _span_rate(after, steps, step_seconds))
        if check["before_samples_per_s"] > 0:
            check["speedup"] = check["after_samples_per_s"] / check["before_samples_per_s"]
        checks.append(check)
    return checks


def _advice_check_text(checks, steps, rounds):
    if not checks:
        return "\ncheck-advice: the report suggests no change of an argument\n"
    lines = ["", "check-advice (each change against the loader as it was, %d batches with your "
             "step as a sleep, the better of %d runs each):" % (steps, rounds)]
    for c in checks:
        if c["note"]:
            lines.append("  %-28s not run: %s" % (c["text"], c["note"]))
            continue
        lines.append("  %-28s before %8.1f k  after %8.1f k samples/s  %.2fx%s" % (
            c["text"], c["before_samples_per_s"] / 1e3, c["after_samples_per_s"] / 1e3,
            c["speedup"], "" if c["speedup"] >= 1.1 else
            "  (less than 1.1x: this advice did not pay here)"))
    return "\n".join(lines) + "\n"


def _check_corrupt_budget(loader, run):
    """on_corrupt='skip': DataLossError when more than max_corrupt_fraction of the records the
    finished pass read were skipped as corrupt (sluice-train's --max-corrupt-fraction)."""
    stats = run.stats_json()
    skipped, delivered = stats["skipped_records"], stats["samples_delivered"]
    if skipped == 0:
        return
    fraction = skipped / (skipped + delivered)
    if fraction <= loader._max_corrupt_fraction:
        return
    messages = list(stats["corrupt_frames"])
    raise DataLossError(
        "%s: %d of %d records read in epoch %d were skipped as corrupt (%.4g), above "
        "max_corrupt_fraction=%g; first: %s"
        % (loader._core.manifest_path(), skipped, skipped + delivered, loader._pass_epoch,
           fraction, loader._max_corrupt_fraction,
           messages[0] if messages else "(no message)"))


class _Iterator:
    def __init__(self, loader, run):
        self._loader = loader
        self._pass = run
        self._cuda = loader._device.startswith("cuda")
        self._ended = False

    def __iter__(self):
        return self

    def __next__(self):
        stream = 0
        if self._cuda:
            stream = torch.cuda.current_stream(self._loader._torch_device).cuda_stream
        item = self._pass.next(stream)
        loader = self._loader
        if item is None:
            ended = self._ended
            if loader._pass is self._pass:
                if not ended:
                    samples, seconds, rate = self._pass.epoch_rate()
                    if samples > 0:
                        loader._epoch_rates.append((loader._pass_epoch, samples, seconds, rate))
                loader._epoch, loader._step = loader._pass_epoch + 1, 0
            self._ended = True
            if not ended:
                _check_corrupt_budget(loader, self._pass)
            raise StopIteration
        images_capsule, labels_capsule, copy, epoch, step = item
        images = torch.utils.dlpack.from_dlpack(images_capsule)
        labels = torch.utils.dlpack.from_dlpack(labels_capsule)
        if labels.dtype != torch.int64:  # device batches: the buffer's int32, converted there
            labels = labels.to(torch.int64)
        if copy:
            # Host: the caller holds half of the pipeline's buffers. Device, with
            # device_zero_copy=False: every batch. A copy (on the current stream), and the
            # buffer goes back at once (the zero-copy tensor dies here).
            images = images.clone()
        if loader._pass is self._pass:
            loader._epoch, loader._step = epoch, step + 1
        return images, labels
