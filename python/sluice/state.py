"""load_state_dict: sluice-train's exported weights (`--export-safetensors`) as a torch state dict,
for a torch that has no safetensors reader (Debian's torch 1.13 has none).

    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    model.load_state_dict(sluice.load_state_dict("mlp.safetensors"))

The file is safetensors (engine/safetensors.h): an 8-byte little-endian header length N, N
bytes of JSON mapping each tensor's name to its dtype, shape and [begin, end) byte offsets in
the data that follows (and an optional "__metadata__" of strings), then the data, every byte of
it some tensor's. Every rule is checked; a file that breaks one is a DataLossError naming the
file, the tensor and what was expected.
"""
import collections
import json
import os
import struct

import torch

from ._sluice import DataLossError

# safetensors' dtype names: torch's dtype and bytes per element.
_DTYPES = {"F64": (torch.float64, 8), "F32": (torch.float32, 4), "F16": (torch.float16, 2),
           "BF16": (torch.bfloat16, 2), "I64": (torch.int64, 8), "I32": (torch.int32, 4),
           "I16": (torch.int16, 2), "I8": (torch.int8, 1), "U8": (torch.uint8, 1),
           "BOOL": (torch.bool, 1)}
_MAX_HEADER = 100 << 20  # the safetensors library's own bound on the JSON header


def load_state_dict(path):
    """The tensors of the safetensors file `path` by name, in the order of their data (a
    model's layer order), as an OrderedDict of torch tensors that own their memory."""
    def bad(what):
        return DataLossError("%s: not a safetensors file sluice can read: %s" % (path, what))

    # The header is read and checked before the data: another file given by mistake (a shard
    # of gigabytes) is refused after reading at most its first 8 bytes and the bounded header.
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        if len(head) < 8:
            raise bad("%d bytes, expected at least the 8-byte header length" % len(head))
        (n,) = struct.unpack("<Q", head)
        if n > min(_MAX_HEADER, size - 8):
            raise bad("the header length is %d bytes, but the file holds %d after it"
                      % (n, size - 8))
        text = f.read(n)
    body_size = size - 8 - n
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise bad("the %d-byte header is not JSON (%s)" % (n, e)) from None
    if not isinstance(header, dict):
        raise bad("the header is a JSON %s, expected an object" % type(header).__name__)
    entries = []
    for name, entry in header.items():
        if name == "__metadata__":
            if not isinstance(entry, dict) or not all(
                    isinstance(v, str) for v in entry.values()):
                raise bad("__metadata__ is not an object of strings")
            continue
        where = "tensor %r" % name
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise bad("%s: expected exactly dtype, shape and data_offsets, got %s"
                      % (where, sorted(entry) if isinstance(entry, dict) else entry))
        if entry["dtype"] not in _DTYPES:
            raise bad("%s: dtype %r, expected one of %s"
                      % (where, entry["dtype"], ", ".join(sorted(_DTYPES))))
        shape, offsets = entry["shape"], entry["data_offsets"]
        if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise bad("%s: shape %r, expected a list of non-negative ints" % (where, shape))
        if not isinstance(offsets, list) or len(offsets) != 2 or not all(
                isinstance(o, int) and not isinstance(o, bool) for o in offsets) or not (
                0 <= offsets[0] <= offsets[1] <= body_size):
            raise bad("%s: data_offsets %r, expected [begin, end] with 0 <= begin <= end <= %d "
                      "(the data's size)" % (where, offsets, body_size))
        dtype, size = _DTYPES[entry["dtype"]]
        count = 1
        for d in shape:
            count *= d
        if offsets[1] - offsets[0] != count * size:
            raise bad("%s: %d bytes of data, expected %d (shape %s of %s)"
                      % (where, offsets[1] - offsets[0], count * size, shape, entry["dtype"]))
        entries.append((offsets[0], offsets[1], name, dtype, shape))
    entries.sort()
    end = 0
    for begin, stop, name, _, _ in entries:
        if begin != end:
            raise bad("tensor %r starts at byte %d of the data, expected %d (tensors must tile "
                      "the data, without gaps or overlaps)" % (name, begin, end))
        end = stop
    if end != body_size:
        raise bad("the tensors cover %d bytes of the data, which holds %d" % (end, body_size))
    with open(path, "rb") as f:  # the header checked: now the data it describes
        f.seek(8 + n)
        body = memoryview(f.read())
    if len(body) != body_size:
        raise bad("the file changed while it was read (%d bytes of data, then %d)"
                  % (body_size, len(body)))
    out = collections.OrderedDict()
    for begin, stop, name, dtype, shape in entries:
        raw = bytearray(body[begin:stop])  # owned, writable memory for torch
        tensor = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        out[name] = tensor.reshape(shape)
    return out
