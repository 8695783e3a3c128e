"""sluice: the pipeline as a PyTorch data loader, and shards from Python (docs/python.md).

    import sluice
    loader = sluice.Loader("out/dataset", batch_size=32)   # instead of DataLoader(...)
    for images, labels in loader:    # images [B, 1, 28, 28] float32 (ToTensor), labels int64
        ...
    print(loader.report_text())      # which stage limits the run: your step, or the data

    p = sluice.probe(dataloader)     # any other loader: its wait, your step, and what
    for x, y in p: ...               # replacing it would gain (p.replay(steps=50))

Batches are zero-copy views of the pipeline's buffers (DLPack); a buffer goes back to the
pipeline when torch frees the last tensor that views it. A caller that keeps many batches gets
copies once it holds half of the buffers (docs/python.md, "Zero copy").
"""
import torch
import torch.utils.dlpack

from . import _sluice
from ._sluice import DataLossError, Dataset
from .probe import Probe, probe

__all__ = ["Loader", "Dataset", "DataLossError", "write_dataset", "probe", "Probe"]

_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.uint8: "u8"}


def write_dataset(out, split, images, labels, records_per_shard=16384, records_per_frame=256,
                  zstd_level=3, threads=0):
    """Writes split `split` of a shard dataset into directory `out` (the code of
    `sluice-shard create`): images uint8 or float32 of shape [N, H, W] or [N, H, W, C],
    labels uint8, int32 or int64 of shape [N]. Atomic; returns {"split", "records", "shards"}."""
    import numpy as np
    return _sluice.write_dataset(str(out), split, np.asarray(images), np.asarray(labels),
                                 records_per_shard, records_per_frame, zstd_level, threads)


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


