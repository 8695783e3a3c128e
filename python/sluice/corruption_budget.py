"""on_corrupt='skip' with max_corrupt_fraction: the end of a Loader pass fails when too many of
the records it read were skipped as corrupt. The check and its message are C++'s, shared with
sluice-train's --max-corrupt-fraction (engine/job/corrupt_fraction.h, bound as
_Pass.check_corrupt_fraction)."""
from ._args import _native_path


def _check_corrupt_budget(loader, run, epoch, prior=(0, 0, ())):
    """on_corrupt='skip': DataLossError when more than max_corrupt_fraction of the records of
    epoch `epoch` were skipped as corrupt: those the finished pass `run` read, and `prior`
    (skipped, read, messages) of the passes of the same epoch that a break left before it
    (the budget counts the epoch, each record once, not one pass)."""
    skipped, read, messages = prior
    run.check_corrupt_fraction(_native_path("path", loader._core.manifest_path()), epoch,
                               loader._max_corrupt_fraction, skipped, read, list(messages))
