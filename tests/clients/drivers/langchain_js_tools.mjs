// LangChain.js's MCP adapters against Plexor: node langchain_js_tools.mjs CONFIG.json
//
// The same config and record as drivers/frameworks.py (read its docstring). `loadMcpTools` turns each
// tool listed over the official SDK's stdio client into a LangChain tool; what a model gets is
// `convertToOpenAITool(tool)` (the function every LangChain.js chat model binds), and a model's tool
// call goes through `tool.invoke(args)`, as an agent's tool node does. Copied next to the installed
// node_modules by tests/clients/test_frameworks.py, like node_client.mjs.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const versionOf = (name) => JSON.parse(readFileSync(`${here}/node_modules/${name}/package.json`, 'utf8')).version;
const raised = (e) => `${e?.name ?? 'Error'}: ${e?.message ?? e}`;

async function main() {
  const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
  const record = { library: '@langchain/mcp-adapters', version: versionOf('@langchain/mcp-adapters'), calls: {} };
  const started = Date.now();
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const { loadMcpTools } = await import('@langchain/mcp-adapters');
  const { convertToOpenAITool } = await import('@langchain/core/utils/function_calling');
  const client = new Client({ name: 'plexor-frameworks', version: '1.0.0' });
  try {
    await client.connect(new StdioClientTransport({ command: config.command, args: config.args, env: config.env,
                                                    stderr: 'inherit' }));
    const tools = {};
    record.converted = {};
    record.refused = {};
    try {
      for (const tool of await loadMcpTools('plexor', client, { throwOnLoadError: true })) {
        tools[tool.name] = tool;
        try {
          record.converted[tool.name] = convertToOpenAITool(tool).function.parameters;
        } catch (e) {
          record.refused[tool.name] = raised(e);
        }
      }
    } catch (e) {
      record.refused['*'] = raised(e);
    }
    for (const c of config.calls) {
      try {
        const seen = await tools[c.tool].invoke(c.arguments);
        record.calls[c.label] = { ok: true, seen: typeof seen === 'string' ? seen : JSON.stringify(seen) };
      } catch (e) {
        record.calls[c.label] = { ok: false, raised: raised(e), seen: String(e?.message ?? e) };
      }
    }
  } catch (e) {
    record.connect = { ok: false, raised: raised(e), trace: String(e?.stack ?? '') };
  } finally {
    await client.close().catch(() => {});
  }
  record.seconds = (Date.now() - started) / 1000;
  writeFileSync(config.out, JSON.stringify(record, null, 1));
}

await main();
