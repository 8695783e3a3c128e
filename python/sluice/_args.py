"""Argument checks shared by the Loader and write_dataset: each wrong argument is a TypeError or
a ValueError naming the argument, the value and what is expected (docs/python.md, "Errors"),
never pybind11's "incompatible function arguments". Also the table of DataLoader's arguments
that the Loader refuses, each with its sluice equivalent (docs/python.md, "From DataLoader")."""
import errno
import inspect
import math
import numbers
import os
import reprlib

from . import _sluice

_INT64_MAX = 2**63 - 1
_MAX_BATCH_SIZE = 2**31 - 1  # as sluice-train's --batch-size: the backends index with int32


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


# User text echoed in a message is bounded as C++'s Printable() bounds it (common/printable.h,
# docs/limits.md "Echoed input"): 200 characters of it, then its length.
_MAX_ECHO_CHARS = 200


def _printable(value):
    """repr(value) for a one-line message: a str or bytes longer than 200 characters is cut
    there and followed by "... (N characters)" (or bytes); any other value's repr is bounded
    likewise. repr() escapes control characters, so a newline cannot break the line."""
    if isinstance(value, (str, bytes, bytearray)) and len(value) > _MAX_ECHO_CHARS:
        unit = "characters" if isinstance(value, str) else "bytes"
        return "%r... (%d %s)" % (value[:_MAX_ECHO_CHARS], len(value), unit)
    text = _BOUNDED_REPR.repr(value)
    if len(text) > _MAX_ECHO_CHARS:
        return "%s... (%d characters)" % (text[:_MAX_ECHO_CHARS], len(text))
    return text


_BOUNDED_REPR = reprlib.Repr()
_BOUNDED_REPR.maxstring = _BOUNDED_REPR.maxother = _MAX_ECHO_CHARS + 2


def _type_name(value):
    """The name of value's type, bounded (a class's name is user text too)."""
    name = type(value).__name__
    return name if len(name) <= _MAX_ECHO_CHARS else _printable(name)


def _path_arg(name, value):
    """`value` as a str path; TypeError naming the argument unless it is a str or an
    os.PathLike giving one (None, bytes and numbers are not paths here); ValueError for a path
    with a NUL character, which the C++ side would cut there and so open another file."""
    path = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(path, str):
        raise TypeError("%s: expected a str or os.PathLike, got %s (%s)"
                        % (name, _printable(value), _type_name(value)))
    if "\0" in path:
        raise ValueError("%s: the path %s contains a NUL character" % (name, _printable(path)))
    _native_path(name, path)  # a lone surrogate no file name gives: ValueError now
    return path


