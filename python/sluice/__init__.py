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

The modules: loader (Loader), writer (write_dataset), probe (probe, Probe), transforms (the
ops of transforms=[...]), _args (the argument checks and the DataLoader-argument table),
advice_check (report(check_advice=True)), corruption_budget (max_corrupt_fraction), state
(load_state_dict: sluice-train's exported weights for torch), and _sluice,
the C++ extension (Dataset, DataLossError and the pipeline under them).
"""
# Not in __all__: sluice._sluice and sluice.transforms (named in docs/python.md), and the
# private names python/tests import.
from . import _sluice  # noqa: F401
from . import transforms  # noqa: F401
from ._args import _FROM_DATALOADER  # noqa: F401
from ._sluice import DataLossError, Dataset
from .advice_check import _check_advice, _step_seconds  # noqa: F401
from .loader import Loader
from .probe import Probe, probe
from .state import load_state_dict
from .writer import write_dataset

__all__ = ["Loader", "Dataset", "DataLossError", "write_dataset", "probe", "Probe",
           "load_state_dict"]
