// The folder-search results view, an MCP App. Built into ../src/plexor_folder_search/apps/results.html by
// apps/build.mjs. Every value from the server reaches the page through textContent or a DOM-set attribute,
// never through HTML parsing: a document's text cannot add markup or script.
import { App } from "@modelcontextprotocol/ext-apps";

const app = new App({ name: "folder-search-results", version: "1.0.0" }, {});
const state = { tool: null, args: {}, results: [], data: null, open: null };
const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "text") node.textContent = value;
    else if (key === "onclick") node.addEventListener("click", value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children) node.append(child);
  return node;
}

function say(message, isError = false) {
  $("status").textContent = message;
  $("status").className = isError ? "status error" : "status";
}

// The server marks each matched term **like this**: odd pieces of the split are the matches.
function marked(snippet) {
  const span = el("span", { class: "snippet" });
  String(snippet || "").split("**").forEach((piece, i) => span.append(i % 2 ? el("mark", { text: piece }) : piece));
  return span;
}

function uriOf(folder, path) {
  const encoded = path.split("/").map(encodeURIComponent).join("/");
  return `folders://${encodeURIComponent(folder)}/${encoded}`;
}

function card(hit, index) {
  const chunk = hit.best_chunk || hit;
  const lines = chunk.lines || [];
  const parts = hit.score_parts || {};
  const score = `score ${Number(hit.score).toFixed(3)}` + (parts.semantic == null ? " (keywords)"
    : ` (keywords ${Number(parts.keyword).toFixed(2)}, meaning ${Number(parts.semantic).toFixed(2)})`);
  return el("li", { class: "hit", "data-hit": index },
    el("div", { class: "where" },
      el("span", { class: "path", text: hit.path }),
      el("span", { class: "lines", text: lines.length ? `lines ${lines[0]}-${lines[1]}` : "" }),
      el("span", { class: "score", text: score })),
    hit.heading || hit.title ? el("div", { class: "heading", text: hit.heading || hit.title }) : "",
    marked(chunk.snippet),
    el("button", { class: "open", onclick: () => openHit(hit) }, "Open in document"));
}

function draw() {
  const data = state.data;
  const what = state.tool === "folders_find_documents" ? "documents" : "passages";
  $("summary").textContent = `${state.results.length} of ${data.total} ${what} in '${data.folder}' · ${data.mode || ""}`
    + (data.partial ? " · still indexing" : "");
  $("hits").replaceChildren(...state.results.map(card));
  $("more").hidden = !data.continuation_token;
}

async function more() {
  try {
    const result = await app.callServerTool({ name: state.tool,
                                              arguments: { ...state.args, continuation_token: state.data.continuation_token } });
    if (result.isError) throw new Error((result.content || []).map((c) => c.text || "").join(" "));
    take(result.structuredContent, true);
  } catch (err) {
    say(String(err.message || err), true);
  }
}

async function openHit(hit) {
  const chunk = hit.best_chunk || hit;
  const [first, last] = chunk.lines || [0, -1];
  try {
    const read = await app.readServerResource({ uri: uriOf(state.data.folder, hit.path) });
    const content = read.contents[0];
    const reader = $("reader");
    if (typeof content.text !== "string") {
      reader.replaceChildren(el("h2", { text: hit.path }), el("p", { text: `A ${content.mimeType} document; the passage:` }),
                             marked(chunk.snippet));
      return;
    }
    const rows = content.text.split("\n").map((line, i) => el("div", {
      class: i + 1 >= first && i + 1 <= last ? "row hit-line" : "row", "data-line": i + 1 },
      el("span", { class: "n", text: String(i + 1) }), el("span", { class: "t", text: line })));
    reader.replaceChildren(el("h2", { text: `${hit.path} · lines ${first}-${last}` }), el("div", { class: "doc" }, ...rows));
    const target = reader.querySelector(".hit-line");
    if (target) target.scrollIntoView({ block: "center" });
    say(`Opened ${hit.path}.`);
  } catch (err) {
    say(String(err.message || err), true);
  }
}

function take(data, append) {
  if (!data || !Array.isArray(data.results)) return say("This result has no search hits.", true);
  state.data = data;
  if (!state.tool) {  // a host that names no tool in its context: the shape of the hits says which
    const first = data.results[0];
    state.tool = first && first.best_chunk ? "folders_find_documents" : "folders_search_content";
  }
  state.results = append ? state.results.concat(data.results) : data.results;
  draw();
}

app.ontoolinput = (params) => { state.args = { ...(params.arguments || {}) }; };
app.ontoolresult = (result) => take(result.structuredContent, false);
$("more").addEventListener("click", more);
app.connect().then(() => {
  const info = app.getHostContext() && app.getHostContext().toolInfo;
  if (info && info.tool && info.tool.name) state.tool = info.tool.name;
}).catch((err) => say(String(err.message || err), true));
