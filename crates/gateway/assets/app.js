// Granary's web page: search the node's science catalog, read a file's
// metadata, download one file or a selection. Plain ES module, no framework,
// nothing fetched from anywhere but this node's own /api and /data.
//
// State lives in the URL (?<facet>=<value>…&q=&offset=&all=1&file=&v=), so a
// search is a link that can be shared, and Back/Forward work.

const PAGE = 20;
const FACETS_SHOWN = 8;
const STATUS_EVERY_MS = 5000;
/** Files larger than this are handed to the browser's own download (streamed to
 * disk) by "download all", instead of being held in memory until complete. */
const IN_MEMORY_MAX = 512 * 1024 * 1024;
/** Facets listed first, in this order (DRS order); the others follow by name. */
const FACET_ORDER = [
  "project", "mip_era", "activity_id", "institution_id", "source_id", "experiment_id",
  "sub_experiment_id", "member_id", "variant_label", "table_id", "frequency", "realm",
  "variable_id", "grid_label",
  // CMIP5's DRS.
  "product", "institute", "model", "experiment", "time_frequency", "cmor_table", "ensemble", "variable",
  "version",
];
/** Facets shown in a result's summary line, per project (DRS order); a project
 * not listed shows its facets in FACET_ORDER, then by name. */
const SUMMARY_FACETS = {
  CMIP6: ["source_id", "experiment_id", "member_id", "table_id", "variable_id", "grid_label", "version"],
  CMIP5: ["model", "experiment", "ensemble", "cmor_table", "variable", "version"],
};
const SUMMARY_MAX = 7;
const RESERVED = new Set(["q", "time", "offset", "all", "file", "v", "by"]);

const $ = (id) => document.getElementById(id);

/** Creates an element: el("a", {href: "x", class: "y"}, child, "text", …). */
function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k in e && typeof v !== "string") e[k] = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined || k === false) continue;
    e.append(k instanceof Node ? k : String(k));
  }
  return e;
}

// ------------------------------------------------------------------ formatting

function bytes(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "?";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  let x = Number(n);
  while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
  return i === 0 ? `${x} B` : `${x.toFixed(x < 10 ? 2 : 1)} ${units[i]}`;
}

function rate(bytesPerS) {
  const bits = bytesPerS * 8;
  if (bits >= 1e9) return `${(bits / 1e9).toFixed(2)} Gbit/s`;
  if (bits >= 1e6) return `${(bits / 1e6).toFixed(2)} Mbit/s`;
  if (bits >= 1e3) return `${(bits / 1e3).toFixed(1)} kbit/s`;
  return `${Math.round(bits)} bit/s`;
}

function duration(s) {
  s = Math.floor(s);
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  if (d) return `${d} d ${h} h`;
  if (h) return `${h} h ${m} min`;
  if (m) return `${m} min ${s % 60} s`;
  return `${s} s`;
}

