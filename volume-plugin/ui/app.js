// esbx's dashboard: plain script, no build step, nothing from elsewhere.
//
// The token lives in this closure only: never in a URL, a cookie or
// storage; every request sends it in the Authorization header.  Whatever
// comes from the store (names, labels, messages, file contents, command
// lines, logs) is put on the page as text (textContent), never as markup,
// and with its control characters shown as escapes; very long lines are
// cut for display.
"use strict";
(function () {
  let token = null;
  let whoami = null;
  let view = "swarm";
  let current = { session: null, request: null, project: null };
  const LINE_SHOWN = 4000;
  const LOG_SHOWN = 512 * 1024;
  const DIFF_LINES = 3000;

  const $ = (id) => document.getElementById(id);

  // ---- safe text ------------------------------------------------------

  // TEXT as nodes: control characters (ANSI escapes included) as visible
  // \xNN, lines longer than LINE_SHOWN cut with a note.
  function textNodes(text, limit) {
    const frag = document.createDocumentFragment();
    let s = String(text === undefined || text === null ? "" : text);
    let cut = 0;
    const max = limit || LINE_SHOWN;
    if (s.length > max) {
      cut = s.length - max;
      s = s.slice(0, max);
    }
    const re = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
    let at = 0;
    let m;
    while ((m = re.exec(s)) !== null) {
      if (m.index > at) frag.appendChild(document.createTextNode(s.slice(at, m.index)));
      const e = document.createElement("span");
      e.className = "esc";
      e.textContent = "\\x" + m[0].charCodeAt(0).toString(16).padStart(2, "0");
      frag.appendChild(e);
      at = m.index + 1;
    }
    if (at < s.length) frag.appendChild(document.createTextNode(s.slice(at)));
    if (cut > 0) {
      const c = document.createElement("span");
      c.className = "cut";
      c.textContent = " \u2026 [" + cut + " more characters]";
      frag.appendChild(c);
    }
    return frag;
  }

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.appendChild(textNodes(text));
    return e;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function cell(row, text, cls) {
    const td = el("td", text, cls);
    row.appendChild(td);
    return td;
  }

  function linkButton(text, onclick) {
    const b = el("button", text, "link");
    b.type = "button";
    b.addEventListener("click", onclick);
    return b;
  }

  function labelsText(labels) {
    return Object.keys(labels || {}).map((k) => k + "=" + labels[k]).join(" ");
  }

  function duration(s) {
    if (s === undefined || s === null || s < 0) return "";
    if (s < 120) return s + "s";
    if (s < 7200) return Math.floor(s / 60) + "m";
    if (s < 172800) return Math.floor(s / 3600) + "h";
    return Math.floor(s / 86400) + "d";
  }

  function bytes(n) {
    if (n === undefined || n === null || n < 0) return "";
    const u = ["B", "KiB", "MiB", "GiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + " " + u[i];
  }

  // ---- the gateway ------------------------------------------------------

  async function api(path, opts) {
    const o = opts || {};
    const headers = { Authorization: "Bearer " + token };
    if (o.body !== undefined) headers["Content-Type"] = "application/json";
    const r = await fetch(path, {
      method: o.method || "GET",
      headers,
      body: o.body !== undefined ? JSON.stringify(o.body) : undefined,
      credentials: "omit",
      cache: "no-store",
      redirect: "error",
      referrerPolicy: "no-referrer",
    });
    if (o.raw) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.text();
    }
    let doc = null;
    try { doc = await r.json(); } catch (e) { doc = null; }
    if (!r.ok) throw new Error((doc && doc.error) || "HTTP " + r.status);
    return doc;
  }

  const q = encodeURIComponent;

  // ---- live updates (server-sent events, read with fetch so that the
  // token goes in a header: EventSource cannot send one) -------------------

  let streamAbort = null;
  let pending = null;

  function refreshSoon() {
    if (pending) return;
    pending = setTimeout(() => { pending = null; render(); }, 300);
  }

  async function stream() {
    const live = $("live");
    for (;;) {
      if (!token) return;
      try {
        streamAbort = new AbortController();
        const r = await fetch("/v1/ui/stream", {
          headers: { Authorization: "Bearer " + token },
          credentials: "omit",
          cache: "no-store",
          signal: streamAbort.signal,
        });
        if (!r.ok || !r.body) throw new Error("HTTP " + r.status);
        live.textContent = "live";
        live.className = "live on";
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let end;
          while ((end = buf.indexOf("\n\n")) >= 0) {
            const frame = buf.slice(0, end);
            buf = buf.slice(end + 2);
            let type = "message";
            let data = "";
            for (const line of frame.split("\n")) {
              if (line.startsWith("event: ")) type = line.slice(7);
              else if (line.startsWith("data: ")) data += line.slice(6);
            }
            onEvent(type, data);
          }
        }
      } catch (e) {
        if (!token) return;
      }
      live.textContent = "offline";
      live.className = "live off";
      await new Promise((res) => setTimeout(res, 1000));
    }
  }

  function onEvent(type, data) {
    let ev = null;
    try { ev = JSON.parse(data); } catch (e) { return; }
    if (type === "tick" && view === "swarm") refreshSoon();
    else if (type === "session") {
      if (view === "swarm" || (view === "session" && ev.session === current.session)) refreshSoon();
    } else if (type === "queue") {
      if (view === "queue" || view === "history") refreshSoon();
    }
  }

  // ---- views ------------------------------------------------------------

  function show(name) {
    view = name;
    for (const s of document.querySelectorAll("section.view")) s.hidden = s.id !== "view-" + name;
    for (const b of document.querySelectorAll("nav button.tab"))
      b.classList.toggle("active", b.dataset.view === name);
    $("diff").hidden = true;
    for (const k of Object.keys(drawn)) delete drawn[k];
    render();
  }

  async function render() {
    try {
      if (view === "swarm") await renderSwarm();
      else if (view === "session") await renderSession();
      else if (view === "queue") await renderQueue();
      else if (view === "history") await renderHistory();
    } catch (e) {
      console.log("esbx: " + e.message);
    }
  }

  function chart(samples) {
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("class", "chart");
    svg.setAttribute("viewBox", "0 0 120 28");
    const pts = (samples || []).slice(-60);
    const line = (key, cls, max) => {
      const p = document.createElementNS(ns, "polyline");
      p.setAttribute("class", cls);
      const top = max || Math.max(1, ...pts.map((s) => Number(s[key]) || 0));
      p.setAttribute("points", pts.map((s, i) => {
        const x = pts.length > 1 ? (i * 118) / (pts.length - 1) + 1 : 1;
        const y = 27 - (Math.max(0, Number(s[key]) || 0) / top) * 26;
        return x.toFixed(1) + "," + y.toFixed(1);
      }).join(" "));
      svg.appendChild(p);
    };
    line("memory", "mem");
    line("cpu", "cpu", 1000);
    const title = document.createElementNS(ns, "title");
    title.textContent = "memory (blue) and CPU (yellow), last " + pts.length + " samples";
    svg.appendChild(title);
    return svg;
  }

  // Rows are kept per session and their cells written again in place, so
  // that what the operator points at stays under the pointer.
  async function renderSwarm() {
    const rows = await api("/v1/ui/swarm");
    const tb = $("swarm").tBodies[0];
    const keep = new Set(rows.map((s) => s.name));
    for (const tr of [...tb.rows]) if (!keep.has(tr.dataset.session)) tr.remove();
    rows.forEach((s, i) => {
      let tr = [...tb.rows].find((r) => r.dataset.session === s.name);
      if (!tr) {
        tr = document.createElement("tr");
        tr.dataset.session = s.name;
        const td = document.createElement("td");
        td.appendChild(linkButton(s.name, () => openSession(s.name)));
        tr.appendChild(td);
        for (let k = 0; k < 9; k++) tr.appendChild(document.createElement("td"));
      }
      if (tb.rows[i] !== tr) tb.insertBefore(tr, tb.rows[i] || null);
      const rt = s.runtime || {};
      const last = (s.samples || [])[(s.samples || []).length - 1];
      const texts = [
        s.project, labelsText(s.labels), rt.holder ? "running" : s.mounted ? "mounted" : "at rest",
        duration(s.lifetime && s.lifetime.age), duration(s.lifetime && s.lifetime.idle),
        rt.memory ? bytes(rt.memory.current) : "",
        last && last.cpu >= 0 ? (last.cpu / 10).toFixed(1) + "%" : "",
        rt.pids && rt.pids.current !== null && rt.pids.current !== undefined ? String(rt.pids.current) : "",
      ];
      texts.forEach((t, k) => {
        const td = tr.cells[k + 1];
        if (td.textContent !== t) {
          clear(td);
          td.appendChild(textNodes(t));
        }
      });
      tr.cells[3].className = rt.holder ? "running" : "";
      const c = tr.cells[9];
      clear(c);
      c.appendChild(chart(s.samples));
    });
  }

  function openSession(name) {
    current.session = name;
    show("session");
  }

  function kindLetter(k) {
    return k === "added" ? "A" : k === "deleted" ? "D" : "M";
  }

  function changeList(ul, changes, open) {
    clear(ul);
    for (const c of changes) {
      const li = document.createElement("li");
      const k = kindLetter(c.kind);
      li.appendChild(el("span", k, "kind kind-" + k));
      if (c.type === "file" && c.kind !== "deleted") li.appendChild(linkButton(c.path, () => open(c)));
      else li.appendChild(el("span", c.path + (c.type === "directory" ? "/" : "")));
      ul.appendChild(li);
    }
  }

  // A view is drawn again only when what it shows changed: the page does
  // not flicker under live updates, and what the operator points at stays.
  const drawn = {};
  function changed(key, data) {
    const sig = JSON.stringify(data);
    if (drawn[key] === sig) return false;
    drawn[key] = sig;
    return true;
  }

  async function renderSession() {
    const name = current.session;
    $("session-name").textContent = name;
    const s = await api("/v1/sessions/" + q(name));
    const evs0 = (await api("/v1/sessions/" + q(name) + "/events")).events || [];
    const changes0 = await api("/v1/sessions/" + q(name) + "/diff");
    if (!changed("session", [s, evs0, changes0])) return;
    const info = $("session-info");
    clear(info);
    info.appendChild(textNodes("project " + s.project + " \u00b7 base " + s.base + " \u00b7 " + labelsText(s.labels)));
    const evs = evs0;
    const tb = $("timeline").tBodies[0];
    clear(tb);
    const refused = $("refusals");
    clear(refused);
    for (const ev of evs) {
      if (ev.type === "exec") {
        const tr = document.createElement("tr");
        cell(tr, ev.started || ev.time);
        cell(tr, (ev.argv || []).join(" "), "cmd");
        cell(tr, ev.exit_status === undefined ? (ev.error || "") : String(ev.exit_status));
        const t0 = Date.parse(ev.started), t1 = Date.parse(ev.ended);
        cell(tr, isFinite(t0) && isFinite(t1) ? ((t1 - t0) / 1000).toFixed(2) + " s" : "");
        tb.appendChild(tr);
      } else if (String(ev.type).startsWith("egress.")) {
        refused.appendChild(el("li", ev.time + " " + ev.type + " " + (ev.name || ev.address || ev.destination || "") + (ev.port ? ":" + ev.port : "")));
      }
    }
    const changes = changes0;
    const against = (s.published && s.published.length) ? s.published[s.published.length - 1] : s.base;
    changeList($("session-changes"), changes, (c) =>
      sideBySide(c.path, c.kind === "added" ? null : "/v1/projects/" + q(s.project) + "/show?layer=" + q(against) + "&path=" + q(c.path),
        "/v1/sessions/" + q(name) + "/files?path=" + q(c.path), "layer " + against.slice(0, 12), "session " + name));
  }

  // ---- side by side -----------------------------------------------------

  function splitLines(t) {
    if (t === null || t === undefined) return [];
    const l = t.split("\n");
    if (l.length && l[l.length - 1] === "") l.pop();
    return l;
  }

  // Rows [left index|-1, right index|-1] of a line diff (LCS), for files
  // of at most DIFF_LINES lines; longer ones line by line.
  function align(a, b) {
    const rows = [];
    if (a.length > DIFF_LINES || b.length > DIFF_LINES || a.length * b.length > 4e6) {
      for (let i = 0; i < Math.max(a.length, b.length); i++)
        rows.push([i < a.length ? i : -1, i < b.length ? i : -1]);
      return rows;
    }
    const n = a.length, m = b.length;
    const L = [];
    for (let i = 0; i <= n; i++) L.push(new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--)
      for (let j = m - 1; j >= 0; j--)
        L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    let i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[i] === b[j]) rows.push([i++, j++]);
      else if (j < m && (i >= n || L[i][j + 1] >= L[i + 1][j])) rows.push([-1, j++]);
      else rows.push([i++, -1]);
    }
    return rows;
  }

  async function fetchText(path) {
    if (!path) return "";
    return api(path, { raw: true });
  }

  async function sideBySide(path, leftPath, rightPath, leftName, rightName) {
    $("diff").hidden = false;
    $("diff-path").textContent = path;
    $("diff-left").textContent = leftName;
    $("diff-right").textContent = rightName;
    const note = $("diff-note");
    note.textContent = "";
    const tb = $("diff-table").tBodies[0];
    clear(tb);
    let left = "", right = "";
    try {
      [left, right] = await Promise.all([fetchText(leftPath), fetchText(rightPath)]);
    } catch (e) {
      note.textContent = "The contents cannot be read with this token (" + e.message + "): it needs the runtime scope.";
      return;
    }
    const a = splitLines(left), b = splitLines(right);
    const rows = align(a, b);
    let shown = 0;
    for (const [x, y] of rows) {
      if (shown++ > 20000) { note.textContent = "Only the first 20,000 rows are shown."; break; }
      const tr = document.createElement("tr");
      tr.className = x < 0 ? "add" : y < 0 ? "del" : a[x] === b[y] ? "same" : "chg";
      cell(tr, x >= 0 ? String(x + 1) : "", "num");
      cell(tr, x >= 0 ? a[x] : "", "l");
      cell(tr, y >= 0 ? String(y + 1) : "", "num");
      cell(tr, y >= 0 ? b[y] : "", "r");
      tb.appendChild(tr);
    }
    $("diff").scrollIntoView();
  }

  // ---- queue ------------------------------------------------------------

  async function projects(select) {
    const list = await api("/v1/projects");
    const have = select.value;
    clear(select);
    for (const p of list) {
      const o = el("option", p.name);
      o.value = p.name;
      select.appendChild(o);
    }
    if (have && list.some((p) => p.name === have)) select.value = have;
    return select.value;
  }

  async function renderQueue() {
    const project = await projects($("queue-project"));
    if (!project) return;
    const all = $("queue-all").checked ? "1" : "0";
    const reqs = await api("/v1/requests?project=" + q(project) + "&all=" + all);
    if (current.request) await renderRequest();
    if (!changed("queue", [project, reqs])) return;
    const tb = $("queue").tBodies[0];
    clear(tb);
    for (const r of reqs) {
      const tr = document.createElement("tr");
      tr.dataset.request = r.id;
      const td = document.createElement("td");
      td.appendChild(linkButton(r.id, () => { current.request = r.id; delete drawn.request; renderRequest(); }));
      tr.appendChild(td);
      cell(tr, r.session);
      cell(tr, r.state, "state state-" + r.state);
      cell(tr, (r.approvals || []).length + "/" + (r.approvals_needed || 0));
      cell(tr, String(r.runs || 0));
      cell(tr, r.filed);
      cell(tr, r.message);
      tb.appendChild(tr);
    }
  }

  async function renderRequest() {
    const id = current.request;
    let r, text = "";
    try { r = await api("/v1/requests/" + q(id)); } catch (e) { $("request").hidden = true; return; }
    try { text = await api("/v1/requests/" + q(id) + "/log", { raw: true }); } catch (e) { text = ""; }
    if (!changed("request", [r, text])) return;
    $("request").hidden = false;
    $("request-id").textContent = id;
    const st = $("request-state");
    st.textContent = r.state;
    st.className = "state state-" + r.state;
    clear($("request-message"));
    $("request-message").appendChild(textNodes((r.message || "") + " \u2014 session " + r.session + ", filed by " + r.filed_by));
    clear($("request-rejected"));
    if (r.rejected) $("request-rejected").appendChild(textNodes(r.rejected.kind + ": " + r.rejected.message));
    const canReview = r.state === "review" && whoami && String(whoami.scopes || "").includes("manage");
    $("approve").disabled = !canReview;
    $("reject").disabled = !(whoami && String(whoami.scopes || "").includes("manage")) || ["landed", "rejected", "cancelled"].includes(r.state);
    changeList($("request-changes"), r.changes || [], (c) =>
      sideBySide(c.path, c.kind === "added" ? null : "/v1/projects/" + q(r.project) + "/show?layer=" + q(r.base) + "&path=" + q(c.path),
        "/v1/requests/" + q(id) + "/file?path=" + q(c.path), "base " + r.base.slice(0, 12), "request " + id));
    const log = $("request-log");
    clear(log);
    {
      for (const line of splitLines(text.length > LOG_SHOWN ? text.slice(-LOG_SHOWN) : text)) {
        log.appendChild(textNodes(line));
        log.appendChild(document.createTextNode("\n"));
      }
      log.scrollTop = log.scrollHeight;
    }
  }

  async function review(verb) {
    const id = current.request;
    const out = $("review-result");
    out.textContent = "";
    try {
      const msg = $("review-message").value;
      await api("/v1/requests/" + q(id) + "/" + verb, { method: "POST", body: msg ? { message: msg } : {} });
      out.textContent = verb === "approve" ? "approved" : "rejected";
      $("review-message").value = "";
    } catch (e) {
      out.textContent = e.message;
      out.className = "error";
    }
    await renderQueue();
  }

  // ---- history ------------------------------------------------------------

  async function renderHistory() {
    const project = await projects($("history-project"));
    if (!project) return;
    const layers = await api("/v1/projects/" + q(project) + "/log");
    if (!changed("history", [project, layers])) return;
    const tb = $("layers").tBodies[0];
    clear(tb);
    for (const l of layers) {
      const tr = document.createElement("tr");
      tr.dataset.layer = l.id;
      cell(tr, String(l.index));
      cell(tr, l.id);
      cell(tr, l.session || "");
      cell(tr, labelsText(l.labels));
      cell(tr, l.message);
      cell(tr, l.gate ? (l.gate.approvals || []).map((a) => a.by + " at " + a.at).join(", ") || "checks: " + l.gate.request : "");
      cell(tr, l.created);
      tb.appendChild(tr);
    }
  }

  async function blame(ev) {
    ev.preventDefault();
    const out = $("blame-result");
    clear(out);
    try {
      const l = await api("/v1/projects/" + q($("history-project").value) + "/blame?path=" + q($("blame-path").value));
      out.appendChild(textNodes("layer " + l.id + " (#" + l.index + ") session " + (l.session || "-") + ": " + l.message +
        (l.gate ? "\nrequest " + l.gate.request + ", approved by " + (l.gate.approvals || []).map((a) => a.by).join(", ") : ""), 20000));
    } catch (e) {
      out.textContent = e.message;
    }
  }

  // ---- login ----------------------------------------------------------------

  async function login(ev) {
    ev.preventDefault();
    const input = $("token");
    token = input.value.trim();
    input.value = "";
    try {
      whoami = await api("/v1/whoami");
    } catch (e) {
      token = null;
      $("login-error").textContent = "Refused: " + e.message;
      return;
    }
    $("login").hidden = true;
    $("nav").hidden = false;
    $("who").textContent = "token " + whoami.id + " (" + whoami.scopes + ")";
    stream();
    show("swarm");
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("login").addEventListener("submit", login);
    for (const b of document.querySelectorAll("nav button.tab"))
      b.addEventListener("click", () => show(b.dataset.view));
    $("approve").addEventListener("click", () => review("approve"));
    $("reject").addEventListener("click", () => review("reject"));
    $("queue-project").addEventListener("change", () => { current.request = null; render(); });
    $("queue-all").addEventListener("change", render);
    $("history-project").addEventListener("change", render);
    $("blame").addEventListener("submit", blame);
    $("diff-close").addEventListener("click", () => { $("diff").hidden = true; });
  });
})();
