#!/usr/bin/env python3
"""Drives Granary's web page in a real headless Chromium (Debian's, through
Playwright's `executable_path`; Playwright's own browser download is never used).

Usage: browser_flow.py --base http://127.0.0.1:PORT --tree DIR --expect JSON --out DIR
                       [--chromium /usr/bin/chromium]

DIR (--tree) holds the published netCDF files; --expect is a JSON file describing
the flow's data:
  {"files": {<title>: <relative path under --tree>, ...},
   "prefix": "CanE",                         # typed into the search box
   "pick": ["source_id", "CanESM5"],         # the autocomplete entry to pick
   "picked": [<title>, <title>],             # what the search then shows
   "facet": ["member_id", "r2i1p1f1"],       # the facet value to click
   "single": <title>,                        # what remains, opened and downloaded
   "late": <title>,                          # the one file covering 2015 and later
   "cmip5": {"title": <title>, "summary": "CanESM2 · historical · …"},  # its facet line
   "node": "/granary/…",                     # this node's prefix (the file's location)
   "zarr": {"open": {"id": <dataset id>, "file": <title>},   # a dataset of one file
            "refused": {"id": <dataset id>, "why": "not available: …"}}}  # a 422, its reason's start

The flow, at desktop width (1280 px) and at phone width (375 px): open the page;
check the CMIP5 hit's facet summary; "select this page" selects every hit and
clears again; filter by time coverage and remove the filter; type in the search box and pick an autocomplete entry; click a facet; open the file
panel and check its metadata and where the file is held (this node, up in the
location catalog, with a working URL); download the file and compare its bytes with the
original; remove the facet filter, select two files and "download all", comparing
both; show the node status (faces, and the federation's nodes: this one, up); list the results by dataset
and open the virtual Zarr snippet of "open": its text, read from the page, is run as it
is by this python (xarray, fsspec, zarr) against the gateway and the dataset it opens
compared with the original file; "refused" shows the gateway's reason (its 422's
X-Granary-Refused, the same as the JSON error of a GET) and no snippet. A screenshot of
each step goes to --out. Any console error, page error, failed request or HTTP error
response fails the run, but for the 422 of "refused".

Prints one JSON line {"ok": true, "screenshots": [...], "downloads": N, "zarr_runs": N}
and exits 0, or prints the problems and exits 1.
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

from playwright.sync_api import expect, sync_playwright

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",  # containers often have a small /dev/shm
]
VIEWPORTS = {
    "desktop": dict(viewport={"width": 1280, "height": 860}),
    "phone": dict(viewport={"width": 375, "height": 740}, device_scale_factor=2,
                  is_mobile=True, has_touch=True),
}
TIMEOUT_MS = 15_000

# Runs the page's virtual Zarr snippet (a file, argv[1]) as it is, then compares the
# `ds` it opened with the original netCDF file (argv[2]): every variable, its dims and
# its values (times decoded the same way by both).
RUN_SNIPPET = r"""
import sys
import xarray as xr
snippet, original = sys.argv[1], sys.argv[2]
ns = {"__name__": "__main__"}
exec(compile(open(snippet).read(), snippet, "exec"), ns)
ds = ns["ds"]
want = xr.open_dataset(original)
xr.testing.assert_equal(ds.load(), want.load())
print(sorted(ds.variables), dict(ds.sizes))
"""


def wait_http(base, seconds=20):
    """Waits until the gateway answers /api/status."""
    end = time.time() + seconds
    last = None
    while time.time() < end:
        try:
            with urllib.request.urlopen(f"{base}/api/status", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception as e:  # not up yet
            last = e
        time.sleep(0.2)
    raise SystemExit(f"the gateway at {base} did not answer within {seconds} s: {last}")


def sha(b):
    return hashlib.sha256(b).hexdigest()


class Flow:
    def __init__(self, args, expect_data):
        self.a = args
        self.x = expect_data
        self.problems = []
        self.shots = []
        self.downloads = 0
        self.zarr_runs = 0
        os.makedirs(args.out, exist_ok=True)

    def original(self, title):
        with open(os.path.join(self.a.tree, self.x["files"][title]), "rb") as f:
            return f.read()

    def check_download(self, d, what):
        """Compares a Playwright download with the original file of its name."""
        title = d.suggested_filename
        if title not in self.x["files"]:
            self.problems.append(f"{what}: unexpected file name {title!r}")
            return title
        got = open(d.path(), "rb").read()
        want = self.original(title)
        if got != want:
            self.problems.append(
                f"{what}: {title}: {len(got)} bytes, sha256 {sha(got)}; "
                f"the original has {len(want)} bytes, sha256 {sha(want)}")
        self.downloads += 1
        return title

    def shot(self, page, label, step):
        path = os.path.join(self.a.out, f"{label}-{step}.png")
        page.screenshot(path=path)  # what the user sees (fixed and sticky parts in place)
        self.shots.append(path)

    def watch(self, page, label):
        """Records console errors, page errors, failed requests and HTTP errors."""
        def failed(r):
            # A navigation that became a download is reported as aborted by
            # Chromium; that is the download working, not a failure.
            if r.failure == "net::ERR_ABORTED" and "/data/" in r.url and r.is_navigation_request():
                return
            self.problems.append(f"[{label}] request failed: {r.method} {r.url}: {r.failure}")

        refused = f"{self.a.base}/api/zarr/{self.x['zarr']['refused']['id']}"

        def console(m):
            # Chromium logs the expected 422 of the refused dataset's HEAD.
            if m.type == "error" and not (
                    "422" in m.text and (m.location or {}).get("url") == refused):
                self.problems.append(f"[{label}] console error: {m.text} ({m.location})")

        def response(r):
            if r.status == 422 and r.url == refused and r.request.method == "HEAD":
                return
            if r.status >= 400:
                self.problems.append(f"[{label}] HTTP {r.status} for {r.request.method} {r.url}")

        page.on("console", console)
        page.on("pageerror", lambda e: self.problems.append(f"[{label}] page error: {e}"))
        page.on("requestfailed", failed)
        page.on("response", response)

    def run_viewport(self, browser, label):
        x = self.x
        ctx = browser.new_context(accept_downloads=True, **VIEWPORTS[label])
        ctx.set_default_timeout(TIMEOUT_MS)
        page = ctx.new_page()
        self.watch(page, label)
        phone = label == "phone"
        hits = page.locator("#hits > li")

        # 1. Open the page: every published file is listed.
        page.goto(self.a.base + "/")
        expect(hits).to_have_count(len(x["files"]))
        expect(page.locator("#total")).to_contain_text(f"{len(x['files'])} files")
        self.shot(page, label, "01-open")

        # 1a. A CMIP5 hit shows its facets (model, experiment, ensemble, table,
        #     variable, version), not its raw NDN name.
        c5 = hits.filter(has_text=x["cmip5"]["title"])
        expect(c5).to_have_count(1)
        expect(c5.locator(".hit-meta").first).to_have_text(x["cmip5"]["summary"])
        expect(c5.locator(".hit-meta").first).not_to_contain_text("/cmip5/")

        # 1b. "Select this page" selects every hit on the page, and clears them.
        n = len(x["files"])
        page.locator("#select-page").check()
        expect(page.locator("#sel-count")).to_have_text(f"{n} files")
        expect(hits.locator("input.pick:checked")).to_have_count(n)
        expect(page.locator("#select-page")).to_be_checked()
        self.shot(page, label, "01b-select-page")
        page.locator("#select-page").uncheck()
        expect(hits.locator("input.pick:checked")).to_have_count(0)
        expect(page.locator("#selection")).to_be_hidden()

        # 1c. The time filter: coverage overlapping 2015 onwards leaves the one
        #     ssp585 file; its chip removes it again.
        if phone:
            page.locator("#facets-details > summary").click()
        page.locator("#time-from").fill("2015")
        page.locator("#time-form button[type=submit]").click()
        expect(hits).to_have_count(1)
        expect(hits.locator(".hit-title")).to_have_text(x["late"])
        page.locator("#chips .chip", has_text="time:").click()
        expect(hits).to_have_count(len(x["files"]))
        if phone:
            page.locator("#facets-details > summary").click()
            expect(page.locator("#facets")).to_be_hidden()

        # 2. Type in the search box; pick an autocomplete entry (by keyboard on the
        #    desktop, by touch on the phone).
        facet, value = x["pick"]
        box = page.locator("#q")
        box.click()
        box.press_sequentially(x["prefix"], delay=60)
        option = page.locator(f'#ac-list [role=option][data-facet="{facet}"][data-value="{value}"]')
        expect(option).to_be_visible()
        expect(box).to_have_attribute("aria-expanded", "true")
        self.shot(page, label, "02-autocomplete")
        if phone:
            option.tap()
        else:
            options = page.locator("#ac-list [role=option]")
            index = next(i for i in range(options.count())
                         if options.nth(i).get_attribute("data-facet") == facet
                         and options.nth(i).get_attribute("data-value") == value)
            for _ in range(index + 1):
                box.press("ArrowDown")
            expect(options.nth(index)).to_have_attribute("aria-selected", "true")
            box.press("Enter")
        expect(page.locator("#chips .chip")).to_contain_text([f"{facet}: {value}"])
        expect(hits).to_have_count(len(x["picked"]))
        titles = sorted(hits.locator(".hit-title").all_text_contents())
        if titles != sorted(x["picked"]):
            self.problems.append(f"[{label}] after picking {facet}={value}: {titles}")
        self.shot(page, label, "03-picked")

        # 3. Click a facet value in the facet panel (folded on a phone: open it).
        ffacet, fvalue = x["facet"]
        if phone:
            details = page.locator("#facets-details")
            if details.get_attribute("open") is None:
                page.locator("#facets-details > summary").click()
        button = page.locator(f'#facets button[data-facet="{ffacet}"][data-value="{fvalue}"]')
        group = page.locator(f"#facets details.facet:has(#facet-{ffacet})")
        if group.get_attribute("open") is None:
            page.locator(f"#facet-{ffacet}").click()
        expect(button.locator(".count")).to_have_text("1 file")  # "1" and, for screen readers, " file"
        if phone:
            button.tap()
        else:  # by keyboard: the focus stays on the button after the page re-renders
            button.focus()
            page.keyboard.press("Enter")
        expect(button).to_have_attribute("aria-pressed", "true")
        if not phone:
            expect(button).to_be_focused()
        expect(hits).to_have_count(1)
        expect(hits.locator(".hit-title")).to_have_text(x["single"])
        if phone:  # back from the filter list to the results
            show = page.locator("#show-results")
            expect(show).to_have_text("Show the file")
            show.tap()
            expect(page.locator("#facets")).to_be_hidden()
            expect(hits.locator(".hit-title")).to_be_in_viewport()
        if page.url.find(f"{ffacet}={fvalue}") < 0:
            self.problems.append(f"[{label}] the URL does not hold the filter: {page.url}")
        self.shot(page, label, "04-facet")

        # 4. Open the file panel: metadata, variables with units and shapes,
        #    time coverage, versions, the NDN name.
        if phone:
            hits.locator(".hit-title").tap()
        else:  # by keyboard
            hits.locator(".hit-title").focus()
            page.keyboard.press("Enter")
        panel = page.locator("#file")
        expect(panel).to_be_visible()
        expect(page.locator("#file-h")).to_have_text(x["single"])
        expect(page.locator("#file-name")).to_contain_text(x["single"])
        vars_table = page.locator("#file-body table.vars")
        expect(vars_table).to_contain_text("tas")
        expect(vars_table).to_contain_text("K")  # the units of tas
        expect(vars_table).to_contain_text("time=")  # a shape
        expect(page.locator("#file-body .summary")).to_contain_text("Time coverage")
        # The DRS version (vYYYYMMDD) beside the NDN one, and the name's time
        # range with its end inclusive (…_185001-185112.nc: up to 1851-12).
        summary = page.locator("#file-body .summary")
        expect(summary).to_contain_text(re.compile(r"v20\d{6} \(DRS\)"))
        expect(summary).to_contain_text(re.compile(r"\d{4}-\d{2} → \d{4}-12"))
        expect(page.locator("#file-body .versions li")).to_have_count(1)
        expect(page.locator("#file-body .attrs-table")).to_contain_text("source_id")
        # Its identifier (the tracking_id attribute) is in the summary.
        expect(page.locator("#file-tracking-id")).to_contain_text("hdl:21.14100/")
        # The quick look: a picker holding tas, and its picture (740 px wide) loaded.
        expect(page.locator("#preview-var")).to_contain_text("tas")
        page.wait_for_function(
            "() => { const i = document.querySelector('#preview-img'); return i && i.complete && i.naturalWidth === 740; }"
        )
        # Beside it, the time series of the grid point clicked on the map (740 x 400).
        page.locator("#preview-img").click()
        page.wait_for_function(
            "() => { const i = document.querySelector('#series-img'); return i && !i.hidden && i.complete && i.naturalWidth === 740 && i.naturalHeight === 400; }"
        )
        expect(page.locator("#series-lat")).not_to_have_value("")
        expect(page.locator("#series-lon")).not_to_have_value("")
        # Where it is held: this node, with its gateway's URL of the file.
        locs = page.locator("#file-locations li")
        expect(locs).to_have_count(1)
        expect(locs.locator(".loc-node")).to_have_text(x["node"])
        # The location catalog's word on it (held_by of /api/file): this node, up.
        expect(locs.locator(".loc-state")).to_have_text(re.compile(r"^up( · last seen .* ago)?$"))
        expect(locs.locator(".loc-prefix")).to_contain_text(x["single"] + "/v=")
        href = locs.locator("a.loc-url").get_attribute("href") or ""
        want = self.a.base + (page.locator("#file-download").get_attribute("href") or "?")
        if href != want:
            self.problems.append(f"[{label}] location URL {href!r}, expected {want!r}")
        else:
            r = page.request.get(href)
            if r.status != 200 or r.body() != self.original(x["single"]):
                self.problems.append(f"[{label}] the location URL answered {r.status} with other bytes")
        self.shot(page, label, "05-file-panel")
        page.locator("#file-body").get_by_role("button", name="Copy the NDN name").click()
        expect(page.locator("#toast")).to_have_text("Copied")

        # 5. Download from the panel and compare the bytes.
        with page.expect_download() as info:
            page.locator("#file-download").click()
        got = self.check_download(info.value, f"[{label}] file panel download")
        if got != x["single"]:
            self.problems.append(f"[{label}] the panel downloaded {got}, not {x['single']}")
        self.shot(page, label, "06-downloaded")
        page.keyboard.press("Escape")
        expect(panel).to_be_hidden()
        if not phone:  # the focus is back where it was
            expect(hits.locator(".hit-title")).to_be_focused()

        # 6. Remove the facet filter (its chip), select two files, download all.
        page.locator("#chips .chip", has_text=f"{ffacet}: {fvalue}").click()
        expect(hits).to_have_count(len(x["picked"]))
        picks = hits.locator("input.pick")
        for i in range(picks.count()):
            picks.nth(i).check()
        expect(page.locator("#sel-count")).to_have_text(f"{len(x['picked'])} files")
        page.locator("#sel-commands-toggle").click()
        cmd_get = page.locator("#cmd-get").text_content()
        cmd_wget = page.locator("#cmd-wget").text_content()
        for t in x["picked"]:
            if t not in cmd_get or t not in cmd_wget:
                self.problems.append(f"[{label}] {t} is missing from the commands:\n{cmd_get}\n{cmd_wget}")
        if "granary get" not in cmd_get or "wget -c" not in cmd_wget:
            self.problems.append(f"[{label}] odd commands:\n{cmd_get}\n{cmd_wget}")
        # The whole search as a wget script (the gateway's /api/wget): one URL
        # per match, and nothing else.
        page.locator("#search-commands > summary").click()
        expect(page.locator("#cmd-wget-query")).to_contain_text("/api/wget?")
        r = page.request.get(page.locator("#wget-link").get_attribute("href"))
        script = r.text()
        if r.status != 200 or not all(t in script for t in x["picked"]) or x["late"] in script:
            self.problems.append(f"[{label}] the wget script of the search ({r.status}):\n{script[:2000]}")
        query_cmd = page.locator("#cmd-query").text_content()
        if f"{facet}={value}" not in query_cmd or "--query" not in query_cmd:
            self.problems.append(f"[{label}] odd granary get --query command: {query_cmd}")
        self.shot(page, label, "07-selected")

        downloads = []
        page.on("download", lambda d: downloads.append(d))
        page.locator("#download-all").click()
        expect(page.locator("#progress")).to_have_attribute("data-done", "ok")
        deadline = time.time() + TIMEOUT_MS / 1000
        while len(downloads) < len(x["picked"]) and time.time() < deadline:
            page.wait_for_timeout(100)
        names = sorted(self.check_download(d, f"[{label}] download all") for d in downloads)
        if names != sorted(x["picked"]):
            self.problems.append(f"[{label}] download all saved {names}, expected {sorted(x['picked'])}")
        expect(page.locator("#progress-files li.ok")).to_have_count(len(x["picked"]))
        self.shot(page, label, "08-download-all")

        # 7. Node status: faces with counters.
        page.locator("#status-toggle").click()
        expect(page.locator("#faces tbody tr").first).to_be_visible()
        expect(page.locator("#status-summary")).to_contain_text("faces")
        # The federation's nodes: a single node lists itself, up.
        fed = page.locator("#federation tbody tr")
        expect(fed).to_have_count(1)
        expect(fed.locator(".fed-node")).to_have_text(x["node"])
        expect(fed.locator(".fed-state")).to_have_text("up")
        expect(page.locator("#federation caption")).to_contain_text("1 node, 1 up")
        self.shot(page, label, "09-status")

        # 8. By dataset: the dataset records, each with its files and its virtual Zarr
        #    snippet for xarray, asked for when opened.
        page.goto(f"{self.a.base}/?by=dataset")
        zx = x["zarr"]
        ds = page.locator(f'#hits li.hit.dataset[data-id="{zx["open"]["id"]}"]')
        expect(ds).to_be_visible()
        expect(page.locator("#by-dataset")).to_be_checked()
        expect(ds.locator(".ds-files li").first).to_be_visible()
        ds.locator(".zarr summary").click()
        code = ds.locator("code.zarr-py")
        expect(code).to_contain_text('"reference://"')
        url = f"{self.a.base}/api/zarr/{zx['open']['id']}"
        expect(ds.locator(".zarr-url")).to_have_text(url)
        expect(ds.locator(".zarr-refused")).to_have_count(0)
        self.shot(page, label, "10-by-dataset")
        self.run_snippet(label, code.text_content(), zx["open"]["file"])

        # 8a. A dataset the gateway refuses (422): its reason, the JSON error of a GET,
        #     and no snippet.
        bad = page.locator(f'#hits li.hit.dataset[data-id="{zx["refused"]["id"]}"]')
        bad.locator(".zarr summary").click()
        reason = bad.locator(".zarr-reason")
        expect(reason).to_contain_text(zx["refused"]["why"])
        try:
            urllib.request.urlopen(f"{self.a.base}/api/zarr/{zx['refused']['id']}", timeout=10)
            self.problems.append(f"[{label}] the refused dataset answered 200")
        except urllib.error.HTTPError as e:
            want = json.load(e)["error"]
            if e.code != 422 or reason.text_content() != want:
                self.problems.append(
                    f"[{label}] the page shows {reason.text_content()!r}; the gateway's {e.code} says {want!r}")
        expect(bad.locator(".zarr-py")).to_have_count(0)
        expect(bad.locator(".zarr-url")).to_have_count(0)
        bad.scroll_into_view_if_needed()
        self.shot(page, label, "11-zarr-refused")

        # No horizontal scrolling at this width.
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if overflow > 0:
            self.problems.append(f"[{label}] the page is {overflow} px wider than the screen")
        ctx.close()

    def run_snippet(self, label, text, title):
        """Runs the snippet's text, as the page shows it, with this python; the dataset
        it opens must equal the original file."""
        path = os.path.join(self.a.out, f"{label}-zarr-snippet.py")
        with open(path, "w") as f:
            f.write(text)
        original = os.path.join(self.a.tree, self.x["files"][title])
        r = subprocess.run([sys.executable, "-c", RUN_SNIPPET, path, original],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            self.problems.append(
                f"[{label}] the page's virtual Zarr snippet failed or differs from {title}:\n"
                f"{text}\n{r.stdout}{r.stderr[-4000:]}")
        else:
            self.zarr_runs += 1
            print(f"[{label}] virtual Zarr snippet: {r.stdout.strip()}", file=sys.stderr)

    def run(self):
        wait_http(self.a.base)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=self.a.chromium, headless=True, args=CHROMIUM_ARGS)
            try:
                for label in VIEWPORTS:
                    try:
                        self.run_viewport(browser, label)
                    except Exception as e:  # a failed expectation: record, go on
                        self.problems.append(f"[{label}] {type(e).__name__}: {e}")
            finally:
                browser.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--tree", required=True)
    ap.add_argument("--expect", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    a = ap.parse_args()
    with open(a.expect) as f:
        x = json.load(f)
    flow = Flow(a, x)
    flow.run()
    print(json.dumps({"ok": not flow.problems, "screenshots": flow.shots,
                      "downloads": flow.downloads, "zarr_runs": flow.zarr_runs,
                      "problems": flow.problems}))
    if flow.problems:
        for p in flow.problems:
            print(f"problem: {p}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