/** A repository version (µs since the epoch for Granary's own) as a date. */
function versionDate(v) {
  const n = Number(v);
  if (!(n > 1e14 && n < 1e17)) return "";
  return new Date(n / 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

const day = (iso) => (iso ? String(iso).replace(/T00:00:00$/, "") : "");

/** The time range a file's name gives (CMIP's `_195001-195912.nc`), as the name
 * means it: the end inclusive ("1950-01 → 1959-12"), not the time axis's exclusive
 * bound (1960-01-01). Empty when the name has none. */
function nameRange(title) {
  const m = /_(\d{4,14})-(\d{4,14})(?:-clim)?\.nc4?$/.exec(String(title || ""));
  if (!m || m[1].length !== m[2].length) return "";
  const f = (t) => {
    const p = [t.slice(0, 4), t.slice(4, 6), t.slice(6, 8)].filter(Boolean).join("-");
    const hm = t.length > 8 ? `T${t.slice(8, 10)}:${t.slice(10, 12) || "00"}` : "";
    return p + hm;
  };
  return `${f(m[1])} → ${f(m[2])}`;
}

/** A file's time coverage for people: the name's range when it has one, else the
 * catalog's start and end. */
function coverage(h) {
  return nameRange(h.title || (h.name || "").split("/").pop()) ||
    (h.time_start ? `${day(h.time_start)} → ${day(h.time_end)}` : "");
}

/** The text of a netCDF attribute value ({type, value} as the catalog stores it). */
function attrText(a) {
  if (a === null || a === undefined) return "";
  if (typeof a !== "object") return String(a);
  const v = "value" in a ? a.value : a;
  return Array.isArray(v) ? v.join(", ") : String(v);
}

/** Single-quotes a word for a POSIX shell. */
const sq = (s) => `'${String(s).replace(/'/g, `'\\''`)}'`;

// ------------------------------------------------------------------ state

const state = {
  filters: new Map(), // facet -> Set of values (OR within, AND across)
  q: "",
  time: "", // "START/END" (either may be empty): time coverage overlapping it
  offset: 0,
  all: false, // every version, not only the latest
  byDataset: false, // results grouped by dataset (the catalog's dataset records)
  file: null, // {name, version} of the open file panel
  selected: new Map(), // "name@version" -> hit
  page: null, // the last search answer
  expanded: new Set(), // facets showing all their values
  folded: new Map(), // facet -> open (true) or folded (false), as the user last set it
};

function readUrl() {
  const p = new URLSearchParams(location.search);
  state.filters = new Map();
  for (const [k, v] of p) {
    if (RESERVED.has(k) || v === "") continue;
    if (!state.filters.has(k)) state.filters.set(k, new Set());
    state.filters.get(k).add(v);
  }
  state.q = p.get("q") || "";
  state.time = p.get("time") || "";
  state.offset = Math.max(0, parseInt(p.get("offset") || "0", 10) || 0);
  state.all = p.get("all") === "1";
  state.byDataset = p.get("by") === "dataset";
  state.file = p.get("file") ? { name: p.get("file"), version: p.get("v") || "" } : null;
}

/** The page's own URL parameters (state). */
function urlParams() {
  const p = filterParams();
  if (state.offset) p.set("offset", state.offset);
  if (state.all) p.set("all", "1");
  if (state.byDataset) p.set("by", "dataset");
  if (state.file) {
    p.set("file", state.file.name);
    if (state.file.version) p.set("v", state.file.version);
  }
  return p;
}

/** Filters, free text and time as query parameters (shared by the API and the
 * URL); `without` leaves one facet's filter out. */
function filterParams(without) {
  const p = new URLSearchParams();
  for (const [k, vs] of state.filters) if (k !== without) for (const v of vs) p.append(k, v);
  if (state.q) p.set("q", state.q);
  if (state.time) p.set("time", state.time);
  return p;
}

function writeUrl(push) {
  const s = urlParams().toString();
  const url = s ? `?${s}` : location.pathname;
  if (push) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
}

// ------------------------------------------------------------------ API

async function api(path) {
  const res = await fetch(path, { headers: { Accept: "application/json" } });
  let body = null;
  try { body = await res.json(); } catch { /* not JSON */ }
  if (!res.ok) throw new Error((body && body.error) || `${res.status} ${res.statusText} for ${path}`);
  return body;
}

function showError(msg) {
  const e = $("error");
  e.textContent = msg || "";
  e.hidden = !msg;
}

function toast(msg) {
  const t = $("toast");
  t.textContent = msg;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 2500);
}

async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // Not a secure context, or no permission: the old way.
    const ta = el("textarea", { class: "offscreen", readonly: true }, text);
    document.body.append(ta);
    ta.select();
    document.execCommand("copy");
    ta.remove();
  }
  toast("Copied");
}

// ------------------------------------------------------------------ search

// Answers that arrive after a newer request was sent are dropped (by sequence
// number; requests are not aborted, so the network log stays clean).
let searchSeq = 0;

async function search({ push = false } = {}) {
  writeUrl(push);
  const p = filterParams();
  p.set("limit", PAGE);
  p.set("offset", state.offset);
  p.set("latest", state.all ? "false" : "true");
  p.set("facets", "all");
  // By dataset: the dataset records, each with its files; counts count datasets.
  const byDs = (o) => {
    if (!state.byDataset) return o;
    o.set("type", "dataset");
    o.set("files", "true");
    if (!state.all) o.set("dataset_latest", "true");
    return o;
  };
  byDs(p);
  const seq = ++searchSeq;
  $("results").setAttribute("aria-busy", "true");
  try {
    // The counts of a facet that has a filter are taken without that filter,
    // so its other values stay listed and can be added (OR within a facet).
    const others = [...state.filters.keys()].map((f) => {
      const o = filterParams(f);
      o.set("limit", 0);
      o.set("latest", state.all ? "false" : "true");
      o.set("facets", f);
      byDs(o);
      return api(`/api/search?${o}`).then((r) => [f, r.facet_counts?.[f] || []]);
    });
    const [page, ...alt] = await Promise.all([api(`/api/search?${p}`), ...others]);
    if (seq !== searchSeq) return;
    page.facet_counts = { ...(page.facet_counts || {}), ...Object.fromEntries(alt) };
    state.page = page;
    // An offset past the end (after a filter change): back to the last page.
    if (page.total > 0 && page.hits.length === 0 && state.offset > 0) {
      state.offset = Math.floor((page.total - 1) / PAGE) * PAGE;
      return search();
    }
    showError("");
    render();
  } catch (e) {
    if (seq !== searchSeq) return;
    showError(`Search failed: ${e.message}`);
  } finally {
    if (seq === searchSeq) $("results").removeAttribute("aria-busy");
  }
}

function setFilter(facet, value, on) {
  if (on) {
    if (!state.filters.has(facet)) state.filters.set(facet, new Set());
    state.filters.get(facet).add(value);
  } else {
    state.filters.get(facet)?.delete(value);
    if (!state.filters.get(facet)?.size) state.filters.delete(facet);
  }
  state.offset = 0;
  search({ push: true });
}

function render() {
  // Re-rendering replaces the buttons: a keyboard user keeps their place.
  const a = document.activeElement;
  const facetFocus = a?.classList.contains("facet-value") ? [a.dataset.facet, a.dataset.value] : null;
  const chipFocus = a?.closest?.("#chips") ? [...$("chips").children].indexOf(a) : -1;
  renderChips();
  renderFacets();
  if (facetFocus) {
    const [f, v] = facetFocus;
    const b = [...$("facets").querySelectorAll("button.facet-value")].find((x) => x.dataset.facet === f && x.dataset.value === v);
    (b || $(`facet-${f}`) || $("q")).focus();
  } else if (chipFocus >= 0) {
    const chips = $("chips").children;
    (chips[Math.min(chipFocus, chips.length - 1)] || $("q")).focus();
  }
  renderHits();
  renderSearchCommands();
  $("all-versions").checked = state.all;
  $("by-dataset").checked = state.byDataset;
  const [from, to] = state.time ? state.time.split("/") : ["", ""];
  $("time-from").value = from || "";
  $("time-to").value = to || "";
}

function renderChips() {
  const box = $("chips");
  box.replaceChildren();
  const chips = [];
  for (const [k, vs] of state.filters) {
    for (const v of vs) {
      chips.push(el("button", {
        type: "button", class: "chip", "aria-label": `Remove filter ${k} = ${v}`,
        onclick: () => setFilter(k, v, false),
      }, el("span", { class: "chip-k", text: `${k}:` }), ` ${v} `, el("span", { "aria-hidden": "true", text: "✕" })));
    }
  }
  if (state.q) {
    chips.push(el("button", {
      type: "button", class: "chip", "aria-label": `Remove words “${state.q}”`,
      onclick: () => { state.q = ""; $("q").value = ""; state.offset = 0; search({ push: true }); },
    }, el("span", { class: "chip-k", text: "words:" }), ` ${state.q} `, el("span", { "aria-hidden": "true", text: "✕" })));
  }
  if (state.time) {
    chips.push(el("button", {
      type: "button", class: "chip", "aria-label": `Remove time filter ${state.time}`,
      onclick: () => { state.time = ""; state.offset = 0; search({ push: true }); },
    }, el("span", { class: "chip-k", text: "time:" }), ` ${state.time.replace("/", " → ")} `, el("span", { "aria-hidden": "true", text: "✕" })));
  }
  if (chips.length > 1) {
    chips.push(el("button", {
      type: "button", class: "link", onclick: () => {
        state.filters.clear(); state.q = ""; state.time = ""; $("q").value = ""; state.offset = 0; search({ push: true });
      },
    }, "Clear all"));
  }
  box.append(...chips);
  box.hidden = chips.length === 0;
}

function facetRank(f) {
  const i = FACET_ORDER.indexOf(f);
  return i < 0 ? FACET_ORDER.length : i;
}

function renderFacets() {
  const box = $("facets");
  const counts = state.page?.facet_counts || {};
  const names = Object.keys(counts);
  for (const f of state.filters.keys()) if (!names.includes(f)) names.push(f);
  names.sort((a, b) => facetRank(a) - facetRank(b) || a.localeCompare(b));
  const groups = names.map((f) => {
    const active = state.filters.get(f) || new Set();
    const values = [...(counts[f] || [])];
    for (const v of active) if (!values.some(([x]) => x === v)) values.push([v, 0]);
    values.sort((a, b) => (b[1] - a[1]) || String(a[0]).localeCompare(String(b[0])));
    const all = state.expanded.has(f);
    const shown = all ? values : values.filter(([v], i) => i < FACETS_SHOWN || active.has(v));
    const id = `facet-${f}`;
    const list = el("ul", { class: "facet-values", "aria-labelledby": id },
      shown.map(([v, n]) => {
        const on = active.has(v);
        return el("li", {}, el("button", {
          type: "button", class: "facet-value", "aria-pressed": on ? "true" : "false",
          "data-facet": f, "data-value": v,
          onclick: () => setFilter(f, v, !on),
        }, el("span", { class: "fv", text: v }),
        el("span", { class: "count" }, n, el("span", { class: "visually-hidden", text: n === 1 ? " file" : " files" }))));
      }));
    const more = values.length > shown.length || all
      ? el("button", {
        type: "button", class: "link more", "aria-expanded": all ? "true" : "false",
        onclick: () => { all ? state.expanded.delete(f) : state.expanded.add(f); renderFacets(); },
      }, all ? "Show fewer" : `Show all ${values.length}`)
      : null;
    const open = state.folded.has(f) ? state.folded.get(f) : active.size > 0 || values.length > 1;
    const details = el("details", { class: "facet", open },
      el("summary", {
        id,
        // Click, Enter or Space: remember the user's choice across re-renders.
        onclick: () => state.folded.set(f, !details.open),
      }, f, active.size ? el("span", { class: "badge", text: active.size }) : null),
      list, more);
    return details;
  });
  box.replaceChildren(...groups);
  if (!groups.length) box.append(el("p", { class: "muted", text: "No facets for this search." }));
}

const keyOf = (h) => `${h.name}@${h.version}`;

/** A hit's facet values for its summary line: its project's summary facets,
 * or (another project) its own facets in DRS order, leaving out the project. */
function summaryFacets(h) {
  const f = h.facets || {};
  const project = h.project || f.project;
  const list = SUMMARY_FACETS[project]
    || Object.keys(f).filter((k) => k !== "project")
      .sort((a, b) => facetRank(a) - facetRank(b) || a.localeCompare(b))
      .slice(0, SUMMARY_MAX);
  return list.filter((k) => f[k]).map((k) => f[k]);
}

/** The xarray call that opens `url` (a `/api/zarr/<id>` reference set) as docs/http-api.md
 * prints it: `remote_options` is needed with zarr 3 (it reads through an async filesystem).
 * The browser test runs this very text. */
function zarrPython(url) {
  return `import xarray as xr
url = ${JSON.stringify(url)}
ds = xr.open_dataset("reference://", engine="zarr", backend_kwargs={"consolidated": False,
    "storage_options": {"fo": url, "remote_protocol": "http",
                        "remote_options": {"asynchronous": True}}})`;
}

/** The dataset as one virtual Zarr store (`/api/zarr/<id>`). Asked for (HEAD) when the
 * user first opens it: the URL and the xarray call if the server can build it, else the
 * server's reason (a 422's `X-Granary-Refused` header; another error's JSON `error`). */
function zarrSnippet(d) {
  const url = `${location.origin}/api/zarr/${encodeURIComponent(d.instance_id)}`;
  const body = el("div", { class: "zarr-body", "aria-live": "polite" });
  let asked = false;
  const show = async () => {
    asked = true;
    body.replaceChildren(el("p", { class: "muted zarr-wait", text: "Checking whether the server can combine the files…" }));
    let res;
    try {
      res = await fetch(url, { method: "HEAD" });
      await res.arrayBuffer(); // none: the request is then complete, not left open
    } catch (e) {
      asked = false; // a network error: ask again when opened again
      body.replaceChildren(el("p", { class: "warn zarr-refused", text: `Could not ask the server: ${e.message}` }));
      return;
    }
    if (res.ok) {
      const py = zarrPython(url);
      body.replaceChildren(
        el("p", {}, el("a", { href: url, class: "zarr-url" }, url)),
        el("div", { class: "cmd" }, el("pre", {}, el("code", { class: "zarr-py", text: py })),
          el("button", { type: "button", class: "copy", onclick: () => copy(py) }, "Copy")));
      return;
    }
    let why = res.headers.get("X-Granary-Refused");
    if (why) {
      try { why = decodeURIComponent(why); } catch { /* shown as sent */ }
    } else { // a HEAD has no body: the reason of another error is in the GET's
      try { why = (await api(url)) && `${res.status} ${res.statusText}`; } catch (e) { why = e.message; }
    }
    if (res.status >= 500) asked = false; // temporary: ask again when opened again
    body.replaceChildren(el("p", { class: "warn zarr-refused" },
      el("strong", { text: "Cannot be opened as one Zarr store: " }), el("span", { class: "zarr-reason", text: why })));
  };
  const details = el("details", {
    class: "zarr",
    ontoggle: () => { if (details.open && !asked) show(); },
  }, el("summary", { text: "Open in Python (virtual Zarr)" }), body);
  return details;
}

/** One dataset and its files under it. */
function datasetHit(d) {
  const axis = d.contiguous ? "contiguous"
    : [d.gaps.length ? `${d.gaps.length} gap${d.gaps.length === 1 ? "" : "s"}` : "",
      d.overlaps.length ? `${d.overlaps.length} overlap${d.overlaps.length === 1 ? "" : "s"}` : "",
      d.untimed_files ? `${d.untimed_files} without time` : ""].filter(Boolean).join(", ");
  const breaks = [...d.gaps.map((g) => ["gap", g]), ...d.overlaps.map((g) => ["overlap", g])];
  return el("li", { class: "hit dataset", "data-id": d.instance_id },
    el("div", { class: "hit-main" },
      el("p", { class: "hit-title" }, d.instance_id),
      el("p", { class: "hit-meta" },
        el("span", { text: `${d.number_of_files} file${d.number_of_files === 1 ? "" : "s"}` }),
        el("span", { text: bytes(d.size) }),
        d.time_start ? el("span", { text: `${day(d.time_start)} → ${day(d.time_end)}` }) : null,
        el("span", { class: d.contiguous ? "" : "warn", text: axis }),
        d.latest ? null : el("span", { class: "muted", text: "superseded" }),
      ),
      ...breaks.map(([k, g]) => el("p", { class: "hit-meta warn" }, `${k}: ${day(g.from)} → ${day(g.to)}`)),
      zarrSnippet(d),
      el("ul", { class: "ds-files" }, ...(d.files || []).map((f) => el("li", {},
        el("button", { type: "button", class: "link", onclick: () => openFile(f.name, f.version, { push: true }) }, f.name.split("/").pop()),
        el("span", { class: "muted", text: ` ${bytes(f.size)}${coverage(f) ? ` · ${coverage(f)}` : ""}` }),
        " ", el("a", { href: f.download, download: "", "aria-label": `Download ${f.name.split("/").pop()}` }, "⬇"),
      ))),
    ),
  );
}

function renderHits() {
  const page = state.page;
  if (page.type === "dataset") {
    const n = page.total;
    $("total").textContent = n === 0 ? "No datasets match." : `${n} dataset${n === 1 ? "" : "s"}${n > page.hits.length ? ` · showing ${state.offset + 1}–${state.offset + page.hits.length}` : ""}`;
    $("show-results").textContent = n === 0 ? "No datasets match" : `Show the ${n === 1 ? "dataset" : `${n} datasets`}`;
    $("hits").replaceChildren(...page.hits.map(datasetHit));
    $("page-info").textContent = `Page ${Math.floor(state.offset / PAGE) + 1} of ${Math.max(1, Math.ceil(n / PAGE))}`;
    $("prev").disabled = state.offset === 0;
    $("next").disabled = state.offset + page.hits.length >= n;
    $("select-page").disabled = true;
    return;
  }
  const list = $("hits");
  const n = page.total;
  const first = n ? state.offset + 1 : 0;
  const last = state.offset + page.hits.length;
  const what = [...state.filters.values()].flatMap((vs) => [...vs]).concat(state.q ? [state.q] : []);
  document.title = `${what.length ? `${what.join(", ")} — ` : ""}${n} file${n === 1 ? "" : "s"} — Granary`;
  $("show-results").textContent = n === 0 ? "No files match" : `Show ${n === 1 ? "the file" : `the ${n} files`}`;
  $("total").textContent = n === 0 ? "No files match." : `${n} file${n === 1 ? "" : "s"}${n > page.hits.length ? ` · showing ${first}–${last}` : ""}`;
  list.replaceChildren(...page.hits.map((h) => {
    const k = keyOf(h);
    const cb = el("input", {
      type: "checkbox", class: "pick", checked: state.selected.has(k),
      "aria-label": `Select ${h.title}`,
      onchange: (ev) => select(h, ev.target.checked),
    });
    const facets = summaryFacets(h);
    const time = coverage(h);
    return el("li", { class: "hit", "data-name": h.name, "data-key": k },
      cb,
      el("div", { class: "hit-main" },
        el("button", { type: "button", class: "hit-title", onclick: () => openFile(h.name, h.version, { push: true }) }, h.title || h.name),
        el("p", { class: "hit-meta" },
          facets.length ? el("span", { text: facets.join(" · ") }) : el("span", { class: "muted", text: h.name }),
        ),
        el("p", { class: "hit-meta muted" },
          el("span", { text: bytes(h.size) }),
          time ? el("span", { text: time }) : null,
          state.all ? el("span", { text: `v=${h.version}` }) : null,
        ),
      ),
      el("a", { class: "hit-dl", href: h.download, download: h.title || "", "aria-label": `Download ${h.title}` }, "⬇"),
    );
  }));
  const pages = Math.max(1, Math.ceil(n / PAGE));
  const cur = Math.floor(state.offset / PAGE) + 1;
  $("page-info").textContent = `Page ${cur} of ${pages}`;
  $("prev").disabled = state.offset === 0;
  $("next").disabled = last >= n;
  $("select-page").checked = page.hits.length > 0 && page.hits.every((h) => state.selected.has(keyOf(h)));
  $("select-page").disabled = page.hits.length === 0;
}

function renderSearchCommands() {
  const words = [];
  for (const [k, vs] of state.filters) words.push(`${k}=${[...vs].join(",")}`);
  if (state.q) words.push(...state.q.split(/\s+/).filter(Boolean));
  if (state.time) {
    const [from, to] = state.time.split("/");
    if (from) words.push(`from=${from}`);
    if (to) words.push(`to=${to}`);
  }
  if (state.all) words.push("latest=false");
  const dir = "granary-data";
  $("cmd-query").textContent = words.length
    ? `mkdir -p ${dir} && granary get --query ${sq(words.join(" "))} -o ${dir}/`
    : `mkdir -p ${dir} && granary get --query '' -o ${dir}/   # every file in the catalog`;
  const p = filterParams();
  p.set("latest", state.all ? "false" : "true");
  const url = `${location.origin}/api/wget?${p}`;
  $("wget-link").href = url;
  $("cmd-wget-query").textContent = `wget -O granary-wget.sh ${sq(url)} && bash granary-wget.sh`;
}

// ------------------------------------------------------------------ autocomplete

const ac = { items: [], active: -1, seq: 0, timer: 0 };

function acClose() {
  ac.items = [];
  ac.active = -1;
  $("ac-list").hidden = true;
  $("ac-list").replaceChildren();
  $("q").setAttribute("aria-expanded", "false");
  $("q").removeAttribute("aria-activedescendant");
}

function acRender() {
  const list = $("ac-list");
  list.replaceChildren(...ac.items.map((it, i) => el("li", {
    id: `ac-${i}`, role: "option", class: "ac-item",
    "aria-selected": i === ac.active ? "true" : "false",
    "data-facet": it.facet, "data-value": it.value,
    onmousedown: (ev) => ev.preventDefault(), // keep the focus in the box
    onclick: () => acPick(i),
  }, el("span", { class: "ac-v", text: it.value }), " ",
  el("span", { class: "ac-f", text: it.facet }), el("span", { class: "count", text: it.count }))));
  list.hidden = ac.items.length === 0;
  $("q").setAttribute("aria-expanded", ac.items.length ? "true" : "false");
  if (ac.active >= 0) {
    $("q").setAttribute("aria-activedescendant", `ac-${ac.active}`);
    $(`ac-${ac.active}`).scrollIntoView({ block: "nearest" });
  } else {
    $("q").removeAttribute("aria-activedescendant");
  }
}

async function acFetch(prefix) {
  const seq = ++ac.seq;
  try {
    const r = await api(`/api/autocomplete?${new URLSearchParams({ prefix, limit: 10 })}`);
    if (seq !== ac.seq || $("q").value.trim() !== prefix) return;
    ac.items = r.values || [];
    ac.active = -1;
    acRender();
  } catch {
    if (seq === ac.seq) acClose();
  }
}

function acPick(i) {
  const it = ac.items[i];
  if (!it) return;
  acClose();
  $("q").value = "";
  setFilter(it.facet, it.value, true);
}

function wireSearchBox() {
  const q = $("q");
  q.addEventListener("input", () => {
    clearTimeout(ac.timer);
    const v = q.value.trim();
    if (!v) { ac.seq++; acClose(); return; }
    ac.timer = setTimeout(() => acFetch(v), 120);
  });
  q.addEventListener("keydown", (ev) => {
    const n = ac.items.length;
    if (ev.key === "ArrowDown" && n) { ac.active = (ac.active + 1) % n; acRender(); ev.preventDefault(); }
    else if (ev.key === "ArrowUp" && n) { ac.active = (ac.active - 1 + n) % n; acRender(); ev.preventDefault(); }
    else if (ev.key === "Enter" && ac.active >= 0) { acPick(ac.active); ev.preventDefault(); }
    else if (ev.key === "Escape" && n) { acClose(); ev.preventDefault(); }
  });
  q.addEventListener("blur", () => setTimeout(acClose, 100));
  $("search-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    clearTimeout(ac.timer);
    ac.seq++;
    acClose();
    state.q = q.value.trim();
    q.value = "";
    state.offset = 0;
    search({ push: true });
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "/" && !/^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement?.tagName) && !$("file").open) {
      ev.preventDefault();
      q.focus();
    }
  });
}

