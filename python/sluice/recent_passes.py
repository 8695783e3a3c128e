"""The Loader's recent passes set beside its latest one (docs/bottleneck.md, "Short passes").

A report rests on one pass, and on a small folder a pass lasts a fraction of a second: identical
passes then differ by up to 30% in rate, and their reports' prices of the same advice with them.
The Loader keeps what each finished pass measured (_sluice._PassRecord, a copy that outlives the
pass's pipeline) and summarizes the last few: how often each verdict and each advice entry came,
and the median, least and greatest of the rates and prices. The first pass of a loader (cold
caches, the step's warm-up) is left out."""
import statistics

# The passes summarized: the last this many finished ones, the loader's first left out; fewer
# than _MIN_PASSES give no summary.
_MAX_PASSES = 8
_MIN_PASSES = 3


class RecentPasses:
    """The records of a loader's finished passes, at most _MAX_PASSES + 1 kept."""

    def __init__(self):
        self._records = []  # (pass number, epoch, _PassRecord), oldest first
        self._finished = 0
        self._reports = {}  # pass number -> its report (computed once, when first summarized)

    def add(self, epoch, record):
        """A finished pass of `epoch` (its _PassRecord)."""
        number = self._finished
        self._finished += 1
        if number == 0:
            return  # cold: not summarized
        self._records.append((number, epoch, record))
        del self._records[:-_MAX_PASSES]
        kept = {n for n, _, _ in self._records}
        self._reports = {n: r for n, r in self._reports.items() if n in kept}

    def summary(self):
        """The summary as a dict (report()["recent_passes"], docs/report-schema.md), or None
        with fewer than _MIN_PASSES passes."""
        if len(self._records) < _MIN_PASSES:
            return None
        reports = []
        for number, _, record in self._records:
            if number not in self._reports:
                self._reports[number] = record.report_json()
            reports.append(self._reports[number])
        verdicts = {}
        advice = {}
        for rep in reports:
            v = rep["verdict"]
            key = (v["class"], v.get("limiting_stage"))
            verdicts[key] = verdicts.get(key, 0) + 1
            for a in v.get("advice", []):
                entry = advice.setdefault((a["setting"], a["value"]),
                                          {"text": a["text"], "prices": []})
                entry["prices"].append(a["predicted_speedup"])
        rates = [rep["measured_samples_per_s"] for rep in reports]
        return {
            "passes": len(reports),
            "epochs": [epoch for _, epoch, _ in self._records],
            "measured_samples_per_s": _spread(rates),
            "verdicts": [{"class": c, "limiting_stage": s, "passes": n}
                         for (c, s), n in sorted(verdicts.items(), key=lambda kv: -kv[1])],
            "advice": [dict({"setting": setting, "value": value, "text": e["text"],
                             "passes": len(e["prices"])},
                            **{"predicted_speedup_" + k: x
                               for k, x in _spread(e["prices"]).items()})
                       for (setting, value), e in sorted(advice.items(),
                                                         key=lambda kv: -len(kv[1]["prices"]))],
        }


def _spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _rate(x):
    return "%.1f k" % (x / 1e3) if x >= 1e3 else "%.0f" % x


def _rate_range(lo, hi):
    """"2.8-4.8 k" (or "650-1.2 k" across the thousand)."""
    if lo >= 1e3:
        return "%.1f-%.1f k" % (lo / 1e3, hi / 1e3)
    return "%s-%s" % (_rate(lo), _rate(hi))


def annotate_advice(report, s):
    """Each advice entry of report["verdict"] that the recent passes also gave gets their
    median price, "predicted_speedup_recent_median", and in how many of them it came,
    "recent_passes": one pass's price swings where passes are short, the median does less."""
    by_key = {(a["setting"], a["value"]): a for a in s["advice"]}
    for a in report.get("verdict", {}).get("advice", []):
        recent = by_key.get((a.get("setting"), a.get("value")))
        if recent is not None:
            a["predicted_speedup_recent_median"] = recent["predicted_speedup_median"]
            a["recent_passes"] = recent["passes"]


def headline_text(s):
    """The lines report_text() starts with once passes are summarized: what most recent passes
    said, and each advice entry's median price, before the latest pass's own report."""
    top = s["verdicts"][0]
    lines = ["over the last %d passes: %s (%s) in %d of them"
             % (s["passes"], top["class"], top["limiting_stage"] or "-", top["passes"])]
    for a in s["advice"]:
        line = ("  advice %s in %d of them, median price %.2fx (%.2fx-%.2fx): act on the "
                "median, not on one pass's price below"
                % (a["text"], a["passes"], a["predicted_speedup_median"],
                   a["predicted_speedup_min"], a["predicted_speedup_max"]))
        if a["passes"] < s["passes"]:
            # The other passes did not advise it (their limit was another, or their price was
            # under the floor for advice): the median is of the passes that did.
            line += ("; the other %d passes did not advise it (their price for it was under "
                     "the 1.2x floor for advice, or their limit was one it does not relieve), so "
                     "this price may read high (docs/bottleneck.md, \"Short passes\")"
                     % (s["passes"] - a["passes"]))
        lines.append(line)
    if not s["advice"]:
        lines.append("  no advice in any of them")
    lines.append("the latest pass's report follows; the summary of the passes is at the end")
    return "\n".join(lines) + "\n\n"


def summary_text(s):
    """The summary as the report_text() lines that follow the latest pass's report."""
    epochs = s["epochs"]
    rates = s["measured_samples_per_s"]
    lines = ["recent passes: the last %d finished (epochs %s; the loader's first pass, cold, "
             "left out): measured %s samples/s, median %s"
             % (s["passes"], "%d-%d" % (epochs[0], epochs[-1]) if len(epochs) > 1 else epochs[0],
                _rate_range(rates["min"], rates["max"]), _rate(rates["median"]))]
    lines.append("  verdicts: " + ", ".join(
        "%s (%s) in %d" % (v["class"], v["limiting_stage"] or "-", v["passes"])
        for v in s["verdicts"]))
    for a in s["advice"]:
        lines.append("  advice %s: in %d of %d, priced %.2fx-%.2fx, median %.2fx"
                     % (a["text"], a["passes"], s["passes"], a["predicted_speedup_min"],
                        a["predicted_speedup_max"], a["predicted_speedup_median"]))
    if not s["advice"]:
        lines.append("  advice: none in any of them")
    lines.append("  one pass's figures swing where passes are short: act on a verdict most "
                 "passes give and on the median price (docs/bottleneck.md, \"Short passes\")")
    return "\n".join(lines) + "\n"
