// The explorer's page: plain JS over the JSON API, no build step, no network beyond this server.
// Routes live in the hash: #/pool/1 (the pool and its owner's figures), #/pool/1/court, #/pool/1/trainer,
// #/worker/0x…, #/validator/0x…, #/work/0x… (a submission and the reason for its verdict), #/case/0x… (a court
// case: committee, votes, who paid what); /summary shows the demo summary. A printed /pool/1 (or /case/…,
// /validator/…) redirects here. Every view re-renders from the API every REFRESH_MS, so the page follows the run.
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
  const neg = String(wei).startsWith("-"), v = BigInt(String(wei).replace(/^-/, "")), unit = 10n ** 18n;
  const frac = (v % unit) * 10000n / unit;
  return `${neg ? "−" : ""}${v / unit}.${frac.toString().padStart(4, "0")}`;
}
function num(x, digits = 3) { return x == null ? "–" : Number(x).toFixed(digits); }
function sci(x) {  // a measured number; a string (an identity check's value, "none: no exponent matched") as it is
  if (typeof x !== "number") return x == null ? "–" : esc(typeof x === "string" ? x : JSON.stringify(x));
  return Math.abs(x) < 1e-3 && x !== 0 ? x.toExponential(2) : num(x, 4);
}
function when(t) { return t == null ? "–" : esc(new Date(t * 1000).toISOString().replace("T", " ").replace(".000Z", " UTC")); }
function secs(s) { return s == null ? "–" : `${esc(s)} s`; }
function status(s) { return `<span class="status-${esc(s)}">${esc(s)}</span>`; }
function yes(b) { return b == null ? "–" : b ? "yes" : "no"; }
function workLink(id) { return `<a class="mono" href="#/work/${esc(id)}">${short(id)}</a>`; }
function caseLink(id, text) { return `<a class="mono case-link" href="#/case/${esc(id)}">${text ?? short(id)}</a>`; }
function workerLink(a) { return a ? `<a class="mono" href="#/worker/${esc(a)}">${short(a)}</a>` : "–"; }
function validatorLink(a) { return a ? `<a class="mono validator-link" href="#/validator/${esc(a)}">${short(a)}</a>` : "–"; }
function poolLink(p) { return `<a href="#/pool/${esc(p)}">pool ${esc(p)}</a>`; }
function reason(r) { return r ? `<span class="reason">${esc(r)}</span>` : ""; }