// ------------------------------------------------------------------ file panel

let fileSeq = 0;

async function openFile(name, version, { push = false } = {}) {
  state.file = { name, version: version ? String(version) : "" };
  writeUrl(push);
  const dlg = $("file");
  const body = $("file-body");
  $("file-h").textContent = name.split("/").pop() || name;
  body.replaceChildren(el("p", { class: "muted", text: "Loading…" }));
  if (!dlg.open) dlg.showModal();
  const seq = ++fileSeq;
  try {
    const qs = version ? `?version=${encodeURIComponent(version)}` : "";
    const r = await api(`/api/file${name}${qs}`);
    if (seq !== fileSeq) return;
    renderFile(r);
  } catch (e) {
    if (seq !== fileSeq) return;
    body.replaceChildren(el("p", { class: "error", role: "alert", text: `Cannot show ${name}: ${e.message}` }));
  }
}

function closeFile() {
  state.file = null;
  if ($("file").open) $("file").close();
  writeUrl(false);
}

function table(caption, head, rows, cls = "") {
  return el("div", { class: "table-wrap" }, el("table", { class: cls },
    el("caption", { text: caption }),
    el("thead", {}, el("tr", {}, head.map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c, i) => (i === 0
      ? el("th", { scope: "row" }, c)
      : el("td", {}, c))))))));
}

