"""sluice.Loader: the pipeline as a PyTorch data loader. Its arguments, its iteration (batches
as zero-copy DLPack tensors), state_dict()/load_state_dict() for exact resume, and the report
of the latest pass (docs/python.md)."""
import math
import numbers
import weakref
from collections.abc import Mapping

import torch
import torch.utils.dlpack

from . import _sluice
from . import transforms as _transforms
from ._args import (_MAX_BATCH_SIZE, _bool_arg, _int_arg, _native_path, _normalize_arg,
                    _output_path_arg, _path_arg, _printable, _refuse_other_arguments,
                    _resource_arg, _text_arg, _type_name)
from .advice_check import _advice_check_text, _check_advice
from .corruption_budget import _check_corrupt_budget
from .recent_passes import RecentPasses
from .recent_passes import annotate_advice as _annotate_recent_advice
from .recent_passes import headline_text as _recent_passes_headline
from .recent_passes import summary_text as _recent_passes_text

_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.uint8: "u8"}
_MEMORY_FORMATS = {torch.contiguous_format: "contiguous", torch.channels_last: "channels_last"}
_MAX_SHUFFLE_WINDOW = 2**20   # as --shuffle-window (frames; 0 means the whole split)
_MAX_EPOCH = 2**32 - 1        # set_epoch, load_state_dict; the last epoch a loader delivers


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
    platform, ordinal = _sluice.parse_device(_text_arg("device", str(device)))
    if platform == "cuda" and ordinal < 0:
        ordinal = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return platform if ordinal < 0 else "%s:%d" % (platform, ordinal)


