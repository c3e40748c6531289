// The dashboard reads the node's local API every two seconds and redraws.
// Every value from the network is set with textContent, never as HTML.
"use strict";

const POLL_MS = 2000;
const STEPS = ["submit", "rent", "run", "output", "release"];
const OUTCOME_COLORS = {
  completed: "#2f9e5b", failed: "#d0473c", limit: "#d99a1e", withdrawn: "#8a63c9",
  "provider-lost": "#6b7480", "output-lost": "#a35d2f", held: "#3a78c9",
};
const SVG_NS = "http://www.w3.org/2000/svg";

let chosenJob = null;

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

function short(id) { return id ? id.slice(0, 12) : ""; }
function bytes(n) { return n ? (n / 2 ** 30).toFixed(0) + " GiB" : ""; }
function clock(t) { return new Date(t).toLocaleTimeString([], { hour12: false }); }

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function drawNetwork(nodes) {
  const rows = nodes.map((n) => {
    const gpus = n.gpus || [];
    const free = gpus.filter((g) => g.free).length;
    const boxes = el("span", {});
    for (const g of gpus) boxes.append(el("span", { class: "gpu " + (g.free ? "free" : "held"), title: g.uuid + (g.free ? " free" : " held") }));
    const models = [...new Set(gpus.map((g) => g.model + " " + bytes(g.memory_bytes)))].join(", ");
    return el("tr", { class: "provider", "data-peer": n.peer_id },
      el("td", {}, el("span", { class: "peer" }, n.peer_id), n.self ? el("span", { class: "muted" }, " (this node)") : ""),
      el("td", {}, gpus.length + " × " + models),
      el("td", {}, boxes, " " + free + " free / " + (gpus.length - free) + " held"),
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

function drawJobs(jobs) {
  const rows = jobs.slice().reverse().map((j) => {
    const tr = el("tr", { class: "job" + (j.id === chosenJob ? " chosen" : ""), "data-job": j.id },
      el("td", { title: j.id }, el("code", {}, short(j.id))),
      el("td", {}, j.name),
      el("td", { class: "state-" + j.state }, j.state),
      el("td", {}, timeline(j)),
      el("td", { title: j.provider }, el("span", { class: "peer" }, short(j.provider))),
      el("td", {}, j.outcome ? j.outcome + (j.exit_code != null ? " (exit " + j.exit_code + ")" : "") : ""),
      el("td", { class: "reason" }, j.reason));
    tr.addEventListener("click", () => { chosenJob = j.id; refreshLog(); drawJobs(jobs); });
    return tr;
  });
  if (rows.length === 0) rows.push(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "no job submitted from this node")));
  fill(document.querySelector("#jobs tbody"), rows);
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
    el("td", { title: u.peer }, el("span", { class: "peer" }, short(u.peer))),
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
}

async function refreshLog() {
  const status = document.getElementById("log-status");
  const pre = document.getElementById("log");
  if (!chosenJob) return;
  document.getElementById("log-job").textContent = chosenJob;
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

async function refresh() {
  try {
    const [id, nodes, jobs, rec, usage] = await Promise.all([
      getJSON("/v1/id"), getJSON("/v1/nodes"), getJSON("/v1/jobs"),
      getJSON("/v1/receipts"), getJSON("/v1/usage").catch(() => null),
    ]);
    document.getElementById("self").replaceChildren("node ", el("span", { class: "peer" }, id.peer_id), " on ", el("b", {}, id.network));
    drawNetwork(nodes || []);
    if (!chosenJob && jobs && jobs.length) {
      const running = jobs.filter((j) => j.state === "running");
      chosenJob = (running[running.length - 1] || jobs[jobs.length - 1]).id;
    }
    drawJobs(jobs || []);
    drawReceipts(rec || {}, usage);
    drawPlots(jobs || [], (rec && rec.receipts) || []);
    await refreshLog();
    document.getElementById("updated").textContent = "updated " + clock(Date.now());
    document.body.dataset.loaded = "1";
  } catch (e) {
    document.getElementById("updated").textContent = "cannot reach the node: " + e.message;
  } finally {
    setTimeout(refresh, POLL_MS);
  }
}

for (const r of document.querySelectorAll("input[name=stream]")) r.addEventListener("change", refreshLog);
refresh();