function renderFile(r) {
  const m = r.meta || {};
  $("file-h").textContent = r.title || r.name;
  const hit = { ...r };
  delete hit.meta;
  const k = keyOf(r);
  const latest = Math.max(...(r.versions || [r.version]).map(Number));
  const parts = [];

  // Name, download, selection.
  parts.push(el("div", { class: "name-row" },
    el("code", { id: "file-name", class: "ndn-name", text: r.name }),
    el("button", { type: "button", class: "copy", "aria-label": "Copy the NDN name", onclick: () => copy(r.name) }, "Copy name")));
  parts.push(el("div", { class: "actions" },
    el("a", { id: "file-download", class: "button primary", href: r.download, download: r.title || "" }, `Download (${bytes(r.size)})`),
    el("label", { class: "inline" }, el("input", {
      type: "checkbox", id: "file-select", checked: state.selected.has(k),
      onchange: (ev) => select(hit, ev.target.checked),
    }), " selected")));

  // Summary.
  const dl = [];
  const add = (k2, v) => { if (v !== undefined && v !== null && v !== "") dl.push(el("dt", { text: k2 }), el("dd", {}, v)); };
  add("Size", `${bytes(r.size)} (${Number(r.size).toLocaleString("en")} bytes)`);
  const drs = (r.facets || {}).version;
  add("Version", `${drs ? `${drs} (DRS) · ` : ""}NDN version ${r.version}${versionDate(r.version) ? ` — published ${versionDate(r.version)}` : ""}${Number(r.version) === latest ? " (latest)" : ""}`);
  if (nameRange(r.title)) add("Time range (file name)", nameRange(r.title));
  if (m.time) add("Time coverage", `${m.time.start} → ${m.time.end} (calendar ${m.time.calendar}; ${m.time.units}; from ${m.time.from_variable}; the end is the time axis's bound)`);
  else if (r.time_start) add("Time coverage", `${r.time_start} → ${r.time_end}`);
  if (Array.isArray(r.bbox)) {
    const [la0, la1, lo0, lo1] = r.bbox;
    add("Lat / lon", `lat ${la0} … ${la1}, lon ${lo0} … ${lo1}`);
  }
  add("Project", r.project);
  add("Format", m.format);
  add("SHA-256", r.sha256 ? el("code", { class: "hash", text: r.sha256 }) : "");
  add("Manifest digest", r.manifest_digest ? el("code", { class: "hash", text: r.manifest_digest }) : "");
  add("Signed by", m.signer);
  add("Tracking id", r.tracking_id ? el("code", { id: "file-tracking-id", text: r.tracking_id }) : "");
  add("Further info", r.further_info_url ? el("a", { href: r.further_info_url, rel: "noopener" }, r.further_info_url) : "");
  add("Citation", r.citation);
  add("License", r.license);
  parts.push(el("dl", { class: "summary" }, dl));

  // Where the name and the contents disagree (published anyway, never hidden).
  const mism = m.translation?.mismatches || [];
  if (mism.length) {
    parts.push(el("div", { id: "file-mismatches", class: "mismatch warn", role: "note" },
      el("strong", { text: "The name and the file disagree" }),
      el("ul", {}, mism.map((x) => el("li", {
        text: x.facet === "time_range"
          ? `time range: the name says ${x.name_value}; the time axis (${x.attribute}) runs ${x.attribute_value}`
          : `${x.facet}: '${x.name_value}' in the name, '${x.attribute_value}' in the ${x.attribute} attribute`,
      })))));
  }

  // Quick look: a picture of a 2-D field, with a variable picker.
  parts.push(previewSection(r));

  // Where it is held: the nodes of the location catalog that hold this version
  // (held_by, with up/down), merged with the addresses the gateway knows (locations).
  const locs = Array.isArray(r.locations) ? r.locations.slice() : [];
  const held = Array.isArray(r.held_by) ? r.held_by : [];
  for (const h of held) {
    if (!locs.some((l) => l.node === h.node)) locs.push({ node: h.node, prefix: h.node ? `${h.node}${r.name}` : "" });
  }
  if (locs.length) {
    const state = (node) => {
      const h = held.find((x) => x.node === node);
      if (!h) return el("span", { class: "loc-state muted", text: "not in the location catalog" });
      const seen = h.last_seen_ms ? ` · last seen ${duration(Math.max(0, (Date.now() - h.last_seen_ms) / 1000))} ago` : "";
      return el("span", { class: `loc-state ${h.up ? "up" : "down"}`, text: `${h.up ? "up" : "down"}${seen}` });
    };
    parts.push(el("h3", { text: `Held at (${locs.length} node${locs.length === 1 ? "" : "s"})` }),
      el("ul", { id: "file-locations", class: "locations" }, locs.map((l) => el("li", { class: "location" },
        el("div", {}, el("code", { class: "loc-node", text: l.node || "unknown node" }), " ", state(l.node)),
        el("div", {}, "HTTP: ", l.url ? el("a", { class: "loc-url", href: l.url, rel: "noopener" }, l.url) : el("span", { class: "muted", text: "no gateway known" })),
        el("div", { class: "loc-prefix" }, "NDN: ", el("code", { text: l.prefix || "" }))))));
  }

  // Facets (each one a filter).
  const facets = Object.entries(r.facets || {}).sort((a, b) => facetRank(a[0]) - facetRank(b[0]) || a[0].localeCompare(b[0]));
  if (facets.length) {
    parts.push(el("h3", { text: "Facets" }), el("ul", { class: "facet-chips" }, facets.map(([f, v]) => el("li", {},
      el("button", {
        type: "button", class: "chip", title: `Filter on ${f} = ${v}`,
        onclick: () => { closeFile(); setFilter(f, v, true); },
      }, el("span", { class: "chip-k", text: `${f}:` }), ` ${v}`)))));
  }

  // Versions.
  const versions = [...(r.versions || [])].map(Number).sort((a, b) => b - a);
  if (versions.length) {
    parts.push(el("h3", { text: `Versions (${versions.length})` }), el("ul", { class: "versions" }, versions.map((v) => el("li", {},
      v === Number(r.version)
        ? el("strong", { "aria-current": "true" }, `v=${v}`)
        : el("button", { type: "button", class: "link", onclick: () => openFile(r.name, v) }, `v=${v}`),
      versionDate(v) ? ` ${versionDate(v)}` : "", v === latest ? " (latest)" : ""))));
  }

  // Variables.
  const vars = m.variables || [];
  if (vars.length) {
    parts.push(table(`Variables (${vars.length})`, ["Name", "Long name", "Units", "Dimensions (shape)", "Type"],
      vars.map((v) => [
        el("code", { text: v.name }),
        v.long_name || v.standard_name || "",
        v.units || "",
        (v.dims || []).length ? (v.dims || []).map((d, i) => `${d}=${v.shape?.[i] ?? "?"}`).join(" × ") : "scalar",
        v.dtype || "",
      ]), "vars"));
  }
  const dims = m.dimensions || [];
  if (dims.length) {
    parts.push(el("p", { class: "dims" }, el("strong", { text: "Dimensions: " }),
      dims.map((d) => `${d.name} = ${d.len}${d.unlimited ? " (unlimited)" : ""}`).join(", ")));
  }

  // Global attributes.
  const attrs = Object.entries(m.attributes || {});
  if (attrs.length) {
    parts.push(el("details", { class: "attrs", open: attrs.length <= 40 },
      el("summary", {}, el("h3", { text: `Global attributes (${attrs.length})` })),
      table("Global attributes", ["Attribute", "Value"], attrs.map(([a, v]) => [a, attrText(v)]), "attrs-table")));
  }

  const notes = [...(m.warnings || []), ...(m.problems || [])];
  const tr = m.translation;
  if (tr && (tr.fixes?.length || tr.mismatches?.length)) {
    notes.push(...(tr.fixes || []).map((f) => `name fix: ${typeof f === "string" ? f : JSON.stringify(f)}`));
  }
  if (notes.length) parts.push(el("h3", { text: "Notes" }), el("ul", { class: "notes" }, notes.map((n) => el("li", { text: n }))));

  parts.push(el("h3", { text: "Get it elsewhere" }),
    el("div", { class: "cmd" }, el("pre", {}, el("code", { id: "file-cmd", text: `granary get ${sq(`${r.name}/v=${r.version}`)} -o ${sq(r.title || "file")}` })),
      el("button", { type: "button", class: "copy", onclick: () => copy($("file-cmd").textContent) }, "Copy")));
  $("file-body").replaceChildren(...parts);
}

