// The operator's dashboard in a real browser (tests/bats/92-dashboard.bats
// makes the store, the swarm and esbxd, then runs this): Debian's chromium,
// headless, driven by puppeteer-core.  Environment: ESBX_UI (the gateway's
// base URL), ESBX_TOKEN (manage, runtime and observe), ESBX_OBSERVE_TOKEN,
// ESBX_SESSIONS (space-separated), ESBX_HOSTILE (the session with hostile
// files), ESBX_REQUEST (a request to approve), ESBX_REQUEST2 (one a
// cross-site page tries to reject), ARTIFACTS (screenshots go there),
// CHROMIUM (default /usr/bin/chromium).
"use strict";
const puppeteer = require("puppeteer-core");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const http = require("node:http");
const os = require("node:os");
const path = require("node:path");

const base = process.env.ESBX_UI;
const token = process.env.ESBX_TOKEN;
const observe = process.env.ESBX_OBSERVE_TOKEN;
const sessions = (process.env.ESBX_SESSIONS || "").split(" ").filter(Boolean);
const hostile = process.env.ESBX_HOSTILE;
const request = process.env.ESBX_REQUEST;
const request2 = process.env.ESBX_REQUEST2;
const artifacts = process.env.ARTIFACTS || os.tmpdir();
const WAIT = { timeout: 30000 };
let passed = 0;
let failed = 0;

async function step(name, fn) {
  try {
    await fn();
    passed++;
    console.log("ok - " + name);
  } catch (e) {
    failed++;
    console.log("not ok - " + name + ": " + (e && e.stack ? e.stack : e));
  }
}

async function gw(p, opts) {
  const o = opts || {};
  const headers = Object.assign({ Authorization: "Bearer " + (o.token || token) }, o.headers || {});
  if (o.body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(base + p, { method: o.method || "GET", headers, body: o.body !== undefined ? JSON.stringify(o.body) : undefined });
  const text = await r.text();
  let doc = null;
  try { doc = JSON.parse(text); } catch (e) { doc = text; }
  return { status: r.status, doc };
}

async function waitFor(what, fn, ms) {
  const until = Date.now() + (ms || 60000);
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error("timed out waiting for " + what);
    await new Promise((r) => setTimeout(r, 200));
  }
}

