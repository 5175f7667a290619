// Warmpath routing dashboard: renders the gateway's JSON snapshots, streamed as
// server-sent events from /dashboard/events (one per second). No dependencies.
"use strict";

const state = { updates: 0, last: null, open: new Set() };
window.warmpathDashboard = state;

const $ = (id) => document.getElementById(id);
const fmtInt = (n) => (n == null ? "–" : Math.round(n).toLocaleString("en-US"));
const fmtPct = (x) => (x == null ? "–" : (100 * x).toFixed(1) + "%");
const esc = (s) => String(s).replace(/[&<>"']/g, (c) =>
  ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
const rid = (n) => "r" + n;

function setRows(tbody, rows, emptyText, cols) {
  tbody.innerHTML = rows.length ? rows.join("") :
    `<tr class="empty"><td colspan="${cols}">${esc(emptyText)}</td></tr>`;
}

function bar(x) {
  const w = x == null ? 0 : Math.max(0, Math.min(1, x)) * 100;
  return `<span class="bar"><i style="width:${w.toFixed(1)}%"></i></span>`;
}

function renderTotals(s) {
  const t = s.totals;
  $("policy").textContent = s.policy;
  $("hit-rate").textContent = fmtPct(t.hit_rate);
  $("local-hit-rate").textContent = fmtPct(t.local_hit_rate);
  $("tier-hit-rate").textContent = fmtPct(t.tier_hit_rate);
  $("predicted-total").textContent = fmtInt(t.predicted_cached_tokens);
  $("actual-total").textContent = fmtInt(t.actual_cached_tokens);
  $("requests-total").textContent = fmtInt(t.requests);
  $("shed-total").textContent = fmtInt(t.shed);
  $("retries-total").textContent = fmtInt(t.retries);
  $("queued-now").textContent = fmtInt(t.queued);
}

function renderReplicas(s) {
  const rows = s.replicas.map((r) => `<tr data-replica="${esc(r.label)}">
    <td><b>${esc(r.label)}</b> <span class="sub">${esc(r.url)} · ${esc(r.model)} · ${esc(r.engine)}${r.role === "both" ? "" : ` · <span class="role">${esc(r.role)}</span>`}</span></td>
    <td class="health-${esc(r.health)}">${esc(r.health)}${r.consecutive_failures ? ` (${r.consecutive_failures} failures)` : ""}</td>
    <td>${fmtInt(r.in_flight)}</td>
    <td>${fmtInt(r.running)} / ${fmtInt(r.waiting)}</td>
    <td>${bar(r.kv_usage)}${fmtPct(r.kv_usage)} <span class="sub">${fmtInt(r.kv_used_blocks)}/${fmtInt(r.kv_total_blocks)}</span></td>
    <td>${fmtInt(r.indexed_blocks)}</td>
    <td>${fmtInt(r.requests)}</td>
    <td class="hit">${bar(r.hit_rate)}${fmtPct(r.hit_rate)}</td>
    <td class="split">${fmtPct(r.local_hit_rate)} / <span class="tier">${fmtPct(r.tier_hit_rate)}</span></td>
    <td>${fmtInt(r.tokens.predicted_cached_tokens)} / ${fmtInt(r.tokens.cached_tokens)}</td></tr>`);
  setRows($("replicas").tBodies[0], rows, "no replica registered yet", 10);
}

function renderTenants(s) {
  const rows = s.tenants.map((t) => `<tr data-tenant="${esc(t.id)}"><td><b>${esc(t.id)}</b></td>
    <td>${fmtInt(t.requests)}</td><td>${fmtInt(t.prompt_tokens)}</td>
    <td>${fmtInt(t.completion_tokens)}</td><td>${fmtInt(t.rejections)}</td></tr>`);
  setRows($("tenants").tBodies[0], rows, "no traffic yet", 5);
}

function renderCheckpoints(s) {
  const rows = s.checkpoints.map((c) => `<tr data-checkpoint="${esc(c.checkpoint)}"><td>${esc(c.model)}</td>
    <td><b>${esc(c.checkpoint)}</b></td><td>${c.rollout_role ? esc(c.rollout_role) : ""}</td>
    <td>${fmtInt(c.replicas)}</td><td>${fmtInt(c.requests)}</td>
    <td class="hit">${bar(c.hit_rate)}${fmtPct(c.hit_rate)}</td>
    <td>${fmtInt(c.cached_tokens)} / ${fmtInt(c.prompt_tokens)}</td></tr>`);
  setRows($("checkpoints").tBodies[0], rows, "no replica registered yet", 7);
  $("rollouts").innerHTML = s.rollouts.map((r) => `<p data-rollout="${esc(r.model)}">rollout of <b>${esc(r.model)}</b>:
    ${esc(r.from)} → ${esc(r.to)}, <b>${esc(r.state)}</b>, share ${r.share_percent.toFixed(1)}% of target ${r.target_percent.toFixed(1)}%,
    pre-warm ${fmtInt(r.progress.done)}/${fmtInt(r.progress.planned)} replays${r.progress.failed ? ` (${fmtInt(r.progress.failed)} failed)` : ""}</p>`).join("");
}

// One line: why the chosen replica won, from the policy's explanation.
function why(d) {
  const e = d.decision.explanation;
  const parts = e.candidates.map((c) => {
    const mark = c.replica === d.decision.replica ? "→ " : "";
    return `${mark}${rid(c.replica)}: ${c.matched_blocks} blocks${c.precise ? "" : " (approx)"}, ${c.cost_ms.toFixed(1)} ms`;
  });
  const g = e.region;
  const spill = g && g.spilled_to ? `spilled ${g.home} → ${g.spilled_to} (${g.reason}, RTT ${g.rtt_ms.toFixed(0)} ms) · ` : "";
  const p = e.prefill;
  const split = p ? `prefill on ${rid(p.replica)} (${p.predicted_cached_blocks} blocks cached, ${p.uncached_tokens} tok to compute), decode on ${rid(d.decision.replica)} · ` : "";
  const waited = d.queued_ms > 0 ? `waited ${fmtInt(d.queued_ms)} ms in ${d.class} queue (replicas full) · ` : "";
  return waited + split + spill + parts.join(" · ");
}

// The prefill side of a split request: the prefill candidates and the choice.
function prefill(p) {
  if (!p) return "";
  const c = p.candidates.map((c) => `${c.replica === p.replica ? "→ " : ""}${rid(c.replica)}: ${c.matched_blocks} blocks, ${c.cost_ms.toFixed(1)} ms`);
  return ` · <span class="prefill">prefill/decode split: prefill on <b>${rid(p.replica)}</b> (${esc(p.branch)}; ${esc(c.join(" · "))})</span>`;
}

// The regional comparison of a decision, when the policy weighed other regions.
function region(g) {
  if (!g) return "";
  const ms = (v) => (v == null ? "none" : `${v.toFixed(1)} ms`);
  return ` · home ${esc(g.home)}: local TTFT ${ms(g.local_ttft_ms)}, best remote ${ms(g.remote_ttft_ms)} (RTT ${g.rtt_ms.toFixed(0)} ms)` +
    (g.spilled_to ? ` → spilled to ${esc(g.spilled_to)} (${esc(g.reason)})` : " → stayed home");
}

function detail(d) {
  const e = d.decision.explanation;
  const names = [...new Set(e.candidates.flatMap((c) => Object.keys(c.terms)))];
  const head = `<tr><th>candidate</th><th>matched blocks</th><th>source</th><th>cost (ms)</th>${names.map((n) => `<th>${esc(n)}</th>`).join("")}</tr>`;
  const body = e.candidates.map((c) => `<tr><td class="${c.replica === d.decision.replica ? "chosen" : ""}">${rid(c.replica)}</td>
    <td>${c.matched_blocks}</td><td>${c.precise ? "KV events" : "recent routes"}</td><td>${c.cost_ms.toFixed(2)}</td>
    ${names.map((n) => `<td>${c.terms[n] == null ? "" : Number(c.terms[n]).toFixed(2)}</td>`).join("")}</tr>`).join("");
  const fb = d.decision.fallbacks.map(rid).join(", ") || "none";
  return `<tr class="detail"><td colspan="8">request ${esc(d.request_id)} · ${esc(d.endpoint)} · model ${esc(d.model)} ·
    ${d.blocks} full blocks · policy ${esc(e.policy)} · fallbacks ${esc(fb)}${region(e.region)}${prefill(e.prefill)}
    <table>${head}${body}</table></td></tr>`;
}

function renderDecisions(s) {
  const rows = s.decisions.map((d) => {
    const t = new Date(d.unix_ms).toLocaleTimeString("en-GB", { hour12: false });
    const main = `<tr class="decision" data-request="${esc(d.request_id)}"><td>${t}</td><td>${esc(d.tenant)}</td>
      <td>${fmtInt(d.prompt_tokens)} tok</td><td class="chosen">${rid(d.decision.replica)}</td>
      <td><span class="branch ${esc(d.decision.explanation.branch)}">${esc(d.decision.explanation.branch)}</span></td>
      <td>${fmtInt(d.decision.predicted_cached_blocks)}</td><td class="why">${esc(why(d))}</td>
      <td>${d.prepare_us + d.select_us} µs</td></tr>`;
    return state.open.has(d.request_id) ? main + detail(d) : main;
  });
  setRows($("decisions").tBodies[0], rows, "no routing decision yet", 8);
}

// Per-second rates from the cumulative history points.
function rates(history) {
  const out = [];
  for (let i = 1; i < history.length; i++) {
    const a = history[i - 1], b = history[i];
    const dt = Math.max(0.001, (b.unix_ms - a.unix_ms) / 1000);
    out.push({ t: b.unix_ms, predicted: (b.predicted - a.predicted) / dt,
      actual: (b.actual - a.actual) / dt, tier: ((b.tier || 0) - (a.tier || 0)) / dt,
      prompt: (b.prompt - a.prompt) / dt });
  }
  return out;
}

function renderChart(s) {
  const c = $("chart"), g = c.getContext("2d");
  const W = c.width = c.clientWidth || 1100, H = c.height = 220, pad = 36;
  const css = getComputedStyle(document.documentElement);
  g.clearRect(0, 0, W, H);
  const pts = rates(s.history);
  const max = Math.max(1, ...pts.map((p) => Math.max(p.predicted, p.actual, p.prompt)));
  g.strokeStyle = css.getPropertyValue("--line"); g.fillStyle = css.getPropertyValue("--dim");
  g.font = "11px system-ui"; g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = H - pad + 10 - (i / 4) * (H - pad);
    g.beginPath(); g.moveTo(pad, y); g.lineTo(W - 8, y); g.stroke();
    g.fillText(fmtInt((i / 4) * max), 2, y + 4);
  }
  if (pts.length < 2) { g.fillText("waiting for traffic…", W / 2 - 50, H / 2); return; }
  const t0 = pts[0].t, t1 = pts[pts.length - 1].t, span = Math.max(1, t1 - t0);
  const x = (t) => pad + ((t - t0) / span) * (W - pad - 8);
  const y = (v) => H - pad + 10 - (v / max) * (H - pad);
  for (const [key, color, width] of [["prompt", "--prompt", 1], ["predicted", "--pred", 2], ["actual", "--act", 2], ["tier", "--tier", 2]]) {
    g.strokeStyle = css.getPropertyValue(color); g.lineWidth = width; g.beginPath();
    pts.forEach((p, i) => (i ? g.lineTo(x(p.t), y(p[key])) : g.moveTo(x(p.t), y(p[key]))));
    g.stroke();
  }
  g.fillStyle = css.getPropertyValue("--dim");
  g.fillText(`last ${Math.round(span / 1000)} s`, W - 70, H - 4);
}

function render(s) {
  state.last = s; state.updates += 1;
  renderTotals(s); renderReplicas(s); renderTenants(s); renderCheckpoints(s); renderDecisions(s); renderChart(s);
  $("updated").textContent = new Date(s.unix_ms).toLocaleTimeString("en-GB", { hour12: false });
  document.body.dataset.updates = String(state.updates);
}

$("decisions").addEventListener("click", (ev) => {
  const tr = ev.target.closest("tr.decision");
  if (!tr) return;
  const id = tr.dataset.request;
  if (state.open.has(id)) state.open.delete(id); else state.open.add(id);
  if (state.last) renderDecisions(state.last);
});

function setStatus(text, cls) { const el = $("status"); el.textContent = text; el.className = "status " + cls; }

function connect() {
  const es = new EventSource("/dashboard/events");
  es.addEventListener("open", () => setStatus("live", "live"));
  es.addEventListener("snapshot", (ev) => { setStatus("live", "live"); render(JSON.parse(ev.data)); });
  es.addEventListener("error", () => {
    setStatus("reconnecting", es.readyState === 2 ? "down" : "connecting");
    // A session that ended (expired, logged out, new admin key) goes back to the login page.
    fetch("/dashboard/snapshot.json").then((r) => { if (r.status === 401) window.location.assign("/dashboard/login"); }).catch(() => {});
  });
}

fetch("/dashboard/snapshot.json").then((r) => {
  if (r.status === 401) { window.location.assign("/dashboard/login"); throw new Error("login"); }
  return r.json();
}).then(render).catch(() => {});
connect();