/** The file's quick-look picture (`/api/preview`): a variable, time step and level picker;
 * beside it the time series at a clicked point, a typed point or a box. */
function previewSection(r) {
  const box = el("section", { id: "file-preview", class: "preview", "aria-label": "Quick look" },
    el("h3", { text: "Quick look" }), el("p", { class: "muted", text: "Loading…" }));
  const base = `/api/preview${r.name}`;
  const v = `version=${encodeURIComponent(r.version)}`;
  api(`${base}?${v}`).then((list) => {
    const vars = list.variables || [];
    if (!vars.length) {
      const why = (list.not_plottable || []).map((n) => `${n.name}: ${n.reason}`).join("; ");
      box.replaceChildren(el("h3", { text: "Quick look" }),
        el("p", { class: "muted", text: `No variable to draw${why ? ` (${why})` : ""}.` }));
      return;
    }
    const pick = el("select", { id: "preview-var", "aria-label": "Variable" },
      vars.map((x) => el("option", { value: x.name, text: `${x.name}${x.long_name ? ` — ${x.long_name}` : ""}` })));
    const num = (id, label) => el("input", { id, type: "number", min: "0", value: "0", "aria-label": label, class: "preview-num" });
    const time = num("preview-time", "Time step");
    const level = num("preview-level", "Level");
    const img = el("img", { id: "preview-img", alt: "", loading: "lazy" });
    const err = el("p", { class: "error", role: "alert", hidden: true });
    const show = () => {
      const x = vars.find((y) => y.name === pick.value) || vars[0];
      const dim = (d) => (d ? x.shape[x.dims.indexOf(d)] : 0);
      time.disabled = !x.time_dim; time.max = String(Math.max(0, dim(x.time_dim) - 1));
      level.disabled = !x.level_dim; level.max = String(Math.max(0, dim(x.level_dim) - 1));
      const q = new URLSearchParams({ version: String(r.version), variable: x.name });
      if (x.time_dim) q.set("time", time.value || "0");
      if (x.level_dim) q.set("level", level.value || "0");
      img.alt = `Quick look of ${x.long_name || x.name}`;
      err.hidden = true;
      img.hidden = false;
      img.src = `${base}?${q}`;
    };
    img.onerror = () => {
      img.hidden = true;
      err.hidden = false;
      err.textContent = "No picture for this field (see /api/preview for the reason).";
    };
    // The time series beside the map: a click on the map, or the form.
    const coord = (id, label, ph) => el("input", { id, type: "text", inputmode: "decimal", placeholder: ph, "aria-label": label, class: "preview-num" });
    const lat = coord("series-lat", "Latitude", "lat");
    const lon = coord("series-lon", "Longitude", "lon");
    const bbox = el("input", { id: "series-bbox", type: "text", placeholder: "or W,S,E,N", "aria-label": "Box west,south,east,north", class: "series-bbox" });
    const simg = el("img", { id: "series-img", alt: "", hidden: true });
    const serr = el("p", { class: "error", role: "alert", hidden: true });
    const series = () => {
      const x = vars.find((y) => y.name === pick.value) || vars[0];
      const q = new URLSearchParams({ version: String(r.version), variable: x.name });
      if (x.level_dim) q.set("level", level.value || "0");
      if (bbox.value.trim()) q.set("bbox", bbox.value.trim());
      else if (lat.value.trim() && lon.value.trim()) q.set("point", `${lat.value.trim()},${lon.value.trim()}`);
      else return;
      serr.hidden = true;
      simg.alt = `Time series of ${x.long_name || x.name} at ${q.get("point") || q.get("bbox")}`;
      simg.hidden = false;
      simg.src = `${base}?${q}`;
    };
    // A refused series: the server's reason (its JSON error), asked for again.
    simg.onerror = () => {
      const url = simg.src;
      simg.hidden = true;
      serr.hidden = false;
      serr.textContent = "No series here.";
      api(url).catch((e) => { if (simg.src === url) serr.textContent = `No series: ${e.message}`; });
    };
    // A click on the map: its grid point, found as the server draws the map (a 720-pixel
    // map 10 pixels in, its height from the lat/lon extent, 62 pixels above the bottom).
    let grid = null;
    img.onclick = async (ev) => {
      const x = vars.find((y) => y.name === pick.value) || vars[0];
      if (!x.time_dim || !img.naturalWidth) return;
      const q = new URLSearchParams({ version: String(r.version), variable: x.name, format: "json" });
      if (x.level_dim) q.set("level", level.value || "0");
      try {
        if (!grid || grid.key !== q.toString()) grid = { key: q.toString(), f: await api(`${base}?${q}`) };
      } catch (e) { serr.hidden = false; serr.textContent = `No series: ${e.message}`; return; }
      const { lat: la, lon: lo } = grid.f;
      const span = (v) => Math.abs(Math.max(...v) - Math.min(...v));
      const [dy, dx] = [span(la), span(lo)];
      const ratio = dy > 0 && dx > 0 && Number.isFinite(dy / dx) ? dy / dx : la.length / Math.max(1, lo.length);
      const mapH = Math.min(720, Math.max(90, Math.round(720 * ratio)));
      const px = (ev.offsetX * img.naturalWidth) / img.clientWidth;
      const py = (ev.offsetY * img.naturalHeight) / img.clientHeight;
      const top = img.naturalHeight - 62 - mapH;
      const [row, col] = [py - top, px - 10];
      if (row < 0 || row >= mapH || col < 0 || col >= 720) return;
      let yi = Math.floor((row * la.length) / mapH);
      if (la.length > 1 && la[0] < la[la.length - 1]) yi = la.length - 1 - yi;
      let xi = Math.floor((col * lo.length) / 720);
      if (lo.length > 1 && lo[0] > lo[lo.length - 1]) xi = lo.length - 1 - xi;
      lat.value = String(la[yi]); lon.value = String(lo[xi]); bbox.value = "";
      series();
    };
    const go = el("button", { type: "button", id: "series-go", onclick: series }, "Time series");
    pick.onchange = show; time.onchange = show; level.onchange = () => { show(); series(); };
    box.replaceChildren(el("h3", { text: "Quick look" }),
      el("div", { class: "preview-pick" },
        el("label", {}, "Variable ", pick), el("label", {}, " time step ", time), el("label", {}, " level ", level)),
      el("div", { class: "preview-views" },
        el("div", { class: "preview-map" }, img, err),
        el("div", { class: "preview-series" },
          el("div", { class: "preview-pick" }, el("span", { class: "muted", text: "Click the map, or: " }), lat, lon, bbox, go),
          simg, serr)));
    show();
  }).catch((e) => {
    box.replaceChildren(el("h3", { text: "Quick look" }), el("p", { class: "muted", text: `No quick look: ${e.message}` }));
  });
  return box;
}

