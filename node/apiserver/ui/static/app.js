// The dashboard reads the node's local API every two seconds and redraws.
// Its first drawing needs no request: the server puts the answers of the
// first reads in the page (the #snapshot data block). Every value from the
// network is set with textContent, never as HTML.
"use strict";

const POLL_MS = 2000;
const PAGE_SIZE = 50;
const STEPS = ["submit", "rent", "run", "output", "release"];
// Job states in their order (api.JobStates), for the state filter.
const STATES = ["queued", "renting", "running", "output", "released", "rejected", "withdrawn"];
const OUTCOME_COLORS = {
  completed: "#2f9e5b", failed: "#d0473c", limit: "#d99a1e", withdrawn: "#8a63c9",
  "provider-lost": "#6b7480", "output-lost": "#a35d2f", held: "#3a78c9",
};
const SVG_NS = "http://www.w3.org/2000/svg";

// chosenJob is the job, or the attempt of one, whose log is shown; chosen
// by the user (a click, a link, the address), or else the newest running.
let chosenJob = null;
let chosenByUser = false;
// data is the last answers drawn: {id, nodes, jobs, receipts, usage, leases}.
let data = null;
// view is the jobs table's filter and page, kept in the address's hash
// (#state=queued&name=train&page=2&job=ID) so that a reload or a link
// keeps them; a refresh never resets them.
const view = { state: "", name: "", page: 1 };
// shownPage is the page drawn last: view.page, kept within the pages.
let shownPage = 1;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c ?? "")));
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}

function ago(t) {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(t)) / 1000));
  if (s < 90) return s + " s ago";
  if (s < 5400) return Math.round(s / 60) + " min ago";
  return Math.round(s / 3600) + " h ago";
}

// short is the start of a job, lease or content ID: a prefix the e31
// command takes in its place.
function short(id) { return id ? id.slice(0, 12) : ""; }
// peerShort is the end of a peer ID, as the e31 command prints it: the
// start of every libp2p ID is the same.
function peerShort(id) { return !id ? "" : id.length <= 12 ? id : "…" + id.slice(-8); }
// peer shows a peer ID short, whole on hover.
function peer(id) { return id ? el("span", { class: "peer", title: id }, peerShort(id)) : ""; }
function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }
function bytes(n) { return n ? (n / 2 ** 30).toFixed(0) + " GiB" : ""; }
function clock(t) { return new Date(t).toLocaleTimeString([], { hour12: false }); }

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

// drawNetwork lists the providers in view, then those lost lately (they
// missed their heartbeats and left the view), each marked lost.
function drawNetwork(nodes) {
  const rows = nodes.map((n) => {
    const gpus = n.gpus || [];
    const free = gpus.filter((g) => g.free).length;
    const models = [...new Set(gpus.map((g) => g.model + " " + bytes(g.memory_bytes)))].join(", ");
    let held;
    if (n.lost_at) {
      held = el("span", { class: "lost-note", title: "left the view at " + n.lost_at + ", having missed its heartbeats" }, "lost " + ago(n.lost_at));
    } else {
      const boxes = el("span", {});
      for (const g of gpus) boxes.append(el("span", { class: "gpu " + (g.free ? "free" : "held"), title: g.uuid + (g.free ? " free" : " held") }));
      held = el("span", {}, boxes, " " + free + " free / " + (gpus.length - free) + " held");
    }
    return el("tr", { class: "provider" + (n.lost_at ? " lost" : ""), "data-peer": n.peer_id },
      el("td", {}, peer(n.peer_id), n.self ? el("span", { class: "muted" }, " (this node)") : "", n.lost_at ? el("span", { class: "lost-note" }, " (lost)") : ""),
      el("td", {}, gpus.length + " × " + models),
      el("td", {}, held),
      el("td", {}, n.cpus), el("td", {}, bytes(n.memory_bytes)),
      el("td", { title: n.last_seen }, ago(n.last_seen)));
  });
  if (rows.length === 0) rows.push(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "no provider heard from yet")));
  fill(document.querySelector("#network tbody"), rows);
}