def _native_path(name, path):
    """`path` (a str) as the C++ side takes it: unchanged when it is text UTF-8 can hold; when
    it holds surrogate escapes (PEP 383: os.listdir's and sys.argv's spelling of a file name
    that is not UTF-8, such as a Latin-1 "caf\\xe9"), its bytes as os.fsencode gives them, so
    that the file the user named is the one opened. ValueError for a lone surrogate that no
    file name's bytes give."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        pass
    try:
        return os.fsencode(path)
    except UnicodeEncodeError as e:
        raise ValueError("%s: %s holds the lone surrogate %r at index %d, which no file "
                         "name's bytes give; expected a path as os.listdir or the shell spells "
                         "it" % (name, _printable(path), path[e.start], e.start)) from None


def _text_arg(name, value):
    """`value` (a str) when UTF-8 can hold it, as the C++ side needs; ValueError naming the
    argument for text with a lone surrogate (a file name that is not UTF-8, decoded by
    os.listdir with surrogate escapes, used as a split or an op's name)."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError as e:
        raise ValueError("%s: %s holds the lone surrogate %r at index %d (os.listdir's spelling "
                         "of a byte that is not UTF-8); expected UTF-8 text"
                         % (name, _printable(value), value[e.start], e.start)) from None


def _manifest_name(name, value):
    """A class name or a source name as the manifest (UTF-8 JSON) holds it, as sluice-shard
    create writes a folder's or a file's name: unchanged when it is UTF-8 text; otherwise each
    byte that is not UTF-8 (a surrogate escape, PEP 383) written "\\xNN" and each backslash
    doubled (storage/image_files.cc, ManifestName). ValueError for a lone surrogate that no
    byte gives."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        pass
    out = []
    for i, ch in enumerate(value):
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append("\\x%02x" % (code - 0xDC00))
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError("%s: %s holds the lone surrogate %r at index %d, which no file "
                             "name's bytes give; expected text" % (name, _printable(value), ch, i))
        else:
            out.append("\\\\" if ch == "\\" else ch)
    return "".join(out)


def _output_path_arg(name, value):
    """`value` (a str or os.PathLike) as the path of a file to write, checked before anything
    is written so that the output can only land at that path: TypeError for another type,
    ValueError for an empty path, IsADirectoryError when it names a directory,
    FileNotFoundError when its directory does not exist and NotADirectoryError when that is
    not a directory; each message names the path (bounded, _printable)."""
    path = _path_arg(name, value)
    if not path:
        raise ValueError("%s: the path is empty; expected the path of a file to write" % name)
    if os.path.isdir(path):
        raise IsADirectoryError("%s: %s is a directory; expected the path of a file to write"
                                % (name, _printable(path)))
    parent = os.path.dirname(path) or "."
    if not os.path.exists(parent):
        raise FileNotFoundError("%s: the directory %s of %s does not exist (create it first)"
                                % (name, _printable(parent), _printable(path)))
    if not os.path.isdir(parent):
        raise NotADirectoryError("%s: %s, the directory of %s, is not a directory"
                                 % (name, _printable(parent), _printable(path)))
    # The file is written as PATH.tmp and renamed (docs/limits.md, "Files sluice writes"): its
    # name needs room for the suffix. Checked here so that the message can bound the path.
    name_bytes = len(os.fsencode(os.path.basename(path)))
    name_max = os.pathconf(parent, "PC_NAME_MAX")
    if name_bytes + len(".tmp") > name_max:
        raise OSError(errno.ENAMETOOLONG, "%s: the file name of %s is %d bytes; at most %d fit "
                      "in this directory with the .tmp suffix of the atomic write"
                      % (name, _printable(path), name_bytes, name_max - len(".tmp")))
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



def _channel_values(v):
    """A mean or std: one number (every channel) or a sequence of one per channel."""
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return [float(v)]
    values = [float(x) for x in v]
    if not values:
        raise ValueError("empty")
    return values


def _output_dir_arg(name, value):
    """`value` (a str or os.PathLike) as a directory to write into (created when missing):
    TypeError for another type, ValueError for an empty path (it would be the current
    directory), NotADirectoryError when it, or the nearest of its parents that exists, is not a
    directory; each message names the path (bounded)."""
    path = _path_arg(name, value)
    if not path:
        raise ValueError("%s: the path is empty; expected the directory to write (\".\" for "
                         "the current one)" % name)
    existing = path
    while not os.path.lexists(existing):
        parent = os.path.dirname(existing.rstrip("/"))
        if not parent or parent == existing:
            return path
        existing = parent
    if not os.path.isdir(existing):
        what = "" if existing == path else ", the nearest existing parent of %s," % (
            _printable(path))
        raise NotADirectoryError("%s: %s%s is not a directory" % (name, _printable(existing),
                                                                  what))
    return path


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


def _refuse_other_arguments(other_arguments, loader_init):
    """TypeError for the first argument Loader does not take: DataLoader's name what replaces
    them (docs/python.md, "From DataLoader"); any other lists the Loader's arguments, those of
    `loader_init` (Loader.__init__, passed in: loader.py imports this module)."""
    for name in other_arguments:
        if name in _FROM_DATALOADER:
            raise TypeError("sluice.Loader: %s is DataLoader's: %s (docs/python.md, \"From "
                            "DataLoader\")" % (name, _FROM_DATALOADER[name]))
        known = [p for p in inspect.signature(loader_init).parameters
                 if p not in ("self", "other_arguments")]
        raise TypeError("sluice.Loader: unexpected argument %r; its arguments: %s"
                        % (name, ", ".join(known)))