// ------------------------------------------------------------------ selection and download

function select(hit, on) {
  selectAll([hit], on);
}

/** Selects (or drops) every hit of `hits`, then redraws once. */
function selectAll(hits, on) {
  for (const hit of hits) {
    const k = keyOf(hit);
    if (on) state.selected.set(k, hit);
    else state.selected.delete(k);
  }
  renderSelection();
  // Keep the page's checkboxes in step (the file panel can change them too).
  for (const li of $("hits").children) li.querySelector(".pick").checked = state.selected.has(li.dataset.key);
  if (state.page) $("select-page").checked = state.page.hits.length > 0 && state.page.hits.every((h) => state.selected.has(keyOf(h)));
}

/** The selection survives a reload of the tab (not the tab's closing). */
function saveSelection() {
  try {
    sessionStorage.setItem("granary.selection", JSON.stringify([...state.selected.values()]));
  } catch { /* storage full or off: the selection is only in memory */ }
}

function loadSelection() {
  try {
    const v = JSON.parse(sessionStorage.getItem("granary.selection") || "[]");
    for (const h of Array.isArray(v) ? v : []) if (h && h.name && h.download) state.selected.set(keyOf(h), h);
  } catch { /* nothing kept */ }
}

function renderSelection() {
  saveSelection();
  const items = [...state.selected.values()];
  const box = $("selection");
  box.hidden = items.length === 0 && $("progress").hidden;
  if (box.hidden) {
    document.body.style.paddingBottom = "";
    document.body.style.setProperty("--selection-h", "0px");
  }
  $("sel-count").textContent = `${items.length} file${items.length === 1 ? "" : "s"}`;
  $("sel-size").textContent = items.length ? `(${bytes(items.reduce((s, h) => s + Number(h.size || 0), 0))})` : "";
  $("download-all").disabled = items.length === 0 || downloading;
  const names = items.map((h) => sq(`${h.name}/v=${h.version}`));
  const dir = "granary-data";
  $("cmd-get").textContent = items.length
    ? `mkdir -p ${dir} && granary get ${names.join(" \\\n    ")} \\\n    -o ${dir}/`
    : "";
  const seen = new Set();
  $("cmd-wget").textContent = items.map((h) => {
    let f = h.title || h.name.split("/").pop();
    if (seen.has(f)) f = `${f}.v${h.version}`;
    seen.add(f);
    return `wget -c -O ${sq(f)} ${sq(location.origin + h.download)}`;
  }).join("\n");
}

