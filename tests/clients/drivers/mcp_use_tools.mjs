// mcp-use (TypeScript) against Plexor: node mcp_use_tools.mjs CONFIG.json
//
// The same config and record as drivers/frameworks.py (read its docstring). `MCPClient.fromDict` starts
// Plexor over stdio; `LangChainAdapter.createTools(client)` turns each tool into a LangChain tool through
// mcp-use's own JSON Schema to Zod conversion, as its `MCPAgent` does; what a model gets is
// `convertToOpenAITool(tool)` (the function every LangChain.js chat model binds), and a model's tool call
// goes through `tool.invoke(args)`. Copied next to its own node_modules (tests/clients/mcp-use, apart from
// the other Node clients: mcp-use brings its inspector, CLI and LangChain peers) by test_frameworks.py.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

process.env.MCP_USE_ANONYMIZED_TELEMETRY = 'false';  // offline: mcp-use sends usage events to PostHog unless told not to
const here = dirname(fileURLToPath(import.meta.url));
const versionOf = (name) => JSON.parse(readFileSync(`${here}/node_modules/${name}/package.json`, 'utf8')).version;
const raised = (e) => `${e?.name ?? 'Error'}: ${e?.message ?? e}`;

async function main() {
  const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
  const record = { library: 'mcp-use', version: versionOf('mcp-use'), calls: {} };
  const started = Date.now();
  const { MCPClient } = await import('mcp-use');
  const { LangChainAdapter } = await import('mcp-use/adapters');
  const { convertToOpenAITool } = await import('@langchain/core/utils/function_calling');
  const client = MCPClient.fromDict({ mcpServers: { plexor: { command: config.command, args: config.args,
                                                               env: config.env } } });
  try {
    await client.createAllSessions();
    const tools = {};
    record.converted = {};
    record.refused = {};
    try {
      for (const tool of await LangChainAdapter.createTools(client)) {
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
        const text = typeof seen === 'string' ? seen : JSON.stringify(seen);  // the MCP result, as JSON
        record.calls[c.label] = { ok: !text.startsWith('Error executing MCP tool') && !text.includes('"isError":true'),
                                  seen: text };
      } catch (e) {
        record.calls[c.label] = { ok: false, raised: raised(e), seen: String(e?.message ?? e) };
      }
    }
  } catch (e) {
    record.connect = { ok: false, raised: raised(e), trace: String(e?.stack ?? '') };
  } finally {
    await client.closeAllSessions().catch(() => {});
  }
  record.seconds = (Date.now() - started) / 1000;
  writeFileSync(config.out, JSON.stringify(record, null, 1));
}

await main();
