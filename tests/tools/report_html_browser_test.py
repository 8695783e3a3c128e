"""sluice-train --report-html, rendered by a real headless browser (Debian's chromium).

A run whose limit is known (one decompress thread delayed by 16 ms a frame; as in
tests/report/bottleneck_validation_test.cc), through a transform chain whose ops have long
names, writes the page and the JSON report; chromium renders the page to a PNG and dumps the
DOM it built. From that DOM: exactly one box is marked as the limit, and it is the stage the
report names (decompress); the verdict sentence is there; the what-if table and both charts
are there; the bold what-if row is the LIMIT box's stage (or its whole, with the caption saying
so), and every row that gained more is explained in the caption; and the page references no
http(s) URL. A copy of the page with a measuring script (the page itself runs none) checks the
layout: no op name of the preprocess box, and no content of any box, runs out of its box.

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
# Ops whose canonical names are long and have few spaces ("RandomResizedCrop(size=(28, 28),
# scale=(0.08, 1), ratio=(0.75, 1.3333), interpolation=bilinear, antialias=False)"): wider than
# a box of the chain, so the page must wrap them.
TRANSFORMS = ("RandomResizedCrop(size=(28, 28), scale=(0.08, 1.0), ratio=(0.75, 1.3333)), "
              "RandomHorizontalFlip()")

# Injected into a copy of the page: on load, measures every stage box and every element of the
# op list inside one, and writes what overflows its box into <pre id="measured"> as JSON.
MEASURE_SCRIPT = """<script>
window.addEventListener("load", () => {
  const out = {ops: 0, overflows: []};
  for (const box of document.querySelectorAll(".stage")) {
    const b = box.getBoundingClientRect();
    const check = (el, what) => {
      const r = el.getBoundingClientRect();
      if (el.scrollWidth > el.clientWidth || r.right > b.right + 0.5 || r.left < b.left - 0.5) {
        out.overflows.push({stage: box.dataset.stage, what: what,
                            scroll_width: el.scrollWidth, client_width: el.clientWidth,
                            text: el.textContent.slice(0, 60)});
      }
    };
    check(box, "box");
    for (const el of box.querySelectorAll(".ops, .ops li")) {
      out.ops += 1;
      check(el, el.tagName.toLowerCase());
    }
  }
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


class Dom(html.parser.HTMLParser):
    """The stage boxes, the verdict's attributes and text, and the ids seen."""

    def __init__(self):
        super().__init__()
        self.boxes = []  # (data-stage, data-limit, classes)
        self.verdict_attrs = None
        self.verdict_text = ""
        self.ids = []
        self.rects = {}  # svg id -> number of <rect>
        self.what_if = []  # (tr classes, [cell texts]) of the what-if table
        self.what_if_caption = ""
        self.measured = ""  # the measuring copy's <pre id="measured"> (JSON)
        self._in_verdict = 0
        self._svg = None
        self._in_what_if = False
        self._cell = None  # the text of the what-if cell being read
        self._text_of = None  # "caption" or "measured" while inside that element

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
        if tag == "table" and a.get("id") == "what-if":
            self._in_what_if = True
        if self._in_what_if and tag == "tr":
            self.what_if.append((classes, []))
        if self._in_what_if and tag in ("td", "th"):
            self._cell = ""
        if a.get("id") == "what-if-caption":
            self._text_of = "caption"
        if tag == "pre" and a.get("id") == "measured":
            self._text_of = "measured"

    def handle_endtag(self, tag):
        if self._in_verdict:
            self._in_verdict -= 1
        if tag == "svg":
            self._svg = None
        if tag == "table":
            self._in_what_if = False
        if tag in ("td", "th") and self._cell is not None:
            if self.what_if:
                self.what_if[-1][1].append(self._cell.strip())
            self._cell = None
        if tag in ("div", "pre"):
            self._text_of = None

    def handle_data(self, data):
        if self._in_verdict:
            self.verdict_text += data
        if self._cell is not None:
            self._cell += data
        if self._text_of == "caption":
            self.what_if_caption += data
        elif self._text_of == "measured":
            self.measured += data


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
           "--what-if=all", "--transforms=" + TRANSFORMS,
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
    dom = dump_dom(common, page)
    # The layout, measured by a script in a copy of the page (the page itself runs none).
    with open(os.path.join(work, "report.html")) as f:
        measuring = f.read().replace("</body>", MEASURE_SCRIPT + "</body>")
    with open(os.path.join(work, "report_measured.html"), "w") as f:
        f.write(measuring)
    measured = Dom()
    measured.feed(dump_dom(common, "file://" + os.path.abspath(
        os.path.join(work, "report_measured.html"))))
    if not measured.measured:
        sys.exit("FAIL: the measuring script wrote nothing (did chromium run it?)")
    return png, dom, json.loads(measured.measured)


def dump_dom(common, page):
    dom = subprocess.run(common + ["--dump-dom", page], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=120)
    if dom.returncode != 0 or "<html" not in dom.stdout:
        sys.exit("FAIL: chromium --dump-dom exited %d:\n%s" % (dom.returncode, dom.stderr))
    return dom.stdout


def check_what_if(dom, limit):
    """The bold row is the LIMIT box's stage, or the whole it is a part of with the caption
    saying so; each measured row that gained more than the bold row is named in the caption
    (a whole or a part of the bold row's stage), so the page never shows a bold row and a
    larger speedup without saying why."""
    failures = []
    rows = [(classes, cells) for classes, cells in dom.what_if
            if cells and cells[0] != "free stage"]
    bold = [cells for classes, cells in rows if "best" in classes]
    if len(bold) != 1:
        return ["%d bold what-if rows: %s" % (len(bold), rows)]
    name, speedup = bold[0][0], float(bold[0][2].rstrip("x"))
    caption = " ".join(dom.what_if_caption.split())
    if name != limit and "%s is a part of %s" % (limit, name) not in caption:
        failures.append("the bold what-if row is %s, the LIMIT box %s, and the caption does not "
                        "say why: %r" % (name, limit, caption))
    for classes, cells in rows:
        measured = len(cells) >= 3 and cells[2].endswith("x")
        if measured and cells[0] != "normal" and float(cells[2].rstrip("x")) > speedup:
            if "%s (%s)" % (cells[0], cells[2]) not in caption:
                failures.append("the what-if row %s (%s) gained more than the bold row %s (%.2fx) "
                                "and the caption does not say why: %r"
                                % (cells[0], cells[2], name, speedup, caption))
    return failures


def check(report, page_text, dom_text, png, layout):
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
    failures += check_what_if(dom, limit)
    if not layout["ops"]:
        failures.append("the preprocess box lists no transform ops (the run has a chain)")
    for o in layout["overflows"]:
        failures.append("%s of the %s box runs out of it (scrollWidth %d > clientWidth %d, or "
                        "past its edge): %r" % (o["what"], o["stage"], o["scroll_width"],
                                                o["client_width"], o["text"]))
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
    png, dom_text, layout = render(chromium, work)
    failures = check(report, page_text, dom_text, png, layout)
    for f in failures:
        print("FAIL: " + f)
    print("screenshot: %s" % os.path.abspath(png))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