let downloading = false;

/** Saves a Blob as a file through a temporary <a download>. */
function save(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = el("a", { href: url, download: filename, class: "offscreen" });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

async function sha256hex(blob) {
  const d = await crypto.subtle.digest("SHA-256", await blob.arrayBuffer());
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Downloads every selected file over /data, one after the other, with a
 * progress bar per file and for the whole set; each file is kept in memory
 * until complete, checked (length, and SHA-256 where the catalog has it and
 * the browser offers WebCrypto), then saved. Bad bytes are never saved (and
 * the node never sends any: /data is verified against the signed manifest).
 * Files over IN_MEMORY_MAX go to the browser's own download manager instead.
 */
async function downloadAll() {
  const items = [...state.selected.values()];
  if (!items.length || downloading) return;
  downloading = true;
  $("download-all").disabled = true;
  const total = items.reduce((s, h) => s + Number(h.size || 0), 0);
  let doneBytes = 0;
  let ok = 0;
  const bar = $("progress-total");
  bar.max = Math.max(1, total);
  bar.value = 0;
  $("progress").hidden = false;
  $("progress-label").textContent = `Downloading ${items.length} file${items.length === 1 ? "" : "s"} (${bytes(total)})…`;
  const rows = items.map((h) => {
    const p = el("progress", { max: Math.max(1, Number(h.size || 1)), value: 0, "aria-label": `${h.title} progress` });
    const s = el("span", { class: "pstate", text: "waiting" });
    const li = el("li", { "data-name": h.name }, el("span", { class: "pname", text: h.title }), p, s);
    return { h, p, s, li };
  });
  $("progress-files").replaceChildren(...rows.map((r) => r.li));
  const started = performance.now();
  for (const r of rows) {
    const { h, p, s } = r;
    try {
      if (Number(h.size) > IN_MEMORY_MAX) {
        const a = el("a", { href: h.download, download: h.title || "", class: "offscreen" });
        document.body.append(a);
        a.click();
        a.remove();
        p.value = p.max;
        doneBytes += Number(h.size);
        bar.value = doneBytes;
        s.textContent = "handed to the browser's downloads";
        r.li.classList.add("ok");
        ok++;
        continue;
      }
      s.textContent = "starting";
      const res = await fetch(h.download);
      if (!res.ok) {
        let why = `${res.status} ${res.statusText}`;
        try { why = (await res.json()).error || why; } catch { /* not JSON */ }
        throw new Error(why);
      }
      const len = Number(res.headers.get("Content-Length")) || Number(h.size) || 0;
      p.max = Math.max(1, len);
      const reader = res.body.getReader();
      const chunks = [];
      let got = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks.push(value);
        got += value.length;
        p.value = got;
        bar.value = doneBytes + got;
        const secs = (performance.now() - started) / 1000;
        s.textContent = `${bytes(got)} of ${bytes(len)}`;
        $("progress-label").textContent = `Downloading… ${bytes(doneBytes + got)} of ${bytes(total)}${secs > 0.5 ? ` · ${rate((doneBytes + got) / secs)}` : ""}`;
      }
      if (len && got !== len) throw new Error(`the transfer stopped at ${got} of ${len} bytes`);
      const blob = new Blob(chunks, { type: res.headers.get("Content-Type") || "application/octet-stream" });
      if (h.sha256 && globalThis.crypto?.subtle) {
        s.textContent = "checking";
        const d = await sha256hex(blob);
        if (d !== h.sha256) throw new Error(`SHA-256 ${d} is not the catalog's ${h.sha256}`);
      }
      save(blob, h.title || h.name.split("/").pop());
      doneBytes += got;
      bar.value = doneBytes;
      s.textContent = h.sha256 && globalThis.crypto?.subtle ? "saved ✓ SHA-256" : "saved ✓";
      r.li.classList.add("ok");
      ok++;
    } catch (e) {
      s.textContent = `failed: ${e.message}`;
      r.li.classList.add("failed");
    }
  }
  const secs = (performance.now() - started) / 1000;
  $("progress-label").textContent = ok === rows.length
    ? `Done: ${ok} file${ok === 1 ? "" : "s"}, ${bytes(doneBytes)} in ${secs.toFixed(1)} s`
    : `${rows.length - ok} of ${rows.length} failed; ${ok} saved`;
  $("progress").dataset.done = ok === rows.length ? "ok" : "failed";
  downloading = false;
  renderSelection();
}

// ------------------------------------------------------------------ node status

const status = { timer: 0, prev: null };

async function refreshStatus() {
  try {
    const s = await api("/api/status");
    renderStatus(s);
  } catch (e) {
    $("status-summary").textContent = `Status unavailable: ${e.message}`;
  }
  try {
    renderFederation(await api("/api/federation"));
  } catch (e) {
    $("federation").caption.textContent = `Federation nodes unavailable: ${e.message}`;
  }
  if (!$("status").hidden) status.timer = setTimeout(refreshStatus, STATUS_EVERY_MS);
}

function renderStatus(s) {
  const now = performance.now();
  const prev = status.prev;
  status.prev = { at: now, faces: new Map((s.faces || []).map((f) => [f.id, f])) };
  const io = (x) => (x ? `${x.in ?? 0} / ${x.out ?? 0}` : "");
  const bits = [
    s.version ? `Granary ${s.version}` : "",
    s.uptime_s !== undefined ? `up ${duration(s.uptime_s)}` : "",
    `${(s.faces || []).length} faces`,
    s.interests ? `Interests in/out ${io(s.interests)}` : "",
    s.data ? `Data in/out ${io(s.data)}` : "",
    s.nacks ? `Nacks in/out ${io(s.nacks)}` : "",
    s.satisfied !== undefined ? `satisfied ${s.satisfied}, unsatisfied ${s.unsatisfied}` : "",
    s.cs_entries !== undefined ? `CS ${s.cs_entries}` : "",
    s.pit_entries !== undefined ? `PIT ${s.pit_entries}` : "",
    s.fib_entries !== undefined ? `FIB ${s.fib_entries}` : "",
    s.catalog_records !== undefined && s.catalog_records !== null ? `${s.catalog_records} catalog records` : "",
  ].filter(Boolean);
  $("status-summary").textContent = bits.join(" · ");
  $("faces").tBodies[0].replaceChildren(...(s.faces || []).map((f) => {
    const before = prev?.faces.get(f.id);
    const dt = prev ? (now - prev.at) / 1000 : 0;
    const tin = before && dt > 0 ? rate(Math.max(0, (f.in?.bytes ?? 0) - (before.in?.bytes ?? 0)) / dt) : "–";
    const tout = before && dt > 0 ? rate(Math.max(0, (f.out?.bytes ?? 0) - (before.out?.bytes ?? 0)) / dt) : "–";
    return el("tr", {},
      el("th", { scope: "row", text: f.id }),
      el("td", {}, el("span", { class: "uri", text: f.remote || "" }), f.scope === "local" ? el("span", { class: "muted", text: " (local)" }) : null),
      el("td", { text: `${f.in?.interests ?? 0} / ${f.out?.interests ?? 0}` }),
      el("td", { text: `${f.in?.data ?? 0} / ${f.out?.data ?? 0}` }),
      el("td", { text: `${bytes(f.in?.bytes ?? 0)} / ${bytes(f.out?.bytes ?? 0)}` }),
      el("td", { text: `${tin} / ${tout}` }));
  }));
}

// The federation's nodes (the location catalog's heartbeat rows); this node alone
// when its catalog is its own.
function renderFederation(f) {
  const nodes = Array.isArray(f.nodes) ? f.nodes : [];
  const up = nodes.filter((n) => n.up).length;
  $("federation").caption.textContent = `Federation: ${nodes.length} node${nodes.length === 1 ? "" : "s"}, ${up} up` +
    (f.shared ? " (shared location catalog)" : " (this node's own catalog)");
  $("federation").tBodies[0].replaceChildren(...nodes.map((n) => el("tr", { class: n.up ? "up" : "down" },
    el("th", { scope: "row" }, el("code", { class: "fed-node", text: n.prefix }), n.self ? el("span", { class: "muted", text: " (this node)" }) : null),
    el("td", { class: "fed-state", text: n.up ? "up" : "down" }),
    el("td", { text: n.age_ms !== undefined ? `${duration(Math.max(0, n.age_ms / 1000))} ago` : "–" }),
    el("td", { text: n.locations !== undefined ? Number(n.locations).toLocaleString("en") : "–" }))));
}

function toggleStatus() {
  const box = $("status");
  box.hidden = !box.hidden;
  $("status-toggle").setAttribute("aria-expanded", box.hidden ? "false" : "true");
  clearTimeout(status.timer);
  if (!box.hidden) {
    refreshStatus();
    box.scrollIntoView({ block: "start" });
  }
}

// ------------------------------------------------------------------ start

function wire() {
  wireSearchBox();
  $("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE); search({ push: true }); $("results").focus(); });
  $("next").addEventListener("click", () => { state.offset += PAGE; search({ push: true }); $("results").focus(); });
  $("all-versions").addEventListener("change", (ev) => { state.all = ev.target.checked; state.offset = 0; search({ push: true }); });
  $("by-dataset").addEventListener("change", (ev) => { state.byDataset = ev.target.checked; state.offset = 0; search({ push: true }); });
  // Read the box once: redrawing after a selection sets it from what is
  // selected, so reading it inside the loop selected only the first hit.
  $("select-page").addEventListener("change", (ev) => selectAll(state.page?.hits || [], ev.target.checked));
  $("download-all").addEventListener("click", downloadAll);
  $("show-results").addEventListener("click", () => {
    $("facets-details").open = false;
    $("results").scrollIntoView({ block: "start" });
    $("results").focus({ preventScroll: true });
  });
  $("time-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const from = $("time-from").value.trim(), to = $("time-to").value.trim();
    state.time = from || to ? `${from}/${to}` : "";
    state.offset = 0;
    search({ push: true });
  });
  $("sel-clear").addEventListener("click", () => {
    state.selected.clear();
    if (!downloading) $("progress").hidden = true;
    renderSelection();
    if (state.page) renderHits();
  });
  $("sel-commands-toggle").addEventListener("click", (ev) => {
    const box = $("sel-commands");
    box.hidden = !box.hidden;
    ev.currentTarget.setAttribute("aria-expanded", box.hidden ? "false" : "true");
  });
  $("status-toggle").addEventListener("click", toggleStatus);
  $("file-close").addEventListener("click", closeFile);
  $("file").addEventListener("close", () => { if (state.file) { state.file = null; writeUrl(false); } });
  // A click on the backdrop (outside the panel) closes it.
  $("file").addEventListener("click", (ev) => { if (ev.target === $("file")) closeFile(); });
  document.addEventListener("click", (ev) => {
    const b = ev.target.closest?.("button.copy[data-copy]");
    if (b) copy($(b.dataset.copy).textContent);
  });
  window.addEventListener("popstate", () => {
    readUrl();
    search();
    if (state.file) openFile(state.file.name, state.file.version);
    else if ($("file").open) $("file").close();
  });
  // The selection bar is fixed at the bottom: the page gets room below its
  // end as tall as the bar, so nothing stays hidden under it.
  new ResizeObserver(() => {
    const box = $("selection");
    document.body.style.paddingBottom = box.hidden ? "" : `${box.offsetHeight + 16}px`;
    document.body.style.setProperty("--selection-h", box.hidden ? "0px" : `${box.offsetHeight}px`);
  }).observe($("selection"));
  // On a narrow screen the filter list starts folded, so results come first.
  if (matchMedia("(max-width: 760px)").matches) $("facets-details").open = false;
}

wire();
readUrl();
loadSelection();
renderSelection();
search();
if (state.file) openFile(state.file.name, state.file.version);