function timeline(job) {
  const at = Object.fromEntries((job.steps || []).map((s) => [s.step, s.at]));
  const ol = el("ol", { class: "timeline" });
  for (const step of STEPS) {
    const li = el("li", { class: "step " + (at[step] ? "done" : "todo"), "data-step": step }, step);
    if (at[step]) li.append(el("time", { datetime: at[step] }, clock(at[step])));
    ol.append(li);
  }
  return ol;
}

// newestFirst orders jobs by submission, newest first; the list comes
// oldest first, so ties keep its order reversed.
function newestFirst(jobs) {
  return jobs.map((j, i) => [j, i, Date.parse(j.submitted) || 0])
    .sort((a, b) => b[2] - a[2] || b[1] - a[1]).map((x) => x[0]);
}

// matches is the jobs table's filter: the state chosen, and the text in
// the job's name (any case) or at the start of its ID or an attempt's.
function matches(j) {
  if (view.state && j.state !== view.state) return false;
  const q = view.name.trim().toLowerCase();
  if (!q) return true;
  if ((j.name || "").toLowerCase().includes(q)) return true;
  return [j.id, ...(j.attempts || []).map((a) => a.id)].some((id) => (id || "").toLowerCase().startsWith(q));
}

// hashFor is the address hash of the view with over changed.
function hashFor(over) {
  const v = { ...view, job: chosenByUser ? chosenJob : "", ...over };
  const q = new URLSearchParams();
  if (v.state) q.set("state", v.state);
  if (v.name) q.set("name", v.name);
  if (v.page > 1) q.set("page", v.page);
  if (v.job) q.set("job", v.job);
  const h = q.toString();
  return h ? "#" + h : "";
}

function writeHash() {
  history.replaceState(null, "", location.pathname + location.search + (hashFor({}) || ""));
}

// readHash sets the view from the address; only here is the name box
// written, never while the user types in it.
function readHash() {
  const q = new URLSearchParams(location.hash.slice(1));
  view.state = q.get("state") || "";
  view.name = q.get("name") || "";
  view.page = Math.max(1, parseInt(q.get("page"), 10) || 1);
  const job = q.get("job");
  if (job && job !== chosenJob) { chosenJob = job; chosenByUser = true; }
  document.getElementById("jobs-name").value = view.name;
}

function chooseJob(id) {
  chosenJob = id;
  chosenByUser = true;
  writeHash();
  refreshLog();
  drawJobs();
}

// drawStateFilter offers every state present, with its count, and the one
// chosen even where no job is in it. Options are changed in place when the
// states are the same, so that an open list stays open.
function drawStateFilter(all) {
  const counts = new Map();
  for (const j of all) counts.set(j.state, (counts.get(j.state) || 0) + 1);
  const order = (s) => { const i = STATES.indexOf(s); return i < 0 ? STATES.length : i; };
  const states = [...counts.keys()].sort((a, b) => order(a) - order(b) || (a < b ? -1 : 1));
  if (view.state && !counts.has(view.state)) states.push(view.state);
  const want = [["", "all (" + all.length + ")"], ...states.map((s) => [s, s + " (" + (counts.get(s) || 0) + ")"])];
  const sel = document.getElementById("jobs-state");
  const same = sel.options.length === want.length && want.every(([v], i) => sel.options[i].value === v);
  if (same) {
    want.forEach(([, label], i) => { if (sel.options[i].textContent !== label) sel.options[i].textContent = label; });
  } else {
    sel.replaceChildren(...want.map(([v, label]) => el("option", { value: v }, label)));
  }
  sel.value = view.state;
}

function jobRow(j) {
  const attempts = j.attempts || [];
  const chosen = j.id === chosenJob || attempts.some((a) => a.id === chosenJob);
  const tr = el("tr", { class: "job" + (chosen ? " chosen" : ""), "data-job": j.id },
    el("td", { title: j.id }, el("code", {}, short(j.id))),
    el("td", { class: "name" }, j.name),
    el("td", stateAttrs(j), j.state, ...tasksCell(j)),
    el("td", {}, timeline(j)),
    el("td", { class: "provider" }, peer(j.provider)),
    el("td", {}, j.outcome ? j.outcome + (j.exit_code != null ? " (exit " + j.exit_code + ")" : "") : ""),
    el("td", { class: "attempts-count" }, attempts.length > 1 ? attempts.length : ""),
    el("td", { class: "reason" }, j.reason));
  tr.addEventListener("click", () => chooseJob(j.id));
  return tr;
}

