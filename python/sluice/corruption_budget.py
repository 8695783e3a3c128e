"""on_corrupt='skip' with max_corrupt_fraction: the end of a Loader pass fails when too many of
the records it read were skipped as corrupt (sluice-train's --max-corrupt-fraction)."""
# TODO(issue 33): bind engine/job/corruption_budget.cc instead
from ._sluice import DataLossError


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