(async () => {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "esbx-chromium-"));
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run",
      "--user-data-dir=" + profile,
    ],
  });
  const dialogs = [];
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 900 });
  page.on("dialog", async (d) => { dialogs.push(d.message()); await d.dismiss(); });
  page.on("pageerror", (e) => console.log("# page error: " + e.message));

  await step("the page comes without a token, with a policy that runs only its own scripts", async () => {
    const r = await page.goto(base + "/ui/", { waitUntil: "domcontentloaded" });
    assert.equal(r.status(), 200);
    const csp = r.headers()["content-security-policy"];
    assert.match(csp, /script-src 'self'/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.equal(r.headers()["x-content-type-options"], "nosniff");
  });

  await step("a bad token is refused on the page", async () => {
    await page.type("#token", "not-a-token");
    await page.click("#login-button");
    await page.waitForFunction(() => document.getElementById("login-error").textContent.length > 0, WAIT);
  });

  await step("log in; the swarm shows every session, live", async () => {
    await page.type("#token", token);
    await page.click("#login-button");
    for (const s of sessions)
      await page.waitForSelector('#swarm tr[data-session="' + s + '"]', WAIT);
    await page.waitForFunction(() => document.getElementById("live").textContent === "live", WAIT);
    // The running sessions' charts get samples.
    await page.waitForFunction(() => [...document.querySelectorAll("svg.chart polyline")].some((p) => (p.getAttribute("points") || "").split(" ").length > 1), WAIT);
    await page.screenshot({ path: path.join(artifacts, "swarm.png"), fullPage: true });
  });

  await step("the token is in no URL, cookie or storage", async () => {
    assert.ok(!page.url().includes(token));
    const where = await page.evaluate(() => [document.cookie, JSON.stringify(localStorage), JSON.stringify(sessionStorage)].join("|"));
    assert.ok(!where.includes(token), where);
    const cookies = await page.cookies();
    assert.equal(cookies.length, 0);
  });

  await step("a session: its commands, its diff file by file, side by side; hostile names stay text", async () => {
    await page.click('#swarm tr[data-session="' + hostile + '"] button.link');
    await page.waitForSelector("#timeline tbody tr", WAIT);
    await page.waitForSelector("#session-changes li button.link", WAIT);
    const names = await page.$$eval("#session-changes li", (l) => l.map((x) => x.textContent));
    assert.ok(names.some((n) => n.includes("<img src=x onerror=")), names.join("\n"));
    await page.evaluate(() => [...document.querySelectorAll("#session-changes li button.link")].find((b) => b.textContent.includes("hostile.html")).click());
    await page.waitForFunction(() => document.getElementById("diff-path").textContent.includes("hostile.html") && document.querySelector("#diff-table tbody tr"), WAIT);
    const text = await page.$eval("#diff-table", (t) => t.textContent);
    assert.ok(text.includes("<script>window.__xss = 3</script>"), text.slice(0, 400));
    const esc = await page.$$eval("#diff-table .esc", (l) => l.map((x) => x.textContent));
    assert.ok(esc.includes("\\x1b"), "ANSI escapes shown: " + esc.join(","));
    await page.screenshot({ path: path.join(artifacts, "session-diff.png"), fullPage: true });
  });

  await step("a 10 MB line is cut for display, the page stays responsive", async () => {
    await page.evaluate(() => [...document.querySelectorAll("#session-changes li button.link")].find((b) => b.textContent.includes("long.txt")).click());
    await page.waitForFunction(() => document.getElementById("diff-path").textContent.includes("long.txt") && document.querySelector("#diff-table .cut"), WAIT);
    const t0 = Date.now();
    await page.evaluate(() => document.title);
    assert.ok(Date.now() - t0 < 5000);
  });

  await step("nothing hostile ran: no dialog, no handler, no script but the page's", async () => {
    const state = await page.evaluate(() => ({
      xss: window.__xss,
      scripts: [...document.scripts].map((s) => s.src),
      handlers: [...document.querySelectorAll("*")].filter((e) => [...e.attributes].some((a) => a.name.startsWith("on"))).length,
      imgs: document.querySelectorAll("img").length,
    }));
    assert.equal(state.xss, undefined);
    assert.deepEqual(state.scripts, [base + "/ui/app.js"]);
    assert.equal(state.handlers, 0);
    assert.equal(state.imgs, 0);
    assert.deepEqual(dialogs, []);
  });

  let landed = null;
  await step("the queue: a pending request with its diff; approve it and see it land", async () => {
    await page.click('nav button[data-view="queue"]');
    await page.waitForSelector('#queue tr[data-request="' + request + '"]', WAIT);
    await page.click('#queue tr[data-request="' + request + '"] button.link');
    await page.waitForFunction((id) => document.getElementById("request-id").textContent === id && !document.getElementById("approve").disabled, WAIT, request);
    const changes = await page.$$eval("#request-changes li", (l) => l.map((x) => x.textContent));
    assert.ok(changes.length > 0);
    await page.screenshot({ path: path.join(artifacts, "queue.png"), fullPage: true });
    await page.type("#review-message", "fine <b>by me</b>");
    await page.click("#approve");
    await page.waitForFunction(() => document.getElementById("request-state").textContent === "landed", { timeout: 90000 });
    const r = await gw("/v1/requests/" + request);
    assert.equal(r.doc.state, "landed");
    landed = r.doc.layer;
  });

  await step("history: the landed layer with its approver; blame of a path", async () => {
    await page.click('nav button[data-view="history"]');
    await page.waitForSelector('#layers tr[data-layer="' + landed + '"]', WAIT);
    const row = await page.$eval('#layers tr[data-layer="' + landed + '"]', (t) => t.textContent);
    assert.ok(row.includes("token:"), row);
    await page.type("#blame-path", "/agent-work.txt");
    await page.click("#blame button");
    await page.waitForFunction((id) => document.getElementById("blame-result").textContent.includes(id), WAIT, landed);
    await page.screenshot({ path: path.join(artifacts, "history.png"), fullPage: true });
    await page.click('nav button[data-view="swarm"]');
    await page.waitForSelector('#swarm tr[data-session="' + sessions[0] + '"]', WAIT);
    await page.screenshot({ path: path.join(artifacts, "dashboard.png") });
  });

  await step("cross-site: a page elsewhere cannot reject a request, with or without the token", async () => {
    const evil = http.createServer((req, res) => {
      res.setHeader("Content-Type", "text/html");
      res.end('<!doctype html><form id="f" method="POST" action="' + base + "/v1/requests/" + request2 +
        '/reject" enctype="text/plain"><input name=\'{"message":"x","a\' value=\'":1}\'></form>' +
        '<script>fetch("' + base + "/v1/requests/" + request2 + '/reject", {method: "POST", mode: "no-cors", credentials: "include", body: "{}"}).finally(() => document.getElementById("f").submit());</script>');
    });
    await new Promise((r) => evil.listen(0, "127.0.0.1", r));
    const evilUrl = "http://127.0.0.1:" + evil.address().port + "/";
    const p2 = await browser.newPage();
    await p2.goto(evilUrl, { waitUntil: "networkidle0" }).catch(() => {});
    await new Promise((r) => setTimeout(r, 1000));
    await p2.close();
    evil.close();
    let r = await gw("/v1/requests/" + request2);
    assert.equal(r.doc.state, "review");
    // Even with the token, another origin is refused.
    r = await gw("/v1/requests/" + request2 + "/reject", { method: "POST", body: {}, headers: { Origin: evilUrl.slice(0, -1) } });
    assert.equal(r.status, 403);
    r = await gw("/v1/requests/" + request2);
    assert.equal(r.doc.state, "review");
  });

  await step("an observe token sees, and cannot approve", async () => {
    const r = await gw("/v1/requests/" + request2 + "/approve", { method: "POST", body: {}, token: observe });
    assert.equal(r.status, 403);
    const p3 = await browser.newPage();
    await p3.goto(base + "/ui/", { waitUntil: "domcontentloaded" });
    await p3.type("#token", observe);
    await p3.click("#login-button");
    await p3.waitForSelector('#swarm tr[data-session="' + sessions[0] + '"]', WAIT);
    await p3.click('nav button[data-view="queue"]');
    await p3.waitForSelector('#queue tr[data-request="' + request2 + '"]', WAIT);
    await p3.click('#queue tr[data-request="' + request2 + '"] button.link');
    await p3.waitForFunction((id) => document.getElementById("request-id").textContent === id, WAIT, request2);
    assert.equal(await p3.$eval("#approve", (b) => b.disabled), true);
    await p3.close();
  });

  await browser.close();
  fs.rmSync(profile, { recursive: true, force: true });
  console.log("dashboard: " + passed + " passed, " + failed + " failed");
  process.exit(failed ? 1 : 0);
})().catch((e) => {
  console.log("not ok - the browser: " + (e && e.stack ? e.stack : e));
  process.exit(1);
});