// stateAttrs colours a job's state cell by how it ended where it has: an
// array whose every task failed is released, and red.
function stateAttrs(j) {
  const cls = "state-" + j.state + (j.outcome ? " outcome-" + j.outcome : "");
  return j.outcome ? { class: cls, title: j.state + ", " + j.outcome } : { class: cls };
}

// TASK_PARTS are the parts of an array's bar, in their order, each a
// count of api.TaskCounts: ended (completed, failed, withdrawn), then not.
const TASK_PARTS = ["completed", "failed", "withdrawn", "running", "queued"];
// MAX_RANGES bounds the failed indices shown on a row.
const MAX_RANGES = 8;

// indexRanges writes sorted indices as ranges, "3,7,10-14", at most max
// of them, then "… (+N more)" counting the indices left out.
function indexRanges(idx, max) {
  const out = [];
  let i = 0;
  while (i < idx.length && out.length < max) {
    let k = i;
    while (k + 1 < idx.length && idx[k + 1] === idx[k] + 1) k++;
    out.push(k > i ? idx[i] + "-" + idx[k] : String(idx[i]));
    i = k + 1;
  }
  const left = idx.length - i;
  return out.join(",") + (left > 0 ? " … (+" + left + " more)" : "");
}

// tasksCell is an array's tasks, for its state cell: a bar split into
// completed, failed, withdrawn, running and queued tasks, a legend with
// their counts, and the failed indices; nothing for a job.
function tasksCell(j) {
  const t = j.tasks;
  if (!t) return [];
  const ended = t.completed + t.failed + t.withdrawn;
  const parts = TASK_PARTS.filter((p) => t[p] > 0);
  const words = parts.map((p) => t[p] + " " + p).join(", ");
  const bar = el("span", { class: "taskbar", role: "img", "aria-label": words, title: words });
  const legend = el("span", { class: "tasks-legend" });
  for (const p of parts) {
    const seg = el("span", { class: "seg seg-" + p, "data-n": t[p] });
    // Through the CSSOM: the page's CSP refuses inline style attributes.
    seg.style.width = (100 * t[p] / Math.max(1, t.total)).toFixed(2) + "%";
    bar.append(seg);
    legend.append(el("span", { class: "part part-" + p }, el("i", { class: "swatch seg-" + p }), t[p] + " " + p));
  }
  const cell = [el("br", {}), bar,
    el("span", { class: "tasks-ended" }, " " + ended + "/" + t.total + " tasks ended"), legend];
  const failed = t.failed_indices || [];
  if (failed.length) {
    cell.push(el("span", { class: "failed-indices", title: "failed tasks: " + indexRanges(failed, Infinity) },
      "failed: " + indexRanges(failed, MAX_RANGES)));
  }
  return cell;
}

// attemptsRow lists a resumed job's attempts under its row, each linked
// to its own log.
function attemptsRow(j) {
  const ol = el("ol", { class: "attempts" });
  for (const a of j.attempts) {
    const li = el("li", { class: "attempt" + (a.id === chosenJob ? " chosen" : ""), "data-attempt": a.id, "data-n": a.n },
      "attempt " + a.n + " ",
      el("a", { href: hashFor({ job: a.id }), title: a.id + ": show its log" }, el("code", {}, short(a.id))));
    if (a.provider) li.append(" on ", peer(a.provider));
    if (a.from) li.append(", " + (a.to ? clock(a.from) + "–" + clock(a.to) : "since " + clock(a.from)));
    li.append(", " + (a.outcome ? a.outcome + (a.attribution ? " (" + a.attribution + ")" : "") : a.state));
    if (a.started_from) {
      li.append(", ", el("span", { class: "resumed" }, "resumed from checkpoint ", el("code", { title: a.started_from }, short(a.started_from))));
    } else if (a.n > 1) {
      li.append(", run again from the start");
    }
    if (a.reason) li.append(el("span", { class: "reason muted" }, ": " + a.reason));
    ol.append(li);
  }
  return el("tr", { class: "attempts", "data-attempts-of": j.id }, el("td", {}), el("td", { colspan: 7 }, ol));
}

