// Build each plugin's MCP App into one self-contained HTML file that the plugin's wheel ships.
//
//   node apps/build.mjs            # write the pages
//   node apps/build.mjs --check    # exit 1 when a committed page differs from a fresh build
//
// Script and style are inlined; the page's Content-Security-Policy allows exactly those two (by
// their sha256) and nothing else: no network, no other script, no frames, no forms.
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..");
export const APPS = [
  { dir: "plugins/arbor/app", name: "tree", out: "plugins/arbor/src/plexor_arbor/apps/tree.html" },
  { dir: "plugins/folder-search/app", name: "results", out: "plugins/folder-search/src/plexor_folder_search/apps/results.html" },
];

const sha = (text) => `'sha256-${createHash("sha256").update(text, "utf8").digest("base64")}'`;

async function page({ dir, name }) {
  const js = await esbuild.build({
    entryPoints: [join(REPO, dir, `${name}.js`)], bundle: true, format: "iife", minify: true, write: false,
    legalComments: "none", target: "es2020", platform: "browser", absWorkingDir: join(REPO, "apps"),
    nodePaths: [join(REPO, "apps", "node_modules")], logLevel: "warning",
  });
  const css = await esbuild.transform(readFileSync(join(REPO, dir, `${name}.css`), "utf8"), { loader: "css", minify: true });
  const script = js.outputFiles[0].text.replaceAll("</script", "<\\/script").trimEnd();
  const style = css.code.trimEnd();
  const csp = ["default-src 'none'", `script-src ${sha(script)}`, `style-src ${sha(style)}`, "img-src data:",
    "font-src data:", "connect-src 'none'", "base-uri 'none'", "form-action 'none'"].join("; ");
  const values = { csp, style, script };
  return readFileSync(join(REPO, dir, `${name}.html`), "utf8").replace(/\{\{(csp|style|script)\}\}/g, (_, k) => values[k]);
}

const check = process.argv.includes("--check");
let stale = 0;
for (const spec of APPS) {
  let html;
  try {
    html = await page(spec);
  } catch (err) {
    if (err.code === "ENOENT" || /Could not resolve/.test(String(err))) { console.error(`skip ${spec.dir}: ${err.message}`); continue; }
    throw err;
  }
  const target = join(REPO, spec.out);
  let current = null;
  try { current = readFileSync(target, "utf8"); } catch { /* not built yet */ }
  if (check) {
    if (current !== html) { stale += 1; console.error(`${spec.out} differs from a fresh build: run node apps/build.mjs`); }
  } else if (current !== html) {
    writeFileSync(target, html);
    console.log(`wrote ${spec.out} (${html.length} bytes)`);
  }
}
process.exit(stale ? 1 : 0);
