// wqhost console: live overview (Server-Sent Events) and the dead-letter actions.
// Every value from the server is put in the page with textContent, never as HTML.
"use strict";

function csrf() {
  const m = document.querySelector('meta[name="csrf-token"]');
  return m ? m.content : "";
}

// visible shows the characters that would hide or reorder text as escapes (\u202e), as
// the server's pages and the CLI do: bidi controls, line and paragraph separators, and
// control characters other than line feeds and tabs.
function visible(text) {
  return String(text).replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g,
    (c) => {
      const h = c.charCodeAt(0).toString(16);
      return c.charCodeAt(0) < 0x80 ? "\\x" + h.padStart(2, "0") : "\\u" + h.padStart(4, "0");
    });
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function link(td, href, text) {
  const a = document.createElement("a");
  a.href = href;
  a.textContent = text;
  td.textContent = "";
  td.appendChild(a);
}

function renderRows(tbody, snap) {
  const rows = [];
  for (const r of snap.rows) {
    const tr = document.createElement("tr");
    tr.dataset.key = r.tenant + "/" + r.binding;
    cell(tr, r.tenant);
    link(cell(tr, ""), "/console/tenants/" + encodeURIComponent(r.tenant) + "/bindings/" + encodeURIComponent(r.binding), r.binding);
    cell(tr, r.queue);
    cell(tr, r.version, "mono");
    cell(tr, String(r.visible), "n visible");
    cell(tr, String(r.leased), "n leased");
    cell(tr, String(r.delayed), "n delayed");
    link(cell(tr, "", "n"), "/console/tenants/" + encodeURIComponent(r.tenant) + "/queues/" + encodeURIComponent(r.queue) + "/deadletters", String(r.dead));
    cell(tr, r.msg_per_sec.toFixed(1), "n rate");
    cell(tr, (r.failure_rate * 100).toFixed(1) + "%", "n failrate");
    cell(tr, String(r.workers), "n workers");
    cell(tr, r.scaling);
    cell(tr, r.breaker, "breaker-" + r.breaker);
    rows.push(tr);
  }
  tbody.replaceChildren(...rows);
}

// reservedCell is a budget's reserved memory: bytes, and against a limit a meter and a
// percentage (none when the budget is unlimited).
function reservedCell(tr, b) {
  const td = cell(tr, "", "n reserved");
  const bytes = document.createElement("span");
  bytes.className = "bytes";
  bytes.textContent = b.reserved;
  td.appendChild(bytes);
  if (b.fraction >= 0) {
    const m = document.createElement("meter");
    Object.assign(m, { min: 0, max: 1, low: 0.6, high: 0.85, optimum: 0, value: b.fraction });
    const pct = document.createElement("span");
    pct.className = "pct";
    pct.textContent = b.percent;
    td.append(" ", m, " ", pct);
  }
}

function consumerCells(tr, b) {
  for (const a of b.by_consumer) cell(tr, a.text, "n " + a.consumer);
}

// renderMemory redraws the Memory panel: the host's budget (its table is on the page for
// the host's session only) and one row per tenant.
function renderMemory(mem) {
  const host = document.getElementById("host-memory");
  if (host && mem.host) {
    const h = mem.host;
    const tr = document.createElement("tr");
    cell(tr, h.limit, "n limit");
    reservedCell(tr, h);
    consumerCells(tr, h);
    cell(tr, String(h.refused), "n refused");
    cell(tr, h.peak, "n peak");
    cell(tr, h.resident, "n resident");
    cell(tr, h.source, "source");
    host.tBodies[0].replaceChildren(tr);
  }
  const tenants = document.getElementById("tenant-memory");
  if (!tenants) return;
  const rows = [];
  for (const b of mem.tenants) {
    const tr = document.createElement("tr");
    tr.dataset.tenant = b.name;
    cell(tr, b.name);
    cell(tr, b.limit, "n limit");
    reservedCell(tr, b);
    consumerCells(tr, b);
    cell(tr, String(b.refused), "n refused");
    cell(tr, b.peak, "n peak");
    rows.push(tr);
  }
  tenants.tBodies[0].replaceChildren(...rows);
  tenants.dataset.updates = String(Number(tenants.dataset.updates || "0") + 1);
}

// renderBanner shows or hides the config reload banner as the host's state changes.
function renderBanner(host) {
  const banner = document.getElementById("config-banner");
  if (!banner) return;
  banner.hidden = !host.config_error;
  document.getElementById("config-banner-msg").textContent = host.config_error || "";
  document.getElementById("config-banner-at").textContent =
    host.config_error_at ? " at " + new Date(host.config_error_at).toISOString().slice(0, 19).replace("T", " ") + "Z" : "";
}