// drawJobs draws one page of the jobs that pass the filter, newest first:
// one row a job, and under a resumed one the list of its attempts.
function drawJobs() {
  const all = newestFirst((data && data.jobs) || []);
  drawStateFilter(all);
  const shown = all.filter(matches);
  const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
  shownPage = Math.min(view.page, pages);
  const rows = [];
  for (const j of shown.slice((shownPage - 1) * PAGE_SIZE, shownPage * PAGE_SIZE)) {
    rows.push(jobRow(j));
    if ((j.attempts || []).length > 1) rows.push(attemptsRow(j));
  }
  if (rows.length === 0) {
    rows.push(el("tr", {}, el("td", { colspan: 8, class: "muted" }, all.length ? "no job matches the filter" : "no job submitted from this node")));
  }
  fill(document.querySelector("#jobs tbody"), rows);
  document.getElementById("jobs-page").textContent = "page " + shownPage + " of " + pages + ", " +
    (shown.length === all.length ? plural(all.length, "job") : shown.length + " of " + plural(all.length, "job"));
  document.getElementById("jobs-prev").disabled = shownPage <= 1;
  document.getElementById("jobs-next").disabled = shownPage >= pages;
}

// leases folds receipts into one interval per lease: its latest receipt.
function leases(receipts) {
  const by = new Map();
  for (const r of receipts) {
    const cur = by.get(r.lease);
    if (!cur || r.seq > cur.seq || (r.final && !cur.final)) by.set(r.lease, r);
  }
  return [...by.values()].map((r) => ({
    from: Date.parse(r.held_from), until: Date.parse(r.held_until), gpus: r.gpus || 0,
    outcome: r.final ? r.outcome || "completed" : "held",
  }));
}

function drawReceipts(rec, usage) {
  const rs = (rec.receipts || []).slice(-40).reverse();
  fill(document.querySelector("#receipts tbody"), rs.map((r) => el("tr", {},
    el("td", { title: r.lease }, el("code", {}, short(r.lease))),
    el("td", { title: r.job }, el("code", {}, short(r.job))),
    el("td", {}, r.seq),
    el("td", {}, ((Date.parse(r.held_until) - Date.parse(r.held_from)) / 1000).toFixed(0) + " s"),
    el("td", {}, r.gpus),
    el("td", {}, r.outcome || ""),
    el("td", {}, (r.final ? "final" : "interim") + (r.one_sided ? ", one-sided" : "")))));
  const totals = (usage && usage.by_peer) || [];
  fill(document.querySelector("#usage tbody"), totals.map((u) => el("tr", {},
    el("td", {}, peer(u.peer)),
    el("td", {}, u.role), el("td", {}, u.gpu_hours.toFixed(3)),
    el("td", {}, u.owed_gpu_hours.toFixed(3)), el("td", {}, u.one_sided_gpu_hours.toFixed(3)))));
}