async function api(path) {
  const r = await fetch(path, {headers: {accept: "application/json"}});
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
async function optional(path) { try { return await api(path); } catch (err) { return null; } }
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
function kv(pairs, id = "") {
  return `<div class="kv"${id ? ` id="${id}"` : ""}>${pairs.map(([k, v]) => `<span class="muted">${esc(k)}</span><span>${v}</span>`).join("")}</div>`;
}
function counts(obj) { return Object.entries(obj || {}).map(([k, v]) => `${status(k)} ${esc(v)}`).join(" · ") || "–"; }
function amounts(obj) { return Object.entries(obj || {}).map(([k, v]) => `${esc(k)} ${tokens(v)}`).join(" · ") || "–"; }
function tabs(id, here) {
  return `<nav class="tabs">${[["", "pool"], ["court", "court"], ["trainer", "trainer"]].map(([path, label]) =>
    `<a href="#/pool/${id}${path ? "/" + path : ""}" class="${here === label ? "here" : ""}">${label}</a>`).join("")}</nav>`;
}

// ------------------------------------------------------------------ charts (inline SVG)

const SERIES = [
  {key: "reward", label: "reward (accepted rollouts)", color: "#1a73e8"},
  {key: "accuracy", label: "held-out accuracy", color: "#137333"},
  {key: "clipped_fraction", label: "clipped fraction", color: "#e37400"},
];
const TRAINER_SERIES = [
  ...SERIES,
  {key: "staleness_mean", label: "staleness (mean steps)", color: "#8430ce"},
  {key: "is_weight_mean", label: "IS weight (mean)", color: "#c5221f"},
  {key: "is_truncated_fraction", label: "IS truncated fraction", color: "#5f6368"},
];
function lineChart(id, points, series, xKey = "step", xLabel = "step") {
  const W = 720, H = 260, L = 52, R = 10, T = 10, B = 30;
  const xs = points.map(p => p[xKey]), x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
  const values = points.flatMap(p => series.map(s => p[s.key]).filter(v => v != null).map(Number));
  const y0 = Math.min(0, ...values), y1 = Math.max(1e-9, ...values);
  const X = s => L + (s - x0) / (x1 - x0) * (W - L - R), Y = v => H - B - (v - y0) / (y1 - y0 || 1) * (H - T - B);
  let svg = `<svg id="${id}" class="chart" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img">`;
  svg += `<line class="axis" x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}"/><line class="axis" x1="${L}" y1="${T}" x2="${L}" y2="${H - B}"/>`;
  svg += `<text x="${L}" y="${H - 8}">${esc(xLabel)} ${esc(x0)}</text><text x="${W - R - 90}" y="${H - 8}">${esc(xLabel)} ${esc(x1)}</text>`;
  svg += `<text x="4" y="${Y(y1) + 4}">${num(y1, 2)}</text><text x="4" y="${Y(y0)}">${num(y0, 2)}</text>`;
  for (const s of series) {
    const pts = points.filter(p => p[s.key] != null);
    if (!pts.length) continue;
    svg += `<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${pts.map(p => `${X(p[xKey])},${Y(Number(p[s.key]))}`).join(" ")}"/>`;
    for (const p of pts) {
      svg += `<circle class="point" data-series="${s.key}" data-step="${p[xKey]}" data-value="${p[s.key]}" cx="${X(p[xKey])}" cy="${Y(Number(p[s.key]))}" r="3" fill="${s.color}"><title>${esc(xLabel)} ${p[xKey]}: ${s.key} ${num(p[s.key])}</title></circle>`;
    }
  }
  svg += `</svg><div class="legend">${series.filter(s => points.some(p => p[s.key] != null)).map(s =>
    `<span><i class="swatch" style="background:${s.color}"></i>${esc(s.label)}</span>`).join("")}</div>`;
  return svg;
}
function curveSvg(points, series = SERIES) {
  if (!points.length) return `<p class="muted" id="curve-empty">no metrics published yet (the trainer puts them on IPFS with each checkpoint)</p>`;
  return lineChart("curve", points, series);
}

// ------------------------------------------------------------------ pools

async function poolsView() {
  const p = await paged("pools", "/api/pools");
  return `<h1>Pools</h1>` + table("pools", ["pool", "trainer", "latest step", "workers", "pending", "accepted", "rejected", "paid", "budget"],
    p.items.map(x => [poolLink(x.pool_id), short(x.trainer), esc(x.latest_checkpoint_step ?? "–"),
      esc(x.workers), esc(x.submissions.pending), esc(x.submissions.accepted), esc(x.submissions.rejected),
      esc(x.submissions.paid), tokens(x.state && x.state.budget)]), "no pools on this deployment yet") + pager("pools", p);
}

function ownerSection(st) {
  const lat = l => l && l.n ? `p50 ${secs(l.p50)} · p99 ${secs(l.p99)} (${esc(l.n)} works)` : "–";
  const t = st.throughput || {};
  return `<h2>Pool owner</h2>` + kv([
    ["budget (unreserved)", tokens(st.budget)], ["reserved for open work", tokens(st.reserved)],
    ["fee budget (court)", st.fee_budget == null ? "–" : tokens(st.fee_budget)],
    ["throughput", `${esc(t.submissions_per_min ?? "–")} files/min · ${esc(t.samples_per_min ?? "–")} samples/min · ${esc(t.accepted_samples_per_min ?? "–")} accepted samples/min`],
    ["verdict latency", lat(st.verdict_latency_s)], ["finality latency", lat(st.finality_latency_s)],
    ["backlog", `${esc(st.backlog.awaiting_verdict)} awaiting a verdict · ${esc(st.backlog.awaiting_finality)} awaiting finality`],
    ["adversary rate (rejected / judged)", st.adversary_rate == null ? "–" : `${num(100 * st.adversary_rate, 1)} %`],
    ["disputes", st.disputes ? `${esc(st.disputes.total)} (overturned ${esc(st.disputes.overturned)}, upheld ${esc(st.disputes.upheld)}, open ${esc(st.disputes.open)})` : "–"],
    ["paid out", `rewards ${tokens(st.rewards_paid)} · verdict fees ${tokens(st.fees_paid)}`],
    ["slashed", `workers ${tokens(st.slashed_total)} · validators ${tokens(st.validator_penalties)}`],
  ], "owner");
}

async function poolView(id) {
  const [pool, stats, curve, cps, workers, validators, subs, slashes, claims] = await Promise.all([
    api(`/api/pools/${id}`), api(`/api/pools/${id}/stats`), api(`/api/pools/${id}/curve`),
    paged("checkpoints", `/api/pools/${id}/checkpoints`), paged("workers", `/api/pools/${id}/workers`),
    paged("validators", `/api/pools/${id}/validators`), paged("submissions", `/api/pools/${id}/submissions`),
    paged("slashes", `/api/pools/${id}/slashes`), paged("claims", `/api/pools/${id}/claims`)]);
  const s = pool.state || {};
  const task = pool.run_spec ? esc(JSON.stringify(pool.run_spec.task)) : `<span class="mono">${short(pool.task_ref)}</span>`;
  const court = pool.court ? await optional(`/api/pools/${id}/court/validators?limit=100`) : null;
  return `<h1 id="pool-title">Pool ${pool.pool_id} ${s.active === false ? "(closed)" : ""}</h1>` + tabs(id, "pool") + kv([
      ["owner", `<span class="mono">${esc(pool.owner)}</span>`], ["trainer", `<span class="mono">${esc(pool.trainer)}</span>`],
      ["task", task], ["judged by", pool.court ? `the ValidatorCourt's bonded validators (<a href="#/pool/${id}/court">court</a>)` : "the pool's validators"],
      ["latest checkpoint", esc(pool.latest_checkpoint_step ?? "–")],
      ["reward per sample", tokens(s.reward_per_sample)], ["min stake", tokens(s.min_stake)], ["slash", tokens(s.slash_amount)],
      ["spot checks", s.spot_check_bps ? `${num(s.spot_check_bps / 100, 1)} % of each file's completions` : "–"],
      ["challenge window", secs(s.challenge_window_s)], ["reward lock", secs(s.reward_lock_s)],
      ["async level", esc(s.async_level)], ["submissions", counts(pool.submissions)]]) +
    ownerSection(stats) +
    `<h2>Learning curve</h2>` + curveSvg(curve.items) + `<p><a href="#/pool/${id}/trainer">the trainer's view</a></p>` +
    `<h2>Submissions</h2>` + table("submissions", ["work", "worker", "step", "samples", "status", "case", "verdict by", "reason", "evidence"],
      subs.items.map(w => [workLink(w.work_id), workerLink(w.worker), esc(w.step), esc(w.n_samples), status(w.status),
        w.case_state ? caseLink(w.work_id, esc(w.case_state)) : "", validatorLink(w.judge), reason(w.reason),
        w.evidence_digest ? `<a href="#/work/${esc(w.work_id)}">why</a>` : (w.status === "accepted" || w.status === "paid" ? `<a href="#/work/${esc(w.work_id)}">checks</a>` : "")])) + pager("submissions", subs) +
    `<h2>Workers</h2>` + table("workers", ["worker", "member", "pending", "accepted", "rejected", "paid", "slashed"],
      workers.items.map(w => [workerLink(w.worker), w.member ? "yes" : (w.ejected ? "ejected" : "left"), esc(w.submissions.pending),
        esc(w.submissions.accepted), esc(w.submissions.rejected), esc(w.submissions.paid), tokens(w.slashed)])) + pager("workers", workers) +
    (court ? `<h2>Validators (bonded)</h2>` + courtValidatorTable(court.items) :
      `<h2>Validators</h2>` + table("validators", ["validator", "allowed", "attested", "challenged"],
        validators.items.map(v => [`<span class="mono">${short(v.validator)}</span>`, v.allowed ? "yes" : "no", esc(v.attested), esc(v.challenged)]))) +
    `<h2>Checkpoints</h2>` + table("checkpoints", ["step", "manifest", "shards", "size", "metrics", "block"],
      cps.items.map(c => [esc(c.step), `<span class="mono">${short(c.manifest_digest)}</span>`, esc(c.manifest ? c.manifest.shards : "…"),
        c.manifest ? `${(c.manifest.total_bytes / 1024).toFixed(0)} KiB` : (c.manifest_error ? `<span class="muted">unavailable</span>` : "…"),
        c.manifest && c.manifest.metrics ? "yes" : "", esc(c.block)])) + pager("checkpoints", cps) +
    `<h2>Slashes</h2>` + table("slashes", ["worker", "work", "reason", "amount", "bounty", "judge", "block"],
      slashes.items.map(x => [workerLink(x.worker), workLink(x.work_id), `<a href="#/work/${esc(x.work_id)}">${reason(x.reason)}</a>`,
        tokens(x.amount), tokens(x.bounty), validatorLink(x.judge), esc(x.block)])) + pager("slashes", slashes) +
    `<h2>Claims</h2>` + table("claims", ["worker", "amount", "works", "block"],
      claims.items.map(x => [workerLink(x.worker), tokens(x.amount), esc(x.works), esc(x.block)])) + pager("claims", claims);
}

function courtValidatorTable(items) {
  return table("court-validators", ["validator", "registered", "locked", "reserved", "verdicts", "overturned", "disputes won/lost",
      "seats", "votes revealed", "penalties", "earned"],
    items.map(v => [validatorLink(v.validator), v.registered ? "yes" : (v.exit_at ? "leaving" : "no"),
      tokens(v.live && v.live.locked), tokens(v.live && v.live.reserved), esc(v.verdicts.given), esc(v.verdicts.overturned),
      `${esc(v.disputes.won)} / ${esc(v.disputes.lost)}`, esc(v.committee.seats), esc(v.committee.revealed),
      tokens(v.penalties_total), tokens(v.earned_total)]), "no validator registered yet");
}

async function courtView(id) {
  const [c, cases, vals] = await Promise.all([api(`/api/pools/${id}/court`), paged("cases", `/api/pools/${id}/cases`),
    paged("cvals", `/api/pools/${id}/court/validators`)]);
  const p = c.params;
  return `<h1 id="court-title">Pool ${esc(id)} — court</h1>` + tabs(id, "court") + kv([
      ["court", `<span class="mono">${esc(c.court)}</span>`], ["fee budget", tokens(c.fee_budget)],
      ["fees funded / paid", `${tokens(c.fees_funded)} / ${tokens(c.fees_paid)}`], ["cases", counts(c.cases)],
      ["disputes", `${esc(c.disputes.total)}: overturned ${esc(c.disputes.overturned)}, upheld ${esc(c.disputes.upheld)}, void ${esc(c.disputes.void)}, open ${esc(c.disputes.open)}`],
      ["validators", `${esc(c.validators.registered)} registered (${esc(c.validators.ever)} ever)`],
      ["validator penalties", `${amounts(c.penalties)} (total ${tokens(c.penalties_total)})`]]) +
    `<h2>Rules</h2>` + kv([
      ["validator bond", tokens(p.validator_bond)], ["verdict fee", tokens(p.verdict_fee)], ["dispute bond", tokens(p.dispute_bond)],
      ["wrong-verdict slash", tokens(p.wrong_verdict_slash)], ["non-voter penalty", tokens(p.non_voter_penalty)],
      ["silence penalty", tokens(p.silence_penalty)], ["assigned window", secs(p.assigned_window)],
      ["verdict window", secs(p.verdict_window)], ["dispute window", secs(p.dispute_window)],
      ["commit / reveal", `${secs(p.commit_period)} / ${secs(p.reveal_period)}`], ["committee size", esc(p.committee_size)],
      ["activation delay", secs(p.activation_delay)], ["exit delay", secs(c.exit_delay_s)]], "rules") +
    `<h2>Validators</h2>` + courtValidatorTable(vals.items) + pager("cvals", vals) +
    `<h2>Cases</h2>` + table("cases", ["case", "worker", "state", "first verdict", "judge", "disputer", "overturned", "final"],
      cases.items.map(x => [caseLink(x.work_id), workerLink(x.worker), status(x.state),
        x.first_verdict ? `${esc(x.first_verdict)} ${reason(x.reason)}` : "–", validatorLink(x.judge), validatorLink(x.disputer),
        yes(x.overturned), x.void ? `void: ${esc(x.void)}` : esc(x.final ?? "–")])) + pager("cases", cases);
}

async function trainerView(id) {
  const t = await api(`/api/pools/${id}/trainer`);
  const pts = t.points;
  return `<h1 id="trainer-title">Pool ${esc(id)} — trainer</h1>` + tabs(id, "trainer") + kv([
      ["trainer", `<span class="mono">${esc(t.trainer)}</span>`], ["latest step", esc(t.latest_step ?? "–")],
      ["files consumed (reported)", esc(t.consumed_total)], ["accepted in the pool", esc(t.accepted_total)],
      ["rejected in the pool", esc(t.rejected_total)]]) +
    `<h2>Learning curve</h2>` + curveSvg(pts, TRAINER_SERIES) +
    `<h2>Consumed against accepted</h2>` + (pts.length ? lineChart("consumed", pts, [
      {key: "consumed_total", label: "files consumed by the trainer", color: "#1a73e8"},
      {key: "accepted_by_then", label: "works accepted in the pool by the checkpoint", color: "#137333"},
      {key: "rejected_by_then", label: "works rejected by then", color: "#b3261e"}]) : `<p class="muted">no metrics yet</p>`) +
    `<h2>Steps</h2>` + table("steps", ["step", "reward", "accuracy", "staleness mean / max", "IS weight mean / min / max", "IS truncated", "clipped", "files taken in", "groups trained on", "rejected files"],
      pts.map(p => [esc(p.step), p.reward != null ? num(p.reward) : `<span class="muted no-reward">none: ${esc(p.no_reward)}</span>`,
        num(p.accuracy), `${num(p.staleness_mean, 2)} / ${esc(p.staleness_max ?? "–")}`,
        `${num(p.is_weight_mean)} / ${num(p.is_weight_min)} / ${num(p.is_weight_max)}`, num(p.is_truncated_fraction),
        num(p.clipped_fraction), esc(p.files_consumed ?? "–"), esc(p.batch_groups ?? "–"), esc(p.rejected_files ?? "–")]));
}

// ------------------------------------------------------------------ people

async function workerView(address) {
  const [w, subs] = await Promise.all([api(`/api/workers/${address}`), paged("wsubs", `/api/workers/${address}/submissions`)]);
  const st = w.stake || {};
  return `<h1>Worker <span class="mono">${esc(w.worker)}</span></h1>` + kv([
      ["pools", w.pools.map(poolLink).join(", ") || "–"], ["bonded (free)", tokens(st.bonded)],
      ["allocated to pools", tokens(st.allocated)], ["unbonding", tokens(st.unbonding)],
      ["rewards owed (accepted, unpaid)", tokens(w.owed)], ["claimable now (reward lock passed)", tokens(w.claimable)],
      ["claimed", tokens(w.claimed)], ["slashed", tokens(w.slashed)], ["submissions", counts(w.submissions)]], "worker-stake") +
    `<h2>Allocation per pool</h2>` + table("allocations", ["pool", "member", "allocation", "required by open work", "open works", "next nonce"],
      Object.entries(w.members || {}).map(([p, m]) => [poolLink(p), m ? yes(m.member) : "–", tokens(m && m.allocation),
        tokens(m && m.required), esc(m ? m.open_works : "–"), esc(m ? m.next_nonce : "–")])) +
    `<h2>Slashes — why</h2>` + table("slashes", ["work", "pool", "reason", "amount", "judge", "block"],
      w.slashes.map(x => [workLink(x.work_id), poolLink(x.pool_id), `<a class="why" href="#/work/${esc(x.work_id)}">${reason(x.reason)} — read why</a>`,
        tokens(x.amount), validatorLink(x.judge), esc(x.block)]), "never slashed") +
    `<h2>Open works</h2>` + table("open-works", ["work", "pool", "step", "status", "case"],
      w.open_works.map(s => [workLink(s.work_id), poolLink(s.pool_id), esc(s.step), status(s.status),
        s.case_state ? caseLink(s.work_id, esc(s.case_state)) : ""]), "none open") +
    `<h2>Submissions</h2>` + table("submissions", ["work", "pool", "step", "samples", "status", "case", "reason"],
      subs.items.map(s => [workLink(s.work_id), poolLink(s.pool_id), esc(s.step), esc(s.n_samples), status(s.status),
        s.case_state ? caseLink(s.work_id, esc(s.case_state)) : "", reason(s.reason)])) + pager("wsubs", subs);
}

async function validatorView(address) {
  const [v, earnings, verdicts] = await Promise.all([api(`/api/validators/${address}`),
    api(`/api/validators/${address}/earnings`), paged("vverdicts", `/api/validators/${address}/verdicts`)]);
  const a = v.account || {};
  let html = `<h1>Validator <span class="mono" id="validator-title">${esc(v.validator)}</span></h1>` + kv([
      ["earned (fees, bounties, shares)", tokens(v.earned_total)], ["lost (penalties)", tokens(v.penalties_total)],
      ["credits to withdraw", tokens(a.credits)], ["withdrawn", tokens(v.withdrawn_total)],
      ["stake the court holds locked", tokens(a.court_locked)], ["free bonded stake", tokens(a.bonded)]], "validator-account");
  for (const p of v.pools) {
    const live = p.live || {};
    html += `<h2>${poolLink(p.pool_id)} — <a href="#/pool/${p.pool_id}/court">court</a></h2>` + kv([
      ["registered", p.registered ? `yes, index ${esc(p.index)}, since ${when(p.registered_at && p.registered_at.time)}` :
        p.deregistered_at ? `deregistered ${when(p.deregistered_at.time)}; bond withdrawable from ${when(p.exit_at)}` : "no"],
      ["bond withdrawn", p.bond_withdrawn ? tokens(p.bond_withdrawn.amount) : "–"],
      ["locked (live / as events add up)", `${tokens(live.locked)} / ${tokens(p.locked_from_events)}`],
      ["reserved by open cases", `${tokens(live.reserved)} (${p.reserved_by_open_cases.cases.map(c => `${esc(c.as)} ${caseLink(c.work_id)}`).join(", ") || "none"})`],
      ["free", tokens(live.free)],
      ["verdicts", `${esc(p.verdicts.given)} given (${esc(p.verdicts.accepted)} attested, ${esc(p.verdicts.challenged)} challenged), ${esc(p.verdicts.disputed)} disputed, <b>${esc(p.verdicts.overturned)} overturned</b>, ${esc(p.verdicts.upheld)} upheld`],
      ["disputes filed", `${esc(p.disputes.filed)}: won ${esc(p.disputes.won)}, lost ${esc(p.disputes.lost)}, void ${esc(p.disputes.void)}, open ${esc(p.disputes.open)}`],
      ["committee seats", `${esc(p.committee.seats)}: revealed ${esc(p.committee.revealed)}, missed ${esc(p.committee.missed)}, with the majority ${esc(p.committee.with_majority)}, with the minority ${esc(p.committee.with_minority)}`],
      ["penalties", `${amounts(p.penalties)} (total ${tokens(p.penalties_total)})`],
      ["earned", `${amounts(p.earned)} (total ${tokens(p.earned_total)})`]], `validator-pool-${p.pool_id}`);
  }
  const pts = earnings.points.map((p, i) => ({...p, i, earned_t: Number(BigInt(p.earned) / 10n ** 14n) / 1e4,
    lost_t: Number(BigInt(p.lost) / 10n ** 14n) / 1e4, net_t: Number(BigInt(p.net) / 10n ** 14n) / 1e4}));
  html += `<h2>Earnings over time</h2>` + (pts.length ? lineChart("earnings", pts, [
      {key: "earned_t", label: "earned (cumulative)", color: "#137333"}, {key: "lost_t", label: "lost (cumulative)", color: "#b3261e"},
      {key: "net_t", label: "net", color: "#1a73e8"}], "i", "event") : `<p class="muted" id="earnings">nothing earned or lost yet</p>`) +
    table("earnings-table", ["when", "block", "what", "change", "case"], earnings.points.map(p => [when(p.time), esc(p.block),
      esc(p.what), p.kind === "penalty" ? `<span class="reason">−${tokens(p.amount)}</span>` : `+${tokens(p.amount)}`,
      p.work_id ? caseLink(p.work_id) : "–"]));
  html += `<h2>Verdicts</h2>` + table("verdicts", ["case", "pool", "verdict", "state", "disputed by", "overturned", "earned", "lost"],
    verdicts.items.map(x => [caseLink(x.work_id), poolLink(x.pool_id), `${esc(x.verdict)} ${reason(x.reason)}`, status(x.state),
      validatorLink(x.disputer), x.overturned ? `<span class="reason overturned">overturned</span>` : yes(x.overturned),
      tokens(x.earned), tokens(x.lost)])) + pager("vverdicts", verdicts);
  return html;
}

// ------------------------------------------------------------------ a work, its reason, its case

function explanationHtml(x, id = "explanation") {
  if (!x) return "";
  if (x.kind !== "evidence") return `<p id="${id}">${esc(x.summary)}${x.validator ? ` — ${validatorLink(x.validator)}` : ""}</p>`;
  let html = `<div id="${id}">` + kv([
    ["failed check", `<b class="check">${esc(x.check)}</b> — ${esc(x.meaning)}`], ["reason", `${reason(x.reason)} (code ${esc(x.reason_code)})`],
    ["the validator's words", esc(x.summary)], ["by", validatorLink(x.validator)]]);
  html += failingHtml(x.failing_completions, x.failing_summary);
  html += table("measurements", ["measured", "completion", "chunk", "value", "rule", "threshold", "passes"],
    x.measurements.map(m => [esc(m.what), esc(m.completion ?? "–"), esc(m.chunk ?? "–"), sci(m.measured), esc(m.rule),
      typeof m.threshold === "object" && m.threshold !== null ? esc(JSON.stringify(m.threshold)) : sci(m.threshold),
      m.passes == null ? "–" : m.passes ? "yes" : `<span class="reason">no</span>`]), "no measured values in the document");
  if (x.spot_check) html += spotCheckHtml(x.spot_check, "spot-check");
  return html + `</div>`;
}
function failingHtml(completions, s) {  // counts, the worst few in a table, the rest one click away
  if (!completions.length) return `<p class="muted" id="failing-summary">no failing completion named</p>`;
  const chunks = c => esc(c.chunks.join(", ") || "–");
  const positions = c => c.positions.length ? esc(c.positions.slice(0, 16).join(", ")) + (c.positions.length > 16 ? "…" : "") : "–";
  const byIndex = new Map(completions.map(c => [c.completion, c]));
  const worst = s.worst.map(i => byIndex.get(i)).filter(c => c), rest = completions.filter(c => !s.worst.includes(c.completion));
  const row = c => [`#${esc(c.completion)}`, esc(c.chunks.length), chunks(c), positions(c)];
  const heads = ["completion", "failing chunks", "which", "token positions"];
  return `<h3>Failing completions</h3>` + kv([
      ["failing", `<b>${esc(s.completions)}</b> completion${s.completions === 1 ? "" : "s"}${s.of != null ? ` of ${esc(s.of)}` : ""}${s.checked != null ? ` (${esc(s.checked)} checked in full)` : ""}`],
      ["failing proof chunks", esc(s.chunks)],
      ["measured values that fail", s.by_check.map(b => `${esc(b.what)}: ${esc(b.failing)}`).join(" · ") || "–"]], "failing-summary") +
    table("failing-worst", heads, worst.map(row)) +
    (rest.length ? `<details id="failing-rest"><summary>the other ${rest.length} failing completion${rest.length === 1 ? "" : "s"}</summary>` +
      table("failing-rest-table", heads, rest.map(row)) + `</details>` : "");
}
function spotCheckHtml(s, id) {
  return `<h3>Spot check</h3>` + kv([["q", s.q == null ? "–" : `${num(100 * s.q, 1)} %`], ["completions", `n = ${esc(s.n)}, m = ${esc(s.m)} checked in full`],
    ["drawn completions", esc((s.indices || []).join(", ") || "–")],
    ["from", s.block_hash ? `hash of block ${esc(s.seed_block)} <span class="mono">${esc(s.block_hash)}</span> and the work id` : "every completion (q = 1)"],
    ["randomness", s.randomness ? `<span class="mono">${esc(s.randomness)}</span>` : "–"],
    ["re-derived here", s.verified == null ? "–" : s.verified ? `<span class="status-accepted">yes: the validator did not pick them</span>` : `<span class="reason">no: the draw does not match</span>`]], id);
}

async function workView(id) {
  const w = await api(`/api/works/${id}`);
  let html = `<h1>Submission <span class="mono">${short(w.work_id)}</span></h1>` + kv([
    ["work id", `<span class="mono">${esc(w.work_id)}</span>`], ["pool", poolLink(w.pool_id)],
    ["worker", workerLink(w.worker)], ["step", esc(w.step)], ["samples", esc(w.n_samples)], ["status", status(w.status)],
    ["court case", w.case_state ? caseLink(w.work_id, `${esc(w.case_state)} — committee, votes, payments`) : "–"],
    ["judged by", `<span id="judged-by">${w.judge ? validatorLink(w.judge) : w.validator ? `<span class="mono">${esc(w.validator)}</span>` : "–"}</span>`],
    ["reason", w.reason ? `<span class="reason" id="reason">${esc(w.reason)}</span>` : "–"],
    ["slashed", w.slashed ? tokens(w.slashed) : "–"]]);
  if (w.evidence) {
    const e = w.evidence, d = e.document;
    html += `<h2>Why: the evidence</h2><p class="muted">digest <span class="mono">${esc(e.digest)}</span> (on IPFS, named on-chain by the ${w.reason === "DISPUTE" ? "dispute" : "challenge"})</p>`;
    if (!d) html += `<p class="muted" id="evidence">not fetched from IPFS yet${e.error ? `: ${esc(e.error)}` : ""}</p>`;
    else html += `<div id="evidence">` + explanationHtml(w.explanation) +
      `<details><summary>the document as stored</summary><pre>${esc(JSON.stringify(d, null, 2))}</pre></details></div>`;
  }
  if (w.checks) {
    const c = w.checks;
    html += `<h2>Why accepted: the checks it passed</h2><div id="checks">` + kv([
      ["on all " + esc(c.n) + " completions", esc(c.all_completions.join(", "))],
      [`on ${esc(c.m)} drawn completions`, esc(c.spot_checks.join(", "))]]) +
      spotCheckHtml({...c, verified: c.indices ? true : null}, "checks-draw") + `</div>`;
  }
  if (w.case && w.case.disputes.length) {
    html += `<h2>Disputes</h2>` + w.case.disputes.map(d => `<p>${validatorLink(d.disputer)} disputed: ` +
      (d.resolved ? `the committee voted ${esc(d.resolved.votes_valid)} valid – ${esc(d.resolved.votes_invalid)} invalid; the verdict was ${d.resolved.overturned ? "<b>overturned</b>" : "upheld"}` : "open") +
      ` — ${caseLink(w.work_id, "the votes")}</p>` +
      // a dispute that decided the work is its evidence above already: once is enough
      (w.evidence && d.evidence_digest === w.evidence.digest ? "" : explanationHtml(d.evidence, "dispute-evidence"))).join("");
  }
  html += `<h2>Timeline</h2>` + timelineTable(w.timeline);
  return html;
}
function timelineTable(items) {
  return table("timeline", ["when", "+s", "block", "event", "what happened"], items.map(t => [when(t.time), esc(t.after_s),
    esc(t.block), esc(t.event), esc(t.text)]));
}

function deadlinesHtml(deadlines, outcome, now) {  // a final (or void) case counts down to nothing
  const note = t => outcome ? (t <= outcome.time ? "passed" : `not needed: the case was ${outcome.final === "void" ? "void" : "final"} first`)
    : now == null ? "" : now > t ? "passed" : `in ${t - now} s`;
  return (outcome ? `<p id="case-closed"><b>${outcome.final === "void" ? "void" : "final"}</b> since ${when(outcome.time)} (block ${esc(outcome.block)}): no deadline runs any more</p>` : "") +
    kv(Object.entries(deadlines).map(([k, t]) => [k.replaceAll("_", " "), `${when(t)}${note(t) ? ` <span class="muted">(${esc(note(t))})</span>` : ""}`]), "deadlines");
}

async function caseView(id) {
  const [c, timeline] = await Promise.all([api(`/api/cases/${id}`), api(`/api/works/${id}/timeline`)]);
  const d = c.deadlines, v = c.first_verdict;
  let html = `<h1>Case <span class="mono">${short(c.work_id)}</span> ${status(c.state)}</h1>` + kv([
    ["work", `${workLink(c.work_id)} (<a href="#/work/${esc(c.work_id)}">the reason</a>)`], ["pool", `${poolLink(c.pool_id)} (<a href="#/pool/${c.pool_id}/court">court</a>)`],
    ["worker", workerLink(c.worker)], ["submitted", `${when(c.submitted.time)}, block ${esc(c.submitted.block)}`],
    ["assigned to", `${validatorLink(c.assignment.validator)} — drawn from the hash of block ${esc(c.assignment.seed_block)} <span class="mono">${short(c.assignment.seed_block_hash)}</span> over the validators active at ${when(c.assignment.set_at_time)}`],
    ["first verdict", v ? `${v.accepted ? "attested" : "challenged " + reason(v.reason)} by ${validatorLink(v.judge)}${v.stand_in ? ` (standing in; the silent assignee lost ${tokens(v.silent_assignee_penalty)})` : ""}, ${when(v.time)}` : "none yet"],
    ["outcome", c.outcome ? (c.outcome.final === "void" ? `void: ${esc(c.outcome.why)}` : `final: ${esc(c.outcome.final)}; verdict fee ${tokens(c.outcome.fee)} to ${validatorLink(c.outcome.owner)}`) : "open"],
    ["in the pool", c.pool_verdict ? `${esc(c.pool_verdict.event)} ${reason(c.pool_verdict.reason)}` : "not yet"],
    ["worker slashed", c.worker_slashed ? `${tokens(c.worker_slashed.amount)} (bounty ${tokens(c.worker_slashed.bounty)})` : "–"],
    ["paid to the worker", c.paid ? `claimed in block ${esc(c.paid.block)}` : "–"]], "case") +
    `<h2>Deadlines</h2>` + deadlinesHtml(d, c.outcome, c.now);
  for (const dsp of c.disputes) {
    html += `<h2>Dispute by ${validatorLink(dsp.disputer)}</h2>` + kv([
      ["disputed", `${when(dsp.time)}, block ${esc(dsp.block)}`], ["evidence", `<a href="/api/evidence/${esc(dsp.evidence_digest)}">${short(dsp.evidence_digest)}</a>`],
      ["resolved", dsp.resolved ? `${esc(dsp.resolved.votes_valid)} valid – ${esc(dsp.resolved.votes_invalid)} invalid: the verdict is ${dsp.resolved.overturned ? `<b class="overturned">overturned</b>` : "upheld"}` : "not yet"]]);
    for (const com of dsp.committees) {
      const si = com.seed_inputs;
      html += `<h3>Committee</h3>` + kv([["drawn", `block ${esc(com.block)}`], ["dispute block", esc(si.dispute_block)],
        ["seed block", `${esc(si.seed_block)} <span class="mono">${esc(si.seed_block_hash ?? "")}</span>`],
        ["round", esc(si.round)], ["seed", `<span class="mono">${esc(si.seed ?? "–")}</span> = ${esc(si.rule)}`],
        ["drawn from", `validators active at ${when(si.set_at_time)}, ${esc(si.size)} seats; excluded: ${esc(si.excluded)}`]], "committee");
    }
    html += table("votes", ["member", "committed", "revealed", "vote", "with the majority", "penalty"],
      dsp.votes.map(x => [validatorLink(x.voter), x.committed ? `block ${esc(x.committed.block)}` : `<span class="reason">no</span>`,
        x.revealed ? `block ${esc(x.revealed.block)}` : `<span class="reason">no</span>`, esc(x.vote ?? "–"), yes(x.with_majority),
        x.penalty ? `<span class="reason">${tokens(x.penalty)}</span>` : "–"]), "no committee drawn yet");
  }
  html += `<h2>Who paid what</h2>` + table("penalties", ["lost", "why", "amount", "block"], c.penalties.map(p =>
      [validatorLink(p.party), esc(p.why), `<span class="reason">${tokens(p.amount)}</span>`, esc(p.block)]), "no validator penalised") +
    table("payments", ["credited", "for", "amount", "block"], c.payments.map(p => [validatorLink(p.to), esc(p.kind), tokens(p.amount), esc(p.block)]), "nobody credited yet");
  return html + `<h2>Timeline</h2>` + timelineTable(timeline);
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
  const key = encodeURIComponent(route[1] || "");
  try {
    const html = route[0] === "summary" ? await summaryView()
      : route[0] === "pool" && route[2] === "court" ? await courtView(key)
      : route[0] === "pool" && route[2] === "trainer" ? await trainerView(key)
      : route[0] === "pool" ? await poolView(key)
      : route[0] === "worker" ? await workerView(key)
      : route[0] === "validator" ? await validatorView(key)
      : route[0] === "work" ? await workView(key)
      : route[0] === "case" ? await caseView(key)
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
