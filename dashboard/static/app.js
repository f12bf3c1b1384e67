// The explorer's page: plain JS over the JSON API, no build step, no network beyond this server.
// Routes live in the hash (#/pool/1, #/worker/0x…, #/work/0x…); /summary shows the demo summary.
// Every view re-renders from the API every REFRESH_MS, so the page follows the run without reloads.
"use strict";

const REFRESH_MS = 2000;
const PAGE = 25;
const pages = {};  // table name -> offset, kept across refreshes
const main = document.getElementById("main");

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}
function short(hex) { return hex ? esc(hex.slice(0, 10) + "…" + hex.slice(-6)) : ""; }
function tokens(wei) {  // 18-decimal amounts, exact (BigInt), to 4 places
  if (wei == null) return "–";
  const v = BigInt(wei), unit = 10n ** 18n, frac = (v % unit) * 10000n / unit;
  return `${v / unit}.${frac.toString().padStart(4, "0")}`;
}
function num(x, digits = 3) { return x == null ? "–" : Number(x).toFixed(digits); }
function status(s) { return `<span class="status-${esc(s)}">${esc(s)}</span>`; }
function workLink(id) { return `<a class="mono" href="#/work/${esc(id)}">${short(id)}</a>`; }
function workerLink(a) { return `<a class="mono" href="#/worker/${esc(a)}">${short(a)}</a>`; }