class Loader:
    """Iterates (images, labels) batches of a shard dataset, in sluice's deterministic order.

    images: [B, C, H, W] in `dtype` (torchvision's ToTensor layout; float values x/255,
    bitwise equal to ToTensor, or (x/255 - mean)/std with normalize=(mean, std)); uint8 gives
    the raw pixels. labels: int64 [B]. batch_size is the global batch size: with world_size N
    each rank gets its slice of every global batch (docs/architecture.md, "Data parallel").
    One iteration is one epoch; the next iteration starts the next epoch (set_epoch sets it).
    """

    def __init__(self, path, batch_size, shuffle=True, seed=0, drop_last=False, device="cpu",
                 dtype=torch.float32, normalize=None, threads=None, rank=None, world_size=None,
                 on_corrupt="fail", shuffle_window_frames=64, pool_size=None,
                 device_ring_depth=_sluice.DEFAULT_DEVICE_RING_DEPTH, device_zero_copy=True,
                 decompress_threads=None, preprocess_threads=None, read_ahead_frames=4):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError("batch_size: must be a positive int, got %r" % (batch_size,))
        if dtype not in _DTYPES:
            raise ValueError("dtype: must be torch.float32, torch.float16 or torch.uint8, got %r"
                             % (dtype,))
        mean, std = 0.0, 1.0
        if normalize is not None:
            if dtype == torch.uint8:
                raise ValueError("normalize: uint8 batches carry raw pixels; normalize needs "
                                 "dtype torch.float32 or torch.float16")
            try:
                mean, std = (float(v) for v in normalize)
            except (TypeError, ValueError):
                raise ValueError("normalize: expected (mean, std) or None, got %r"
                                 % (normalize,)) from None
            if std == 0:
                raise ValueError("normalize: std must not be 0")
        if on_corrupt not in ("fail", "skip"):
            raise ValueError("on_corrupt: must be 'fail' or 'skip', got %r" % (on_corrupt,))
        rank, world_size = _distributed_default(rank, world_size)
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError("rank %r / world_size %r: need world_size >= 1 and "
                             "0 <= rank < world_size" % (rank, world_size))
        if threads is not None and threads < 1:
            raise ValueError("threads: must be >= 1 or None (all usable cores), got %r"
                             % (threads,))
        for name, value in (("decompress_threads", decompress_threads),
                            ("preprocess_threads", preprocess_threads)):
            if value is not None and value < 1:
                raise ValueError("%s: must be >= 1 or None (threads), got %r" % (name, value))
        if read_ahead_frames < 1:
            raise ValueError("read_ahead_frames: must be >= 1, got %r" % (read_ahead_frames,))
        self._device = _device_name(device)
        self._torch_device = torch.device(self._device if self._device.startswith("cuda")
                                          else "cpu")
        self._order = {"batch_size": batch_size, "seed": int(seed), "shuffle": bool(shuffle),
                       "window": int(shuffle_window_frames), "drop_last": bool(drop_last)}
        self.rank, self.world_size = rank, world_size
        self._core = _sluice._LoaderCore(
            str(path), batch_size, bool(shuffle), int(seed), int(shuffle_window_frames),
            bool(drop_last), self._device, _DTYPES[dtype], mean, std, threads or 0, rank,
            world_size, on_corrupt, pool_size or 0, device_ring_depth, bool(device_zero_copy),
            decompress_threads or 0, preprocess_threads or 0, int(read_ahead_frames))
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
        """The next iteration delivers epoch `epoch` from its first step (as on
        DistributedSampler). Without it, each iteration delivers the epoch after the last."""
        self._epoch, self._step = int(epoch), 0

    def state_dict(self):
        """Where the next batch comes from: {"order": {...}, "epoch": e, "step": s}."""
        epoch, step = self._epoch, self._step
        if step >= len(self):  # the epoch's last batch was delivered
            epoch, step = epoch + 1, 0
        return {"order": dict(self._order), "epoch": epoch, "step": step}

    def load_state_dict(self, state):
        """Resumes at state["epoch"], state["step"]: the next iteration continues the epoch
        exactly where the saved loader stopped. The order must be this loader's."""
        order = state.get("order", {})
        for key, value in self._order.items():
            if order.get(key) != value:
                raise ValueError("load_state_dict: order.%s is %r in the state but %r in this "
                                 "loader; resuming needs the same order" % (key, order.get(key), value))
        epoch, step = int(state["epoch"]), int(state["step"])
        if step < 0 or step > len(self):
            raise ValueError("load_state_dict: step %d is outside the epoch (%d steps)"
                             % (step, len(self)))
        if step == len(self):
            epoch, step = epoch + 1, 0
        self._epoch, self._step = epoch, step

    def __iter__(self):
        if self._pass is not None:
            self._pass.cancel()
        self._pass = self._core.start(self._epoch, self._step)
        self._pass_epoch = self._epoch
        return _Iterator(self, self._pass)

    def _last_pass(self, what):
        if self._pass is None:
            raise ValueError("%s: the loader has not been iterated yet" % what)
        return self._pass

    def report(self):
        """The bottleneck report of the latest pass (the current or last epoch) as a dict, in
        the schema of `sluice-train --report-json` (docs/report-schema.md); the compute stage is
        the Python code between next() calls."""
        return self._last_pass("report()").report_json()

    def report_text(self):
        """The report's table, verdict and figures, as text."""
        return self._last_pass("report_text()").report_text()

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
            if loader._pass is self._pass:
                if not self._ended:
                    samples, seconds, rate = self._pass.epoch_rate()
                    if samples > 0:
                        loader._epoch_rates.append((loader._pass_epoch, samples, seconds, rate))
                loader._epoch, loader._step = loader._pass_epoch + 1, 0
            self._ended = True
            raise StopIteration
        images_capsule, labels_capsule, copy, epoch, step = item
        images = torch.utils.dlpack.from_dlpack(images_capsule)
        # Labels: int32 in the buffer, int64 for torch (a copy of B values).
        labels = torch.utils.dlpack.from_dlpack(labels_capsule).to(torch.int64)
        if copy:
            # Host: the caller holds half of the pipeline's buffers. Device, with
            # device_zero_copy=False: every batch. A copy (on the current stream), and the
            # buffer goes back at once (the zero-copy tensor dies here).
            images = images.clone()
        if loader._pass is self._pass:
            loader._epoch, loader._step = epoch, step + 1
        return images, labels