// plot draws series on shared axes into an SVG: bars (stacked) or lines.
function plot(id, { x0, x1, series, kind, yLabel }) {
  const W = 480, H = 180, L = 40, B = 22, T = 10, R = 10;
  const s = svg("svg", { class: "plot", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": yLabel, "data-plot": id });
  let ymax = 0;
  if (kind === "stack") {
    const n = series[0] ? series[0].values.length : 0;
    for (let i = 0; i < n; i++) ymax = Math.max(ymax, series.reduce((a, se) => a + se.values[i], 0));
  } else {
    for (const se of series) for (const p of se.points) ymax = Math.max(ymax, p[1]);
  }
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  const xs = (x) => L + ((x - x0) / Math.max(1, x1 - x0)) * (W - L - R);
  const ys = (y) => H - B - (y / ymax) * (H - B - T);
  s.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  s.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  s.append(svg("text", { x: 2, y: T + 8 }, ymax.toPrecision(2)));
  s.append(svg("text", { x: 2, y: H - B }, "0"));
  s.append(svg("text", { x: L, y: H - 6 }, clock(x0)));
  s.append(svg("text", { x: W - R - 50, y: H - 6 }, clock(x1)));
  if (kind === "stack") {
    const n = series[0] ? series[0].values.length : 0;
    const bw = (W - L - R) / Math.max(1, n);
    for (let i = 0; i < n; i++) {
      let base = 0;
      for (const se of series) {
        const v = se.values[i];
        if (v <= 0) continue;
        s.append(svg("rect", { x: L + i * bw + 1, y: ys(base + v), width: Math.max(1, bw - 2), height: ys(base) - ys(base + v), fill: se.color, "data-series": se.name }));
        base += v;
      }
    }
  } else {
    for (const se of series) {
      if (se.points.length === 0) continue;
      if (kind === "step") {
        let d = "";
        se.points.forEach(([x, y], i) => { d += (i ? ` H${xs(x)} V${ys(y)}` : `M${xs(x)} ${ys(y)}`); });
        d += ` H${xs(x1)}`;
        s.append(svg("path", { d, fill: "none", stroke: se.color, "stroke-width": 2, "data-series": se.name }));
      } else {
        for (const [x, y, hollow] of se.points) {
          s.append(svg("circle", { cx: xs(x), cy: ys(y), r: 3.5, fill: hollow ? "none" : se.color, stroke: se.color, "data-series": se.name }));
        }
      }
    }
  }
  const holder = document.getElementById(id);
  const legend = el("div", { class: "legend" });
  for (const se of series) {
    // Through the CSSOM: the page's CSP refuses inline style attributes.
    const swatch = el("i", {});
    swatch.style.background = se.color;
    legend.append(el("span", {}, swatch, se.name));
  }
  holder.replaceChildren(s, legend);
}

function drawPlots(jobs, receipts) {
  const now = Date.now();
  const ls = leases(receipts);
  const stepAt = (j, name) => { const s = (j.steps || []).find((x) => x.step === name); return s ? Date.parse(s.at) : null; };
  const starts = [...ls.map((l) => l.from), ...jobs.map((j) => Date.parse(j.submitted))].filter((x) => x > 0);
  const x0 = starts.length ? Math.min(...starts) : now - 3600e3;
  const x1 = Math.max(now, x0 + 60e3);

  // GPU-hours held in each of 24 bins, split by how the lease ended.
  const bins = 24, width = (x1 - x0) / bins;
  const outcomes = [...new Set(ls.map((l) => l.outcome))].sort();
  plot("plot-gpu-hours", {
    x0, x1, kind: "stack", yLabel: "GPU-hours held by outcome",
    series: (outcomes.length ? outcomes : ["held"]).map((o) => ({
      name: o, color: OUTCOME_COLORS[o] || "#999",
      values: Array.from({ length: bins }, (_, i) => {
        const a = x0 + i * width, b = a + width;
        return ls.filter((l) => l.outcome === o)
          .reduce((sum, l) => sum + Math.max(0, Math.min(b, l.until) - Math.max(a, l.from)) * l.gpus / 3600e3, 0);
      }),
    })),
  });

  // Queue length: a job is queued from submit until rent, or until it ended
  // without a rent.
  const events = [];
  for (const j of jobs) {
    const from = Date.parse(j.submitted);
    const rent = stepAt(j, "rent");
    const end = rent ?? (["released", "withdrawn", "rejected"].includes(j.state) ? (stepAt(j, "release") ?? from) : null);
    events.push([from, +1]);
    if (end !== null) events.push([end, -1]);
  }
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let q = 0;
  const qpts = [[x0, 0]];
  for (const [t, d] of events) { q += d; qpts.push([t, q]); }
  plot("plot-queue", { x0, x1, kind: "step", yLabel: "queued jobs", series: [{ name: "queued jobs", color: "#d99a1e", points: qpts }] });

  // Wait before rent: filled for rented jobs, hollow for jobs still waiting.
  const wpts = [];
  for (const j of jobs) {
    const from = Date.parse(j.submitted), rent = stepAt(j, "rent");
    if (rent !== null) wpts.push([from, (rent - from) / 1000, false]);
    else if (j.state === "queued") wpts.push([from, (now - from) / 1000, true]);
  }
  plot("plot-wait", { x0, x1, kind: "dots", yLabel: "seconds waited", series: [{ name: "wait (hollow: still queued)", color: "#3a78c9", points: wpts }] });

  drawTasksCompleted(jobs, now);
}

// ARRAY_COLORS tell apart the arrays on the tasks-completed plot.
const ARRAY_COLORS = ["#2f9e5b", "#3a78c9", "#d99a1e", "#8a63c9", "#d0473c", "#6b7480"];

// drawTasksCompleted plots, for the newest arrays, how many of their tasks had
// completed over time, from submit: each array's tasks.done curve (at most
// 64 points, from the node). The figure is shown only when there is an
// array.
function drawTasksCompleted(jobs, now) {
  const arrays = newestFirst(jobs.filter((j) => j.tasks)).slice(0, ARRAY_COLORS.length);
  const fig = document.getElementById("tasks-figure");
  fig.hidden = arrays.length === 0;
  if (fig.hidden) return;
  const x0 = Math.min(...arrays.map((j) => Date.parse(j.submitted)));
  const x1 = Math.max(now, x0 + 60e3);
  plot("plot-tasks", {
    x0, x1, kind: "step", yLabel: "tasks completed",
    series: arrays.map((j, i) => ({
      name: (j.name || short(j.id)) + " (" + j.tasks.completed + "/" + j.tasks.total + ")",
      color: ARRAY_COLORS[i],
      points: [[Date.parse(j.submitted), 0], ...(j.tasks.done || []).map((p) => [Date.parse(p.at), p.done])],
    })),
  });
}

async function refreshLog() {
  const status = document.getElementById("log-status");
  const pre = document.getElementById("log");
  if (!chosenJob) return;
  document.getElementById("log-job").textContent = chosenJob;
  refreshBill(chosenJob);
  const stream = document.querySelector("input[name=stream]:checked").value;
  try {
    const r = await fetch(`/v1/jobs/${encodeURIComponent(chosenJob)}/logs?tail=200&stream=${stream}`, { cache: "no-store" });
    const text = await r.text();
    if (!r.ok) {
      let msg = text;
      try { msg = JSON.parse(text).error; } catch (_) { /* plain text */ }
      status.textContent = msg;
      return;
    }
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent = text;
    if (atEnd) pre.scrollTop = pre.scrollHeight;
    status.textContent = "last 200 lines, " + clock(Date.now());
  } catch (e) {
    status.textContent = "log: " + e.message;
  }
}

// refreshBill shows what the chosen job held and owes: the daemon's one
// sum over every attempt and task of the job (/v1/usage?job=), the
// figures e31 status, usage --job and verify of its export print.
async function refreshBill(id) {
  const p = document.getElementById("job-bill");
  try {
    const rep = await getJSON("/v1/usage?job=" + encodeURIComponent(id));
    if (id !== chosenJob) return;
    const t = rep.total || {};
    const h = (x) => (x || 0).toFixed(3);
    p.textContent = plural(t.leases || 0, "lease") + ": held " + h(t.gpu_hours) + " GPU-h, owed " +
      h(t.owed_gpu_hours) + ", not owed " + h(t.not_owed_gpu_hours);
  } catch (e) {
    if (id === chosenJob) p.textContent = "held time: " + e.message;
  }
}

// firstData is the snapshot the server put in the page, or null when it
// lacks one of the reads the page needs (the server leaves out one that
// failed).
function firstData() {
  let snap = null;
  try {
    snap = JSON.parse(document.getElementById("snapshot").textContent || "null");
  } catch (_) { /* no snapshot: fetch */ }
  if (!snap || !["id", "nodes", "jobs", "receipts"].every((k) => k in snap)) return null;
  return { id: snap.id, nodes: snap.nodes, jobs: snap.jobs, receipts: snap.receipts, usage: snap.usage ?? null, leases: snap.leases ?? null };
}

async function fetchAll() {
  const [id, nodes, jobs, receipts, usage, leases] = await Promise.all([
    getJSON("/v1/id"), getJSON("/v1/nodes?lost=1"), getJSON("/v1/jobs"),
    getJSON("/v1/receipts"), getJSON("/v1/usage").catch(() => null), getJSON("/v1/leases").catch(() => null),
  ]);
  return { id, nodes, jobs, receipts, usage, leases };
}

// reachBadge says in the header how peers reach this node (GET /v1/id's
// reachability): public, relayed through R, or unreachable, its why and
// fix in full beside it; nothing where the node does not learn it.
function reachBadge(r) {
  if (!r) return [];
  const text = r.state === "relayed" ? "relayed through " + (r.relays || []).map(peerShort).join(", ") : r.state;
  const badge = el("span", { class: "reach reach-" + r.state, title: r.line }, text);
  if (r.state !== "unreachable") return [" · ", badge];
  return [" · ", badge, el("div", { class: "reach-why" }, r.line)];
}

// draw redraws everything from d; from is where the first drawing's data
// came from (the page's snapshot, or fetched), which the page records.
function draw(d, from) {
  data = d;
  const id = d.id || {};
  document.getElementById("self").replaceChildren("node ", peer(id.peer_id), " on ", el("b", {}, id.network), ...reachBadge(id.reachability));
  drawNetwork(d.nodes || []);
  drawLiveLeases(d.leases);
  const jobs = d.jobs || [];
  if (!chosenJob && jobs.length) {
    const running = jobs.filter((j) => j.state === "running");
    chosenJob = (running[running.length - 1] || jobs[jobs.length - 1]).id;
  }
  drawJobs();
  drawReceipts(d.receipts || {}, d.usage);
  drawPlots(jobs, (d.receipts && d.receipts.receipts) || []);
  document.querySelector("main").hidden = false;
  if (!document.body.dataset.first) document.body.dataset.first = from;
  document.body.dataset.loaded = "1";
}

async function refresh() {
  try {
    draw(await fetchAll(), "fetched");
    await refreshLog();
    document.getElementById("updated").textContent = "updated " + clock(Date.now());
  } catch (e) {
    document.getElementById("updated").textContent = "cannot reach the node: " + e.message;
  } finally {
    setTimeout(refresh, POLL_MS);
  }
}

for (const r of document.querySelectorAll("input[name=stream]")) r.addEventListener("change", refreshLog);
document.getElementById("jobs-state").addEventListener("change", (e) => {
  view.state = e.target.value;
  view.page = 1;
  writeHash();
  drawJobs();
});
document.getElementById("jobs-name").addEventListener("input", (e) => {
  view.name = e.target.value;
  view.page = 1;
  writeHash();
  drawJobs();
});
for (const [button, step] of [["jobs-prev", -1], ["jobs-next", +1]]) {
  document.getElementById(button).addEventListener("click", () => {
    view.page = Math.max(1, shownPage + step);
    writeHash();
    drawJobs();
  });
}
window.addEventListener("hashchange", () => {
  const was = chosenJob;
  readHash();
  if (data) drawJobs();
  if (chosenJob !== was) refreshLog();
});

// start draws the page from its snapshot, then refreshes every POLL_MS;
// without a snapshot it reads the API first, and draws nothing before.
function start() {
  readHash();
  const first = firstData();
  if (!first) return refresh();
  try {
    draw(first, "snapshot");
  } catch (_) {
    return refresh(); // a snapshot the page cannot draw: read the API
  }
  document.getElementById("updated").textContent = "as of " + clock(Date.now());
  refreshLog();
  setTimeout(refresh, POLL_MS);
}

start();
