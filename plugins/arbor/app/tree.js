// The Arbor tree viewer, an MCP App. Built into ../src/plexor_arbor/apps/tree.html by apps/build.mjs.
// Every value from the server reaches the page through textContent or an attribute set by the DOM,
// never through HTML parsing: a node's content cannot add markup or script.
import { App } from "@modelcontextprotocol/ext-apps";

const app = new App({ name: "arbor-tree-viewer", version: "1.0.0" }, {});
const state = { treeId: null, view: null, collapsed: new Set(), selected: null };
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
  const status = $("status");
  status.textContent = message;
  status.className = isError ? "status error" : "status";
}

async function call(name, args) {
  const result = await app.callServerTool({ name, arguments: args });
  if (result.isError) {
    const text = (result.content || []).map((c) => c.text || "").join(" ");
    throw new Error(text || `${name} failed`);
  }
  return result.structuredContent || {};
}

function treeIdOf(args, data) {
  if (args && typeof args.tree_id === "string") return args.tree_id;
  if (!data) return null;
  return data.tree_id || (data.tree && data.tree.id) || (typeof data.id === "string" && data.root ? data.id : null);
}

async function load() {
  if (!state.treeId) return;
  state.view = await call("arbor_tree_view", { tree_id: state.treeId, excerpt: 80 });
  draw();
}

// A node without a role: the tree's first (empty) node is its root; others say their kind.
function roleOf(node) {
  return node.role || (state.view && node.id === state.view.tree.root ? "root" : node.kind);
}

function row(node, byId) {
  const tree = state.view.tree;
  const open = !state.collapsed.has(node.id);
  const toggle = node.children.length
    ? el("button", { class: "toggle", "aria-label": open ? "collapse" : "expand", "data-toggle": node.id,
                     onclick: (e) => { e.stopPropagation(); flip(node.id); } }, open ? "▾" : "▸")
    : el("span", { class: "toggle leaf" }, "•");
  const label = el("span", { class: "excerpt", text: node.excerpt + (node.length > node.excerpt.length ? "…" : "") });
  const line = el("div", { class: "line" + (node.id === state.selected ? " selected" : ""), "data-node": node.id,
                           role: "treeitem", onclick: () => select(node.id) },
    toggle, el("span", { class: `role role-${roleOf(node).replace(/[^a-z]/gi, "")}`, text: roleOf(node) }), label);
  if (node.id === tree.head) line.append(el("span", { class: "head", text: "HEAD" }));
  if (node.children.length > 1) line.append(el("span", { class: "branches", text: `${node.children.length} branches` }));
  const item = el("li", {}, line);
  if (node.children.length && open) {
    item.append(el("ul", {}, ...node.children.map((id) => row(byId.get(id), byId))));
  }
  return item;
}

function draw() {
  const { tree, nodes } = state.view;
  const byId = new Map(nodes.map((n) => [n.id, n]));
  $("title").textContent = `Tree ${tree.id}`;
  $("summary").textContent = `${nodes.length} nodes · head ${tree.head ? tree.head.slice(0, 8) : "none"} · ${tree.state}`;
  const root = byId.get(tree.root);
  $("tree").replaceChildren(root ? el("ul", { role: "tree" }, row(root, byId)) : el("p", { text: "This tree is empty." }));
}

function flip(id) {
  if (state.collapsed.has(id)) state.collapsed.delete(id);
  else state.collapsed.add(id);
  draw();
}

async function select(id) {
  state.selected = id;
  draw();
  try {
    const [node, path] = await Promise.all([
      call("arbor_node_get", { tree_id: state.treeId, node_id: id }),
      call("arbor_context_get_path", { tree_id: state.treeId, node_id: id }),
    ]);
    showNode(node, path);
  } catch (err) {
    say(String(err.message || err), true);
  }
}

function showNode(node, path) {
  const data = node.data || {};
  const body = data.type === "external" ? JSON.stringify(data.handle, null, 2) : data.content;
  const steps = (path.nodes || []).map((n) => el("li", { class: n.id === node.id ? "here" : "" },
    el("span", { class: "role", text: (n.metadata && n.metadata.role) || (n.parent ? n.data && n.data.type : "root") || "" }),
    el("span", { class: "excerpt", text: n.data && n.data.type === "text" ? n.data.content.slice(0, 120) : "[external]" })));
  const reply = el("textarea", { id: "reply", rows: 2, placeholder: "A reply, starting a branch here" });
  $("detail").replaceChildren(
    el("h2", { text: `${(node.metadata && node.metadata.role) || data.type} · ${node.id}` }),
    el("pre", { id: "content", text: body || "" }),
    el("div", { class: "actions" },
      el("button", { id: "make-head", onclick: () => act(() => call("arbor_tree_set_head", { tree_id: state.treeId, node_id: node.id }), "Head moved.") }, "Make this the head"),
      reply,
      el("button", { id: "branch", onclick: () => branch(node.id, reply.value) }, "Branch from here")),
    el("h3", { text: `Context path (${(path.nodes || []).length} nodes)` }),
    el("ol", { id: "path" }, ...steps));
}

async function act(run, done) {
  try {
    await run();
    await load();
    say(done);
  } catch (err) {
    say(String(err.message || err), true);
  }
}

function branch(parent, text) {
  if (!text.trim()) return say("Write the reply first.", true);
  return act(() => call("arbor_node_create_text", { tree_id: state.treeId, content: text, parent,
                                                    metadata: JSON.stringify({ role: "user" }) }), "Branch added.");
}

let input = null;
app.ontoolinput = (params) => { input = params.arguments || null; };
app.ontoolresult = (result) => {
  const id = treeIdOf(input, result.structuredContent);
  if (!id) return say("This result names no tree.", true);
  state.treeId = id;
  load().catch((err) => say(String(err.message || err), true));
};
app.connect().catch((err) => say(String(err.message || err), true));
