"""sluice.load_state_dict: sluice-train's --export-safetensors file as a torch state dict that the
seed's model (nn.Sequential(Linear, ReLU, Linear)) loads as is, and every malformed file refused
naming the file, the tensor and what was expected."""
import json
import os
import struct
import subprocess

import numpy as np
import pytest
import torch

import sluice

TRAIN = os.path.join(os.path.dirname(sluice.__file__), "..", "..", "tools", "sluice-train")


def safetensors(tensors, header_extra=None, pad=True, data_extra=b""):
    """The bytes of a safetensors file of `tensors` ({name: float32 array}), in order."""
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header.update(header_extra or {})
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data + data_extra


def test_the_seed_models_export_loads_into_torch_with_the_same_accuracy(fashion, tmp_path):
    if not os.path.exists(TRAIN):
        pytest.skip("sluice-train is not built beside this sluice package (%s)" % TRAIN)
    out, metrics = tmp_path / "mlp.safetensors", tmp_path / "metrics.jsonl"
    subprocess.run([TRAIN, "--data", fashion["dir"], "--epochs", "1", "--device", "cpu",
                    "--export-safetensors", str(out), "--metrics-out", str(metrics)],
                   check=True, capture_output=True)
    state = sluice.load_state_dict(str(out))
    assert list(state) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    model.load_state_dict(state)  # strict: every name and shape
    images, labels = fashion["test"]
    with torch.no_grad():
        x = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) / 255)
        accuracy = (model(x).argmax(1).numpy() == labels).mean()
    theirs = json.loads(open(metrics).read().splitlines()[-1])["test_accuracy"]
    assert accuracy > 0.7
    assert abs(accuracy - theirs) < 0.005, (accuracy, theirs)


def test_a_written_file_reads_back_bit_for_bit(tmp_path):
    tensors = {"0.weight": np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5,
               "0.bias": np.array([1e-30, -0.0], dtype=np.float32), "empty": np.zeros((0, 4))}
    path = tmp_path / "w.safetensors"
    path.write_bytes(safetensors(tensors))
    state = sluice.load_state_dict(str(path))
    assert list(state) == ["0.weight", "0.bias", "empty"]
    for name, a in tensors.items():
        assert state[name].dtype == torch.float32 and tuple(state[name].shape) == a.shape
        assert np.array_equal(state[name].numpy().view(np.uint32),
                              a.astype(np.float32).view(np.uint32))
    state["0.weight"] += 1  # owned, writable memory


@pytest.mark.parametrize("make, message", [
    (lambda: b"\x01\x02", "2 bytes, expected at least the 8-byte header length"),
    (lambda: struct.pack("<Q", 1 << 40) + b"{}", "the header length is 1099511627776 bytes"),
    (lambda: struct.pack("<Q", 3) + b"{x}", "header is not JSON"),
    (lambda: struct.pack("<Q", 2) + b"[]", "the header is a JSON list, expected an object"),
    (lambda: safetensors({"w": np.ones(2)}, {"w": {"dtype": "F32", "shape": [2]}}),
     "tensor 'w': expected exactly dtype, shape and data_offsets"),
    (lambda: safetensors({"w": np.ones(2)}, {"w": {"dtype": "Q9", "shape": [2],
                                                   "data_offsets": [0, 8]}}),
     "tensor 'w': dtype 'Q9', expected one of"),
    (lambda: safetensors({"w": np.ones(2)}, {"w": {"dtype": "F32", "shape": [3],
                                                   "data_offsets": [0, 8]}}),
     "tensor 'w': 8 bytes of data, expected 12"),
    (lambda: safetensors({"w": np.ones(2)}, {"w": {"dtype": "F32", "shape": [2],
                                                   "data_offsets": [0, 80]}}),
     "data_offsets [0, 80], expected [begin, end]"),
    (lambda: safetensors({"a": np.ones(2), "b": np.ones(2)},
                         {"b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}),
     "tensor 'b' starts at byte 4 of the data, expected 8"),
    (lambda: safetensors({"w": np.ones(2)}, data_extra=b"junk"),
     "the tensors cover 8 bytes of the data, which holds 12"),
    (lambda: safetensors({"w": np.ones(2)}, {"w": {"dtype": "F32", "shape": [True, 2],
                                                   "data_offsets": [0, 8]}}),
     "shape [True, 2], expected a list of non-negative ints"),
])
def test_a_malformed_file_is_refused_naming_it_and_what_was_expected(tmp_path, make, message):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(make())
    with pytest.raises(sluice.DataLossError) as e:
        sluice.load_state_dict(str(path))
    assert str(path) in str(e.value) and message in str(e.value), str(e.value)
