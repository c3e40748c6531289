"use strict";
// The section "Leases on this node's GPUs": what runs on this node's GPUs
// now (GET /v1/leases, as e31 leases prints it), a row a lease. app.js
// draws it with the rest (draw) from the answers it reads; this file only
// lays it out, with app.js's helpers (el, fill, peer, short, clock, ago).

// leaseGPUs names a lease's GPUs, how many of each model; the UUIDs show
// on hover.
function leaseGPUs(gpus) {
  const count = new Map();
  for (const g of gpus || []) count.set(g.model || "", (count.get(g.model || "") || 0) + 1);
  const text = [...count].map(([m, n]) => (n + "× " + m).trim()).join(", ") || "none";
  return el("span", { title: (gpus || []).map((g) => g.uuid).join(" ") }, text);
}

// drawLiveLeases lists the leases this node provides now; null (the node
// did not answer) leaves the section as it was.
function drawLiveLeases(ls) {
  if (ls == null) return;
  const when = (t) => (t ? el("time", { datetime: t, title: t }, clock(t)) : "–");
  fill(document.querySelector("#leases tbody"), ls.map((l) => el("tr", { class: "lease", "data-lease": l.id },
    el("td", { title: l.id }, el("code", {}, l.id)),
    el("td", { title: l.job }, el("code", {}, short(l.job)), l.name ? " " + l.name : ""),
    el("td", {}, peer(l.submitter)),
    el("td", {}, leaseGPUs(l.gpus)),
    el("td", {}, l.phase),
    el("td", {}, when(l.held_since), " (" + ago(l.held_since) + ")"),
    el("td", {}, when(l.ends_by)),
    el("td", {}, when(l.checkpoint_at)),
    el("td", { title: l.billed.until ? "as the receipts signed up to " + l.billed.until + " say" : "no receipt signed yet" },
      l.billed.gpu_hours.toFixed(3)),
    el("td", {}, l.billed.own ? "own job" : l.billed.owed_gpu_hours.toFixed(3)))));
  document.getElementById("leases-count").textContent =
    ls.length ? plural(ls.length, "lease") : "no lease runs on this node's GPUs";
}
