// Drive a real Chromium through the test host (apps/test-host/host.js) against a running `plexor serve --transport http`.
//
//   node apps/test-host/drive.mjs MCP_URL PLAN_JSON
//
// PLAN: {"tool": NAME, "args": {...}, "shots": DIR, "steps": [STEP...]}, each step one of
//   {"wait": SEL} {"click": SEL} {"fill": [SEL, TEXT]} {"text": SEL} {"count": SEL} {"shot": NAME}
//   {"eval": JS}  (run in the view's frame; its value is returned)
// SEL is a CSS selector inside the view's iframe. Prints one JSON object: the value of each text, count and eval step, the
// requests that left the host's origin, console errors, dialogs opened, and the host's state.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, request } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import { chromium } from "playwright-core";

const HERE = dirname(fileURLToPath(import.meta.url));
const [mcpUrl, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);
const upstream = new URL(mcpUrl);
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

const bundle = (await esbuild.build({
  entryPoints: [join(HERE, "host.js")], bundle: true, format: "iife", write: false, platform: "browser",
  logLevel: "warning",
})).outputFiles[0].text;

function proxy(req, res) {  // same origin for the page: /mcp goes to the plexor server
  const out = request({ host: upstream.hostname, port: upstream.port, path: upstream.pathname, method: req.method,
                        headers: { ...req.headers, host: upstream.host, origin: upstream.origin } }, (up) => {
    res.writeHead(up.statusCode, up.headers);
    up.pipe(res);
  });
  out.on("error", (err) => { res.writeHead(502); res.end(String(err)); });
  req.pipe(out);
}

const server = createServer((req, res) => {
  const path = new URL(req.url, "http://x").pathname;
  if (path === "/mcp") return proxy(req, res);
  if (path === "/host.bundle.js") { res.writeHead(200, { "content-type": "text/javascript" }); return res.end(bundle); }
  if (path === "/") { res.writeHead(200, { "content-type": "text/html" }); return res.end(readFileSync(join(HERE, "host.html"))); }
  res.writeHead(404); res.end();
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const origin = `http://127.0.0.1:${server.address().port}`;

const profile = mkdtempSync(join(tmpdir(), "plexor-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.PLEXOR_CHROMIUM || "/usr/bin/chromium", headless: true, args: FLAGS,
  viewport: { width: 1100, height: 700 },
});
const report = { steps: [], outside: [], console: [], dialogs: 0, host: null };
try {
  const page = context.pages()[0] || await context.newPage();
  context.on("request", (r) => { const u = r.url(); if (!u.startsWith(origin) && !u.startsWith("about:") && !u.startsWith("data:")) report.outside.push(u); });
  page.on("console", (m) => { if (m.type() === "error") report.console.push(m.text()); });
  page.on("dialog", (d) => { report.dialogs += 1; d.dismiss(); });
  const query = new URLSearchParams({ tool: plan.tool, args: JSON.stringify(plan.args || {}) });
  await page.goto(`${origin}/?${query}`);
  await page.waitForFunction(() => window.hostState.delivered || window.hostState.error, null, { timeout: 30000 });
  const view = page.frameLocator("#app");
  for (const step of plan.steps) {
    const [kind, arg] = Object.entries(step)[0];
    let value = null;
    if (kind === "wait") await view.locator(arg).first().waitFor({ timeout: 20000 });
    else if (kind === "click") await view.locator(arg).first().click({ timeout: 20000 });
    else if (kind === "fill") await view.locator(arg[0]).first().fill(arg[1]);
    else if (kind === "text") value = await view.locator(arg).first().textContent({ timeout: 20000 });
    else if (kind === "count") value = await view.locator(arg).count();
    else if (kind === "shot") {  // the view's own height, so the pictures in the docs have no empty band
      const height = await page.frames()[1].evaluate(() => Math.ceil(document.querySelector("main").getBoundingClientRect().bottom) + 12);
      await page.screenshot({ path: join(plan.shots, `${arg}.png`), clip: { x: 0, y: 0, width: 1100, height: Math.min(700, height) } });
    }
    else if (kind === "eval") value = await page.frames()[1].evaluate(arg);
    else throw new Error(`unknown step ${kind}`);
    if (["text", "count", "eval"].includes(kind)) report.steps.push(value);
  }
  report.host = await page.evaluate(() => window.hostState);
} catch (err) {
  report.error = String(err && err.stack || err);
} finally {
  await context.close();
  server.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(report));
process.exit(0);  // the proxy's kept-alive sockets would hold the loop open