function startOverview() {
  const table = document.getElementById("bindings");
  if (!table) return;
  const state = document.getElementById("live-state");
  const updated = document.getElementById("updated");
  const es = new EventSource("/console/events?offset=" + encodeURIComponent(table.dataset.offset || "0"));
  es.addEventListener("snapshot", (ev) => {
    const snap = JSON.parse(ev.data);
    renderRows(table.tBodies[0], snap);
    if (snap.memory) renderMemory(snap.memory);
    renderBanner(snap.host || {});
    state.textContent = "live";
    updated.textContent = "updated " + new Date(snap.at).toISOString().slice(11, 19) + "Z";
    table.dataset.updates = String(Number(table.dataset.updates || "0") + 1);
  });
  es.addEventListener("failure", (ev) => {
    state.textContent = "error: " + JSON.parse(ev.data).error;
  });
  es.addEventListener("ended", () => {
    es.close();
    state.textContent = "session ended";
  });
  es.onerror = () => { state.textContent = "reconnecting…"; };
}

async function api(method, url, body) {
  const resp = await fetch(url, {
    method: method,
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  let data = {};
  try { data = await resp.json(); } catch (e) { data = { error: "unreadable answer" }; }
  return { status: resp.status, data: data };
}

function startDeadLetters() {
  const sec = document.getElementById("actions");
  if (!sec) return;
  const base = sec.dataset.api;
  const filter = JSON.parse(sec.dataset.filter || "{}");
  const countOut = document.getElementById("count-result");
  const result = document.getElementById("action-result");
  const redrive = document.getElementById("redrive");
  const purge = document.getElementById("purge");
  const confirmBox = document.getElementById("confirm");
  let counted = null;

  function fail(what, r) {
    result.textContent = what + " failed (" + r.status + "): " + visible(r.data.error || JSON.stringify(r.data));
    result.dataset.status = String(r.status);
  }

  document.getElementById("count").addEventListener("click", async () => {
    countOut.textContent = "counting…";
    const r = await api("POST", base + "/count", { filter: filter });
    if (r.status !== 200) { countOut.textContent = ""; fail("Count", r); return; }
    counted = r.data.count;
    countOut.textContent = counted + " dead letters match";
    countOut.dataset.count = String(counted);
    redrive.disabled = purge.disabled = counted === 0;
  });

  redrive.addEventListener("click", async () => {
    const rate = Number(document.getElementById("rate").value) || 100;
    const r = await api("POST", base + "/redrive", { filter: filter, rate: rate, expect: counted });
    if (r.status !== 202 && r.status !== 200) { fail("Redrive", r); return; }
    redrive.disabled = purge.disabled = true;
    poll(r.data.job);
  });

  async function poll(job) {
    const box = document.getElementById("job");
    const bar = document.getElementById("progress");
    const st = document.getElementById("job-state");
    box.hidden = false;
    for (;;) {
      const r = await api("GET", "/console/api/jobs/" + encodeURIComponent(job));
      if (r.status !== 200) { fail("Redrive progress", r); return; }
      const j = r.data;
      bar.max = Math.max(j.matched || 0, 1);
      bar.value = (j.done || 0) + (j.failed || 0);
      st.textContent = j.state + ": " + (j.done || 0) + " of " + (j.matched || 0) + " redriven" +
        (j.failed ? ", " + j.failed + " failed" : "") + (j.error ? " (" + visible(j.error) + ")" : "");
      st.dataset.state = j.state;
      if (j.state !== "running" && j.state !== "pending") {
        result.textContent = "Redrive " + j.state + ": " + (j.done || 0) + " redriven.";
        return;
      }
      await new Promise((res) => setTimeout(res, 500));
    }
  }

  purge.addEventListener("click", () => {
    document.getElementById("confirm-text").textContent =
      "Purge " + counted + " dead letters for good? They cannot be brought back.";
    confirmBox.hidden = false;
  });
  document.getElementById("confirm-no").addEventListener("click", () => { confirmBox.hidden = true; });
  document.getElementById("confirm-yes").addEventListener("click", async () => {
    confirmBox.hidden = true;
    const r = await api("POST", base + "/purge", { filter: filter, expect: counted });
    if (r.status === 409) {
      counted = r.data.count;
      countOut.textContent = counted + " dead letters match now";
      result.textContent = "The count changed since the dry run; check it and confirm again.";
      return;
    }
    if (r.status !== 200) { fail("Purge", r); return; }
    result.textContent = "Purged " + r.data.purged + " dead letters.";
    result.dataset.purged = String(r.data.purged);
    redrive.disabled = purge.disabled = true;
  });
}

document.addEventListener("DOMContentLoaded", () => {
  startOverview();
  startDeadLetters();
});