class Loader:
    """Iterates (images, labels) batches of a shard dataset, in sluice's deterministic order.

    images: [B, C, H, W] in `dtype` (torchvision's ToTensor layout; float values x/255,
    bitwise equal to ToTensor, or (x/255 - mean)/std with normalize=(mean, std); bfloat16 and
    float16 are those float32 values rounded to nearest even, as tensor.to(dtype) rounds);
    uint8 gives the raw pixels. memory_format=torch.channels_last gives the same values in
    torch's channels_last strides, written so by the preprocess threads (no copy in Python).
    labels: int64 [B]. batch_size is the global batch size: with world_size N
    each rank gets its slice of every global batch (docs/architecture.md, "Data parallel").
    One iteration is one epoch; the next iteration starts the next epoch (set_epoch sets it).
    Defaults are sluice-train's (no shuffle; threads None or 0: all usable cores); split picks
    a split of a dataset directory. transforms: ops each sample goes through before `dtype`
    and `normalize` (a list of sluice.transforms ops or torchvision's of the same names, a
    Compose, or a --transforms string; docs/transforms.md, "Using a chain"); the images are
    then the chain's output shape. work_ahead: once an epoch's batches are all built, the next
    epoch's pipeline starts while your loop still takes them, so a pass does not begin with
    the pipeline filling nor end with the cores idle (host batches; docs/python.md, "Work
    ahead"). DataLoader's arguments are refused naming their sluice equivalent (docs/python.md,
    "From DataLoader").
    """
    # Its public name, as when it was defined in sluice/__init__.py: repr, pickle and the
    # report of sluice.probe(loader) (probe.loader: "sluice.Loader") show the type's module.
    __module__ = "sluice"

    def __init__(self, path, batch_size, shuffle=False, seed=0, drop_last=False, device="cpu",
                 dtype=torch.float32, normalize=None, threads=None, rank=None, world_size=None,
                 on_corrupt="fail", shuffle_window_frames=64, pool_size=None,
                 device_ring_depth=_sluice.DEFAULT_DEVICE_RING_DEPTH, device_zero_copy=True,
                 decompress_threads=None, preprocess_threads=None, read_ahead_frames=4,
                 max_corrupt_fraction=0.01, split=None, transforms=None, work_ahead=True,
                 memory_format=torch.contiguous_format, read_concurrency=None, cache_dir=None,
                 cache_bytes=16 << 30, **other_arguments):
        _refuse_other_arguments(other_arguments, Loader.__init__)
        self._arguments = {k: v for k, v in locals().items()
                           if k not in ("self", "other_arguments")}  # check_advice
        path = _path_arg("path", path)
        if split is not None and not isinstance(split, str):
            raise TypeError("split: expected a str or None, got %s (%s)"
                            % (_printable(split), _type_name(split)))
        if split is not None:
            split = _text_arg("split", split)
        path = _sluice._split_manifest(_native_path("path", path), split)
        shuffle = _bool_arg("shuffle", shuffle)
        drop_last = _bool_arg("drop_last", drop_last)
        device_zero_copy = _bool_arg("device_zero_copy", device_zero_copy)
        work_ahead = _bool_arg("work_ahead", work_ahead)
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
        read_concurrency = _int_arg("read_concurrency", read_concurrency, 1, 256, none_ok=True,
                                    meaning=" (None: tuned while reading)") or 0
        cache_bytes = _int_arg("cache_bytes", cache_bytes, 0, 2**63 - 1,
                               meaning=" (0: no cache)")
        cache_dir = "" if cache_dir is None else _native_path("cache_dir",
                                                              _path_arg("cache_dir", cache_dir))
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
            raise ValueError("dtype: must be torch.float32, torch.float16, torch.bfloat16 or "
                             "torch.uint8, got %r" % (dtype,))
        if memory_format not in _MEMORY_FORMATS:
            raise ValueError("memory_format: must be torch.contiguous_format or "
                             "torch.channels_last, got %r" % (memory_format,))
        mean, std = [0.0], [1.0]
        if normalize is not None:
            if dtype == torch.uint8:
                raise ValueError("normalize: uint8 batches carry raw pixels; normalize needs "
                                 "dtype torch.float32, torch.float16 or torch.bfloat16")
            mean, std = _normalize_arg(normalize)
        if on_corrupt not in ("fail", "skip"):
            raise ValueError("on_corrupt: must be 'fail' or 'skip', got %s"
                             % _printable(on_corrupt))
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
        if dtype != torch.uint8 and _transforms.has_to_tensor(transforms, "PILToTensor"):
            raise ValueError("transforms: PILToTensor gives the raw uint8 pixels; pass "
                             "dtype=torch.uint8 (the Loader's dtype is %s)" % (dtype,))
        self.rank, self.world_size = rank, world_size
        self._core = _sluice._LoaderCore(
            _native_path("path", path), batch_size, bool(shuffle), int(seed),
            int(shuffle_window_frames),
            bool(drop_last), self._device, _DTYPES[dtype], mean, std, threads or 0, rank,
            world_size, on_corrupt, pool_size or 0, device_ring_depth, bool(device_zero_copy),
            decompress_threads or 0, preprocess_threads or 0, int(read_ahead_frames),
            _text_arg("transforms", transforms_text), bool(work_ahead),
            _MEMORY_FORMATS[memory_format], read_concurrency, cache_dir, cache_bytes)
        self._order = {"batch_size": batch_size, "seed": int(seed), "shuffle": bool(shuffle),
                       "window": int(shuffle_window_frames), "drop_last": bool(drop_last),
                       "transforms": self._core.transforms_identity()}
        self._epoch = 0
        self._step = 0
        self._pass = None
        self._pass_epoch = None
        # The latest pass delivered its epoch's last batch (the epoch is complete, whether or
        # not the loop saw StopIteration), and its end was accounted for (_end_pass).
        self._pass_complete = False
        self._pass_ended = False
        self._pass_delivered = False  # the latest pass handed out a batch
        # max_corrupt_fraction counts an epoch, not a pass: (skipped, read, messages) of the
        # passes of the latest pass's epoch that a break left before it (_epoch_counts_before).
        self._pass_prior = (0, 0, [])
        # What a pass left at a break carries to the pass that continues its epoch: ((epoch,
        # step) where that pass starts, (skipped, read, messages) so far), or None.
        self._carry = None
        # The live iterators of the latest pass: a new iter() marks them replaced (unless that
        # pass had ended), so they raise rather than hand out batches their pipeline had built.
        self._iterators = weakref.WeakSet()
        # set_epoch or load_state_dict since the latest iter(): the running pass's batches no
        # longer move the position (the next iteration starts where they set it).
        self._position_set = False
        self._epoch_rates = []  # (epoch, samples, seconds, samples/s) of each finished pass
        self._recent = RecentPasses()  # what the recent finished passes measured

    @property
    def classes(self):
        """The class names, index = label, as torchvision's ImageFolder.classes (the class
        folders' names, sorted, for a dataset sharded from an image folder); [] when the
        dataset records none."""
        return list(self._dataset_info().classes)

    @property
    def class_to_idx(self):
        """Each class name to its label, as torchvision's ImageFolder.class_to_idx."""
        return dict(self._dataset_info().class_to_idx)

    @property
    def class_counts(self):
        """Records per class in the split, index = label (a list of ints, as recorded by
        sluice-shard create / write_dataset); None for a dataset written before sluice counted
        them (shard it again to get them)."""
        counts = self._dataset_info().class_counts
        return None if counts is None else list(counts)

    def _dataset_info(self):
        if getattr(self, "_info", None) is None:
            self._info = _sluice.Dataset(self._core.manifest_path())
        return self._info

    def __len__(self):
        """Batches per epoch: global steps (every rank gets every step when world_size > 1;
        with one rank, batches that on_corrupt='skip' emptied entirely are not delivered)."""
        return self._core.steps_per_epoch()

    def set_epoch(self, epoch):
        """The next iteration delivers epoch `epoch` (an int in [0, 2**32 - 1]) from its first
        step (as on DistributedSampler). Without it, each iteration delivers the epoch after
        the last."""
        self._epoch, self._step = _int_arg("set_epoch: epoch", epoch, 0, _MAX_EPOCH), 0
        self._position_set = True  # a pass still running leaves it as set

    def state_dict(self):
        """Where the next batch comes from: {"order": {...}, "dataset": {"manifest_xxh3",
        "records"}, "epoch": e, "step": s}. After the last epoch (2**32 - 1), epoch 2**32 at
        step 0: load_state_dict takes it, and iterating from it raises ValueError."""
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
        order (as sluice-train's checkpoints), with the step within the epoch; epoch 2**32 at
        step 0 is the state after the last epoch (state_dict() gives it; iterating raises)."""
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
                                 "loader; resuming needs the same order"
                                 % (key, order.get(key), value))
        mine = self._dataset_identity()
        theirs = {key: state["dataset"].get(key) for key in mine}
        if theirs["records"] is not None:  # a str '100' read as "100 records" in the mismatch
            _int_arg("load_state_dict: state['dataset']['records']", theirs["records"], 0)
        if theirs != mine:
            raise ValueError(
                "load_state_dict: the state is of another dataset (manifest XXH3 %s, %s records) "
                "than this loader's %s (%s, %d records); resuming needs the same dataset"
                % (theirs["manifest_xxh3"], theirs["records"], self._core.manifest_path(),
                   mine["manifest_xxh3"], mine["records"]))
        epoch = _int_arg("load_state_dict: epoch", state["epoch"], 0, _MAX_EPOCH + 1,
                         meaning=" (%d: after the last epoch, at step 0)" % (_MAX_EPOCH + 1))
        step = _int_arg("load_state_dict: step", state["step"], 0, len(self),
                        meaning=" (the steps of an epoch)")
        if epoch > _MAX_EPOCH and step != 0:
            raise ValueError("load_state_dict: epoch %d is after the last epoch %d: its state "
                             "has step 0, got step %d" % (epoch, _MAX_EPOCH, step))
        if step == len(self):
            epoch, step = epoch + 1, 0
        self._epoch, self._step = epoch, step
        self._position_set = True  # a pass still running leaves it as set

    def __iter__(self):
        if (self._pass is not None and not self._pass_complete and not self._pass_ended
                and self._pass_delivered and self._pass.exhausted()):
            # The loop stopped before the epoch's last step but the pass had no batch left
            # (with on_corrupt='skip', the steps after the last delivered batch were emptied:
            # zip(range(batches delivered), L)): the epoch is complete (docs/python.md,
            # "Epochs"). exhausted() waits, the GIL released, for the pass's next batch or its
            # end; a batch ready means a real break, cancelled below.
            if not self._position_set:
                self._epoch, self._step = self._pass_epoch + 1, 0
            self._pass_complete = True
        if self._pass is not None and self._pass_complete:
            # The last pass delivered its epoch's last batch but its loop never saw
            # StopIteration (zip(range(len(L)), L), islice(L, len(L)), a break on the last
            # step): the epoch is complete all the same. Its end is accounted for here (may
            # raise DataLossError, once; the position is the next epoch's start already).
            self._end_pass()
        if self._epoch > _MAX_EPOCH:  # state_dict() after the last epoch, loaded or not
            raise ValueError("the loader is past its last epoch %d (epochs are in [0, 2**32 - "
                             "1]): set_epoch() or load_state_dict() a position to iterate again"
                             % _MAX_EPOCH)
        previous, self._pass = self._pass, None
        if previous is not None and not self._pass_ended and not self._position_set:
            # A break: the next pass continues the epoch, whose budget counts both (what the
            # delivered batches skipped; the pipeline's work ahead is read again).
            skipped, read, messages = previous.corrupt_counts()
            before = self._pass_prior
            self._carry = ((self._epoch, self._step),
                           (before[0] + skipped, before[1] + read, before[2] + list(messages)))
        elif previous is not None:
            self._carry = None
        if previous is not None:
            if not self._pass_ended:
                for it in list(self._iterators):
                    it._replaced = True
            previous.cancel()
        self._iterators = weakref.WeakSet()
        # Dropped before the next pass starts: once no batch of it is alive, its pipeline gives
        # its buffers back for the next one to reuse instead of allocating (and page-faulting)
        # its own.
        del previous
        carry, self._carry = self._carry, None
        self._pass_prior = (carry[1] if carry is not None and self._step > 0
                            and carry[0] == (self._epoch, self._step) else (0, 0, []))
        self._pass = self._core.start(self._epoch, self._step)
        self._position_set = False
        self._pass_epoch = self._epoch
        self._pass_complete = self._pass_ended = self._pass_delivered = False
        it = _Iterator(self, self._pass)
        self._iterators.add(it)
        return it

    def _end_pass(self):
        """The end of the latest pass, accounted for once: its rate (a bar of report_html) and
        max_corrupt_fraction (DataLossError)."""
        if self._pass_ended:
            return
        self._pass_ended = True
        samples, seconds, rate = self._pass.epoch_rate()
        if samples > 0:
            self._epoch_rates.append((self._pass_epoch, samples, seconds, rate))
            self._recent.add(self._pass_epoch, self._pass.record())
        _check_corrupt_budget(self, self._pass, self._pass_epoch, self._pass_prior)

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
        recent = self._recent.summary()
        if recent is not None:
            report["recent_passes"] = recent
            _annotate_recent_advice(report, recent)
        if check_advice:
            report["advice_check"] = _check_advice(self._arguments, report, steps, rounds)
        return report

    def report_text(self, check_advice=False, steps=100, rounds=2):
        """The report's table, verdict and figures, as text; with check_advice=True, followed
        by the measured before and after of each piece of advice (see report())."""
        text = self._last_pass("report_text()").report_text()
        recent = self._recent.summary()
        if recent is not None:
            text = _recent_passes_headline(recent) + text + _recent_passes_text(recent)
        if check_advice:
            report = self._last_pass("report_text()").report_json()
            text += _advice_check_text(_check_advice(self._arguments, report, steps, rounds),
                                       steps, rounds)
        return text

    def report_html(self, path):
        """Writes the report of the latest pass as one self-contained HTML page at `path` (no
        network, no script): the chain of stages with the limiting one marked, the verdict,
        the rate of each pass this loader finished, and a timeline of your step against the
        wait for data (docs/bottleneck.md, "The picture"). Returns the path. `path` is a str
        or os.PathLike naming a file in an existing directory (TypeError, IsADirectoryError,
        FileNotFoundError otherwise, before anything is written), never a file of the dataset
        this loader reads: a manifest, shard or lock of its folder, or another name of one
        (ValueError, as sluice-train refuses its outputs there)."""
        if isinstance(path, str) and path == "-":
            raise ValueError("report_html: path '-' is stdout on sluice-train's command line, "
                             "not a file here; expected the path of a file to write (./- for "
                             "a file named '-')")
        path = _output_path_arg("report_html: path", path)
        self._last_pass("report_html()").report_html(_native_path("report_html: path", path),
                                                     list(self._epoch_rates))
        return path

    def skipped(self):
        """on_corrupt='skip': what the latest pass skipped as corrupt. "records": the records
        of the steps it delivered (after a break, those of the batches the loop took, and of
        the emptied steps before them; once the pass ended, all of its epoch's tail).
        "frames" and "messages": the corrupt frames and the distinct messages (first 16) the
        pipeline met, which after a break may include some past the last batch delivered
        (the pipeline works ahead); docs/python.md, "Corrupt records"."""
        s = self._last_pass("skipped()").stats_json()
        return {"frames": s["skipped_frames"], "records": s["skipped_records"],
                "messages": list(s["corrupt_frames"])}


_REPLACED_PASS = ("this iterator's pass was replaced by a newer iter() of the same Loader (a "
                  "Loader has one live pass): use the new iterator, or a second Loader for two "
                  "passes at once")


class _Iterator:
    def __init__(self, loader, run):
        self._loader = loader
        self._pass = run
        self._epoch = loader._pass_epoch
        self._steps = len(loader)
        self._cuda = loader._device.startswith("cuda")
        self._ended = False
        self._replaced = False  # set by a newer iter() of the loader before this pass ended

    def __iter__(self):
        return self

    def __next__(self):
        if self._replaced:
            # Batches the replaced pass had built are not handed out: the new pass delivers
            # them again (a trial's loop got batch 2 from both).
            raise RuntimeError(_REPLACED_PASS)
        stream = 0
        if self._cuda:
            stream = torch.cuda.current_stream(self._loader._torch_device).cuda_stream
        try:
            item = self._pass.next(stream)
        except RuntimeError as e:
            if self._loader._pass is not self._pass and "cancelled" in str(e):
                raise RuntimeError(_REPLACED_PASS) from None
            raise
        loader = self._loader
        if item is None:
            ended, self._ended = self._ended, True
            if loader._pass is self._pass:
                if not loader._pass_complete and not loader._position_set:
                    # The pass ended before the epoch's last step (with one rank, batches that
                    # on_corrupt='skip' emptied are not delivered): the next epoch is next.
                    loader._epoch, loader._step = self._epoch + 1, 0
                loader._end_pass()
            elif not ended:  # an earlier pass's iterator, run to its end after a new iter()
                _check_corrupt_budget(loader, self._pass, self._epoch)
            raise StopIteration
        images_capsule, labels_capsule, copy, epoch, step = item
        if loader._pass is self._pass:
            loader._pass_delivered = True
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
            if step + 1 >= self._steps:
                # The epoch's last batch: the epoch is complete, whether or not the loop asks
                # for more (docs/python.md, "Epochs"); the next iteration starts the next one.
                if not loader._position_set:
                    loader._epoch, loader._step = epoch + 1, 0
                loader._pass_complete = True
            elif not loader._position_set:
                loader._epoch, loader._step = epoch, step + 1
        return images, labels