async function api(path) {
  const r = await fetch(path, {headers: {accept: "application/json"}});
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
async function paged(name, path) {
  const sep = path.includes("?") ? "&" : "?";
  return api(`${path}${sep}offset=${pages[name] || 0}&limit=${PAGE}`);
}
function pager(name, p) {
  if (p.total <= p.limit) return "";
  const last = p.offset + p.items.length;
  return `<div class="pager"><button data-page="${name}" data-to="${Math.max(0, p.offset - p.limit)}"
    ${p.offset === 0 ? "disabled" : ""}>previous</button><button data-page="${name}" data-to="${p.offset + p.limit}"
    ${last >= p.total ? "disabled" : ""}>next</button><span class="muted">${p.offset + 1}–${last} of ${p.total}</span></div>`;
}
function table(id, heads, rows, empty = "none yet") {
  if (!rows.length) return `<p class="muted" id="${id}">${empty}</p>`;
  return `<table id="${id}"><thead><tr>${heads.map(h => `<th>${esc(h)}</th>`).join("")}</tr></thead>
    <tbody>${rows.map(r => `<tr>${r.map(c => `<td>${c}</td>`).join("")}</tr>`).join("")}</tbody></table>`;
}
function kv(pairs) { return `<div class="kv">${pairs.map(([k, v]) => `<span class="muted">${esc(k)}</span><span>${v}</span>`).join("")}</div>`; }

// ------------------------------------------------------------------ the learning curve (inline SVG)

const SERIES = [
  {key: "reward", label: "reward (accepted rollouts)", color: "#1a73e8"},
  {key: "accuracy", label: "held-out accuracy", color: "#137333"},
  {key: "clipped_fraction", label: "clipped fraction", color: "#e37400"},
];
function curveSvg(points) {
  if (!points.length) return `<p class="muted" id="curve-empty">no metrics published yet (the trainer puts them on IPFS with each checkpoint)</p>`;
  const W = 720, H = 260, L = 40, R = 10, T = 10, B = 30;
  const steps = points.map(p => p.step), x0 = Math.min(...steps), x1 = Math.max(...steps, x0 + 1);
  const values = points.flatMap(p => SERIES.map(s => p[s.key]).filter(v => v != null));
  const y0 = Math.min(0, ...values), y1 = Math.max(1, ...values);
  const X = s => L + (s - x0) / (x1 - x0) * (W - L - R), Y = v => H - B - (v - y0) / (y1 - y0) * (H - T - B);
  let svg = `<svg id="curve" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="learning curve">`;
  svg += `<line class="axis" x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}"/><line class="axis" x1="${L}" y1="${T}" x2="${L}" y2="${H - B}"/>`;
  svg += `<text x="${L}" y="${H - 8}">step ${x0}</text><text x="${W - R - 50}" y="${H - 8}">step ${x1}</text>`;
  svg += `<text x="4" y="${Y(y1) + 4}">${num(y1, 1)}</text><text x="4" y="${Y(y0)}">${num(y0, 1)}</text>`;
  for (const s of SERIES) {
    const pts = points.filter(p => p[s.key] != null);
    if (!pts.length) continue;
    svg += `<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${pts.map(p => `${X(p.step)},${Y(p[s.key])}`).join(" ")}"/>`;
    for (const p of pts) {
      svg += `<circle class="point" data-series="${s.key}" data-step="${p.step}" data-value="${p[s.key]}" cx="${X(p.step)}" cy="${Y(p[s.key])}" r="3" fill="${s.color}"><title>step ${p.step}: ${s.key} ${num(p[s.key])}</title></circle>`;
    }
  }
  svg += `</svg><div class="legend">${SERIES.map(s => `<span><i class="swatch" style="background:${s.color}"></i>${esc(s.label)}</span>`).join("")}</div>`;
  return svg;
}

// ------------------------------------------------------------------ views

async function poolsView() {
  const p = await paged("pools", "/api/pools");
  return `<h1>Pools</h1>` + table("pools", ["pool", "trainer", "latest step", "workers", "pending", "accepted", "rejected", "paid", "budget"],
    p.items.map(x => [`<a href="#/pool/${x.pool_id}">pool ${x.pool_id}</a>`, short(x.trainer), esc(x.latest_checkpoint_step ?? "–"),
      esc(x.workers), esc(x.submissions.pending), esc(x.submissions.accepted), esc(x.submissions.rejected),
      esc(x.submissions.paid), tokens(x.state && x.state.budget)]), "no pools on this deployment yet") + pager("pools", p);
}

async function poolView(id) {
  const [pool, curve, cps, workers, validators, subs, slashes, claims] = await Promise.all([
    api(`/api/pools/${id}`), api(`/api/pools/${id}/curve`), paged("checkpoints", `/api/pools/${id}/checkpoints`),
    paged("workers", `/api/pools/${id}/workers`), paged("validators", `/api/pools/${id}/validators`),
    paged("submissions", `/api/pools/${id}/submissions`), paged("slashes", `/api/pools/${id}/slashes`),
    paged("claims", `/api/pools/${id}/claims`)]);
  const s = pool.state || {};
  const task = pool.run_spec ? esc(JSON.stringify(pool.run_spec.task)) : `<span class="mono">${short(pool.task_ref)}</span>`;
  return `<h1 id="pool-title">Pool ${pool.pool_id} ${s.active === false ? "(closed)" : ""}</h1>` + kv([
      ["trainer", `<span class="mono">${esc(pool.trainer)}</span>`], ["task", task],
      ["latest checkpoint", esc(pool.latest_checkpoint_step ?? "–")], ["budget", tokens(s.budget)], ["reserved", tokens(s.reserved)],
      ["reward per sample", tokens(s.reward_per_sample)], ["min stake", tokens(s.min_stake)], ["slash", tokens(s.slash_amount)],
      ["challenge window", `${esc(s.challenge_window_s)} s`], ["reward lock", `${esc(s.reward_lock_s)} s`],
      ["async level", esc(s.async_level)], ["slashed in total", tokens(pool.slashed_total)],
      ["submissions", Object.entries(pool.submissions).map(([k, v]) => `${status(k)} ${v}`).join(" · ")]]) +
    `<h2>Learning curve</h2>` + curveSvg(curve.items) +
    `<h2>Submissions</h2>` + table("submissions", ["work", "worker", "step", "samples", "status", "reason", "evidence"],
      subs.items.map(w => [workLink(w.work_id), workerLink(w.worker), esc(w.step), esc(w.n_samples), status(w.status),
        w.reason ? `<span class="reason">${esc(w.reason)}</span>` : "", w.evidence_digest ? `<a href="#/work/${esc(w.work_id)}">evidence</a>` : ""])) + pager("submissions", subs) +
    `<h2>Workers</h2>` + table("workers", ["worker", "member", "pending", "accepted", "rejected", "paid", "slashed"],
      workers.items.map(w => [workerLink(w.worker), w.member ? "yes" : (w.ejected ? "ejected" : "left"), esc(w.submissions.pending),
        esc(w.submissions.accepted), esc(w.submissions.rejected), esc(w.submissions.paid), tokens(w.slashed)])) + pager("workers", workers) +
    `<h2>Validators</h2>` + table("validators", ["validator", "allowed", "attested", "challenged"],
      validators.items.map(v => [`<span class="mono">${short(v.validator)}</span>`, v.allowed ? "yes" : "no", esc(v.attested), esc(v.challenged)])) +
    `<h2>Checkpoints</h2>` + table("checkpoints", ["step", "manifest", "shards", "size", "metrics", "block"],
      cps.items.map(c => [esc(c.step), `<span class="mono">${short(c.manifest_digest)}</span>`, esc(c.manifest ? c.manifest.shards : "…"),
        c.manifest ? `${(c.manifest.total_bytes / 1024).toFixed(0)} KiB` : (c.manifest_error ? `<span class="muted">unavailable</span>` : "…"),
        c.manifest && c.manifest.metrics ? "yes" : "", esc(c.block)])) + pager("checkpoints", cps) +
    `<h2>Slashes</h2>` + table("slashes", ["worker", "challenger", "amount", "bounty", "block"],
      slashes.items.map(x => [workerLink(x.worker), short(x.challenger), tokens(x.amount), tokens(x.bounty), esc(x.block)])) + pager("slashes", slashes) +
    `<h2>Claims</h2>` + table("claims", ["worker", "amount", "works", "block"],
      claims.items.map(x => [workerLink(x.worker), tokens(x.amount), esc(x.works), esc(x.block)])) + pager("claims", claims);
}

async function workerView(address) {
  const [w, subs] = await Promise.all([api(`/api/workers/${address}`), paged("wsubs", `/api/workers/${address}/submissions`)]);
  const st = w.stake || {};
  return `<h1>Worker <span class="mono">${esc(w.worker)}</span></h1>` + kv([
      ["pools", w.pools.map(p => `<a href="#/pool/${p}">pool ${p}</a>`).join(", ") || "–"], ["bonded (free)", tokens(st.bonded)],
      ["allocated to pools", tokens(st.allocated)],
      ["unbonding", tokens(st.unbonding)], ["owed (accepted, unclaimed)", tokens(w.owed)], ["claimed", tokens(w.claimed)],
      ["slashed", tokens(w.slashed)], ["submissions", Object.entries(w.submissions).map(([k, v]) => `${status(k)} ${v}`).join(" · ")]]) +
    `<h2>Submissions</h2>` + table("submissions", ["work", "pool", "step", "samples", "status", "reason"],
      subs.items.map(s => [workLink(s.work_id), `<a href="#/pool/${s.pool_id}">${s.pool_id}</a>`, esc(s.step), esc(s.n_samples),
        status(s.status), s.reason ? `<span class="reason">${esc(s.reason)}</span>` : ""])) + pager("wsubs", subs);
}

async function workView(id) {
  const w = await api(`/api/works/${id}`);
  let html = `<h1>Submission <span class="mono">${short(w.work_id)}</span></h1>` + kv([
    ["work id", `<span class="mono">${esc(w.work_id)}</span>`], ["pool", `<a href="#/pool/${w.pool_id}">pool ${w.pool_id}</a>`],
    ["worker", workerLink(w.worker)], ["step", esc(w.step)], ["samples", esc(w.n_samples)], ["status", status(w.status)],
    ["validator", w.validator ? `<span class="mono">${esc(w.validator)}</span>` : "–"],
    ["reason", w.reason ? `<span class="reason" id="reason">${esc(w.reason)}</span>` : "–"],
    ["slashed", w.slashed ? tokens(w.slashed) : "–"]]);
  if (w.evidence) {
    const e = w.evidence, d = e.document;
    html += `<h2>Evidence</h2><p class="muted">digest <span class="mono">${esc(e.digest)}</span> (on IPFS, named on-chain by the challenge)</p>`;
    if (!d) html += `<p class="muted" id="evidence">not fetched from IPFS yet${e.error ? `: ${esc(e.error)}` : ""}</p>`;
    else html += `<div id="evidence">` + kv([["reason", `<span class="reason">${esc(d.reason)}</span> (code ${esc(d.reason_code)})`],
        ["message", esc(d.message)], ["failing samples", esc((d.failing_samples || []).join(", ") || "–")],
        ["failing chunks", esc(JSON.stringify(d.failing_chunks || {}))], ["validator", `<span class="mono">${esc(d.validator)}</span>`]]) +
      table("evidence-stats", ["statistic", "value", "threshold"], Object.entries(d.statistics || {}).map(([k, v]) =>
        [esc(k), esc(typeof v === "object" ? JSON.stringify(v) : v), esc(JSON.stringify((d.thresholds || {})[k] ?? ""))]), "no statistics") +
      `<details><summary>the document as stored</summary><pre>${esc(JSON.stringify(d, null, 2))}</pre></details></div>`;
  }
  return html;
}

async function summaryView() {
  const s = await api("/api/summary");
  const rows = Object.entries(s).map(([k, v]) => [esc(k), typeof v === "object" ? `<pre>${esc(JSON.stringify(v, null, 2))}</pre>` : esc(v)]);
  return `<h1>Demo summary</h1>` + table("summary", ["", ""], rows);
}

// ------------------------------------------------------------------ routing and refresh

let rendering = false;
async function render() {
  if (rendering) return;
  rendering = true;
  const route = location.pathname === "/summary" ? ["summary"] : location.hash.replace(/^#\/?/, "").split("/");
  try {
    const html = route[0] === "summary" ? await summaryView()
      : route[0] === "pool" ? await poolView(encodeURIComponent(route[1]))
      : route[0] === "worker" ? await workerView(encodeURIComponent(route[1]))
      : route[0] === "work" ? await workView(encodeURIComponent(route[1]))
      : await poolsView();
    const open = [...main.querySelectorAll("details[open]")].length;
    main.innerHTML = html;
    if (open) main.querySelectorAll("details").forEach(d => d.open = true);
  } catch (err) {
    main.innerHTML = `<p class="error" id="error">${esc(err.message)}</p>`;
  } finally {
    rendering = false;
  }
  try {
    const st = await api("/api/status");
    document.getElementById("status").textContent = st.last_error ? `index: ${st.last_error}`
      : `block ${st.indexed_block ?? "–"} indexed (head ${st.chain_head ?? "?"})`;
  } catch (err) { document.getElementById("status").textContent = "explorer unreachable"; }
}

main.addEventListener("click", ev => {
  const b = ev.target.closest("button[data-page]");
  if (b) { pages[b.dataset.page] = Number(b.dataset.to); render(); }
});
window.addEventListener("hashchange", () => { for (const k in pages) delete pages[k]; render(); });
render();
setInterval(render, REFRESH_MS);
