"""sluice-train --report-html, rendered by a real headless browser (Debian's chromium).

A run whose limit is known (one decompress thread delayed by 16 ms a frame; as in
tests/report/bottleneck_validation_test.cc) writes the page and the JSON report;
chromium renders the page to a PNG and dumps the DOM it built. From that DOM: exactly one box
is marked as the limit, and it is the stage the report names (decompress); the verdict sentence
is there; the what-if table and both charts are there; and the page references no http(s) URL.

usage: report_html_browser_test.py SLUICE_TRAIN WORK_DIR
Exit 0 pass, 1 fail, 77 skipped (no chromium, or no Fashion-MNIST). The PNG stays at
WORK_DIR/report.png for a human to look at.
"""
import html.parser
import json
import os
import re
import shutil
import struct
import subprocess
import sys

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
SKIP = 77


class Dom(html.parser.HTMLParser):
    """The stage boxes, the verdict's attributes and text, and the ids seen."""

    def __init__(self):
        super().__init__()
        self.boxes = []  # (data-stage, data-limit, classes)
        self.verdict_attrs = None
        self.verdict_text = ""
        self.ids = []
        self.rects = {}  # svg id -> number of <rect>
        self._in_verdict = 0
        self._svg = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "div" and "stage" in classes:
            self.boxes.append((a.get("data-stage"), a.get("data-limit"), classes))
        if tag == "p" and a.get("id") == "verdict":
            self.verdict_attrs = a
            self._in_verdict = 1
        elif self._in_verdict:
            self._in_verdict += 1
        if tag == "svg":
            self._svg = a.get("id")
            self.rects[self._svg] = 0
        if tag == "rect" and self._svg is not None:
            self.rects[self._svg] += 1

    def handle_endtag(self, tag):
        if self._in_verdict:
            self._in_verdict -= 1
        if tag == "svg":
            self._svg = None

    def handle_data(self, data):
        if self._in_verdict:
            self.verdict_text += data


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", head[16:24])


def run_training(train, work):
    cmd = [train, "--data", FASHION_MNIST, "--cache-dir", os.path.join(work, "cache"),
           "--device", "cpu", "--epochs", "2", "--evaluate=false", "--batch-size", "32",
           "--threads", "2", "--decompress-threads", "1", "--inject-delay=decompress:16000",
           "--what-if=all",
           "--ceilings=false", "--quiet", "--report-json", os.path.join(work, "report.json"),
           "--report-html", os.path.join(work, "report.html")]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=400)
    if done.returncode != 0:
        sys.exit("FAIL: %s exited %d:\n%s" % (" ".join(cmd), done.returncode, done.stdout))
    with open(os.path.join(work, "report.json")) as f:
        return json.load(f), done.stdout


def render(chromium, work):
    page = "file://" + os.path.abspath(os.path.join(work, "report.html"))
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
              "--hide-scrollbars", "--user-data-dir=" + os.path.join(work, "profile"),
              "--window-size=1400,1000"]
    png = os.path.join(work, "report.png")
    shot = subprocess.run(common + ["--screenshot=" + png, page], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120)
    if shot.returncode != 0 or not os.path.exists(png):
        sys.exit("FAIL: chromium --screenshot exited %d:\n%s" % (shot.returncode, shot.stdout))
    dom = subprocess.run(common + ["--dump-dom", page], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=120)
    if dom.returncode != 0 or "<html" not in dom.stdout:
        sys.exit("FAIL: chromium --dump-dom exited %d:\n%s" % (dom.returncode, dom.stderr))
    return png, dom.stdout


def check(report, page_text, dom_text, png):
    failures = []
    dom = Dom()
    dom.feed(dom_text)
    names = [b[0] for b in dom.boxes]
    # The page's chain is the report's rows in order, then the exchange box.
    rows = [row["stage"] for row in report["stages"]]
    if names != rows + ["exchange"] or rows[0] != "read" or rows[-1] != "compute":
        failures.append("boxes in the rendered DOM: %s" % names)
    marked = [b for b in dom.boxes if b[1] == "true"]
    limit = report["verdict"]["limiting_stage"]
    if len(marked) != 1:
        failures.append("%d boxes are marked as the limit: %s" % (len(marked), marked))
    elif marked[0][0] != limit or "limit" not in marked[0][2]:
        failures.append("the marked box is %s, the report names %s" % (marked[0], limit))
    if sum("limit" in b[2] for b in dom.boxes) != 1:
        failures.append("class 'limit' on %d boxes" % sum("limit" in b[2] for b in dom.boxes))
    if dom.verdict_attrs is None or dom.verdict_attrs.get("data-limiting-stage") != limit:
        failures.append("verdict element: %s" % dom.verdict_attrs)
    if " ".join(report["verdict"]["sentence"].split()) not in " ".join(dom.verdict_text.split()):
        failures.append("verdict sentence missing: %r not in %r"
                        % (report["verdict"]["sentence"], dom.verdict_text))
    for absent in ("h2d", "exchange"):
        if not any(b[0] == absent and "absent" in b[2] for b in dom.boxes):
            failures.append("%s is not drawn absent on the CPU backend" % absent)
    for needed in ("what-if", "epochs", "timeline", "chain"):
        if needed not in dom.ids:
            failures.append("no element with id %r" % needed)
    if dom.rects.get("epochs") != 2:
        failures.append("the epoch chart has %s bars, not 2" % dom.rects.get("epochs"))
    if not dom.rects.get("timeline"):
        failures.append("the timeline has no bars")
    for text, what in ((page_text, "file"), (dom_text, "rendered DOM")):
        urls = re.findall(r"https?://", text)
        if urls:
            failures.append("the %s references %d http(s) URLs" % (what, len(urls)))
    if png_size(png) != (1400, 1000):
        failures.append("screenshot %s is %s, not 1400x1000" % (png, png_size(png)))
    return failures


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    train, work = sys.argv[1], sys.argv[2]
    chromium = os.environ.get("SLUICE_CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        print("SKIP: chromium is not installed (scripts/install-deps.sh installs it: "
              "apt-get install chromium)")
        return SKIP
    if not os.path.exists(os.path.join(FASHION_MNIST, "train-images-idx3-ubyte.gz")):
        print("SKIP: Fashion-MNIST is not installed under %s" % FASHION_MNIST)
        return SKIP
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # One decompress thread delayed 16 ms a frame makes decompress about 4x slower than compute
    # on 2 cores (with 2 threads and 8 ms the two were within 5% here); a loaded machine
    # may still read otherwise, so the run (not the page) gets three attempts.
    for attempt in range(3):
        report, log = run_training(train, work)
        if report["verdict"]["limiting_stage"] == "decompress":
            break
        print("attempt %d: the report named %s, not decompress; again"
              % (attempt + 1, report["verdict"]["limiting_stage"]))
    if report["verdict"]["limiting_stage"] != "decompress":
        print("FAIL: with decompress delayed the report named %s:\n%s"
              % (report["verdict"]["limiting_stage"], log))
        return 1
    with open(os.path.join(work, "report.html")) as f:
        page_text = f.read()
    png, dom_text = render(chromium, work)
    failures = check(report, page_text, dom_text, png)
    for f in failures:
        print("FAIL: " + f)
    print("screenshot: %s" % os.path.abspath(png))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
