// A minimal MCP Apps host for the browser tests: a real MCP client (Streamable HTTP, same origin
// through drive.mjs's proxy) and the ext-apps SDK's AppBridge talking to the view in a sandboxed
// iframe. ?tool=NAME&args=JSON calls that tool and shows its result in the app it links to.
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const UI = "io.modelcontextprotocol/ui";
const MIME = "text/html;profile=mcp-app";

async function main() {
  const query = new URLSearchParams(location.search);
  const name = query.get("tool");
  const args = JSON.parse(query.get("args") || "{}");
  const client = new Client({ name: "plexor-test-host", version: "1.0.0" },
                            { capabilities: { extensions: { [UI]: { mimeTypes: [MIME] } } } });
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", location.href)));
  const tool = (await client.listTools()).tools.find((t) => t.name === name);
  const uri = tool && tool._meta && tool._meta.ui && tool._meta.ui.resourceUri;
  if (!uri) throw new Error(`${name} links to no app`);
  const read = await client.readResource({ uri });
  const content = read.contents[0];
  if (content.mimeType !== MIME) throw new Error(`${uri} is ${content.mimeType}`);
  const frame = document.createElement("iframe");
  frame.setAttribute("sandbox", "allow-scripts");  // an opaque origin: the view reaches the host only by postMessage
  frame.id = "app";
  document.body.append(frame);
  const bridge = new AppBridge(client, { name: "plexor-test-host", version: "1.0.0" },
                               { serverTools: {}, serverResources: {}, openLinks: {} });
  bridge.setHostContext({ toolInfo: { tool }, theme: "light", displayMode: "inline" });
  const result = client.callTool({ name, arguments: args });
  bridge.oninitialized = async () => {
    await bridge.sendToolInput({ arguments: args });
    await bridge.sendToolResult(await result);
    window.hostState.delivered = true;
  };
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  frame.srcdoc = content.text;
  window.hostState.resourceMeta = content._meta || null;
  window.hostState.toolMeta = tool._meta;
}

window.hostState = { delivered: false, error: null };
main().catch((err) => { window.hostState.error = String(err && err.stack || err); });
