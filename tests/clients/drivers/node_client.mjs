// The Node MCP clients against Plexor: the official TypeScript SDK, the Vercel AI SDK's MCP client
// (@ai-sdk/mcp) and mcp-remote (the SDK's client over stdio, through mcp-remote, to Plexor over HTTP).
//
//   node node_client.mjs CLIENT CONFIG.json      CLIENT: sdk | ai-sdk | mcp-remote
//
// The same scenario and record as drivers/scenario.py (read its docstring); tests/clients/test_clients.py
// copies this file next to the installed node_modules (ES modules resolve packages from the script's
// own folder) and asserts on the record it writes.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const UNTIL_MS = 30000;
const require = createRequire(import.meta.url);
// Not require(`${name}/package.json`): a package's `exports` may not list it (the SDK's does not).
const here = dirname(fileURLToPath(import.meta.url));
const versionOf = (name) => JSON.parse(readFileSync(`${here}/node_modules/${name}/package.json`, 'utf8')).version;

function shown(value) {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function texts(contents) {
  return contents.map((c) => c.text ?? c.blob ?? JSON.stringify(c));
}

async function sdkClient(transport) {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const client = new Client({ name: 'plexor-client-matrix', version: '1.0.0' });
  await client.connect(transport);
  return {
    close: () => client.close(),
    listTools: async () => (await client.listTools()).tools.map((t) => t.name),
    call: (name, args) => client.callTool({ name, arguments: args }, undefined, { timeout: 60000 }),
    read: async (uri) => texts((await client.readResource({ uri })).contents),
  };
}

async function stdioTransport(config) {
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  return new StdioClientTransport({ command: config.command, args: config.args, env: config.env, stderr: 'inherit' });
}

const ADAPTERS = {
  async sdk(config) {
    if (config.transport === 'stdio') return sdkClient(await stdioTransport(config));
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    return sdkClient(new StreamableHTTPClientTransport(new URL(config.url)));
  },

  async 'mcp-remote'(config) {
    // A desktop client's config for a remote server: `npx mcp-remote URL`, spoken to over stdio.
    const proxy = require.resolve('mcp-remote/dist/proxy.js');
    return sdkClient(await stdioTransport({
      command: process.execPath,
      args: [proxy, config.url, '--transport', 'http-only'],
      env: { PATH: process.env.PATH, HOME: config.remote_home, MCP_REMOTE_CONFIG_DIR: config.remote_home },
    }));
  },

  async 'ai-sdk'(config) {
    const { createMCPClient } = await import('@ai-sdk/mcp');
    let transport;
    if (config.transport === 'stdio') {
      const { Experimental_StdioMCPTransport } = await import('@ai-sdk/mcp/mcp-stdio');
      transport = new Experimental_StdioMCPTransport({ command: config.command, args: config.args, env: config.env });
    } else {
      transport = { type: 'http', url: config.url };
    }
    // config.discovery false: protocolVersionDiscovery off (legacy initialize, no server/discover probe).
    const client = await createMCPClient({ transport, protocolVersionDiscovery: config.discovery ?? true });
    // What generateText/streamText hand the model: the AI SDK tools, executed as a model's tool call is.
    const tools = await client.tools();
    let calls = 0;
    return {
      close: () => client.close(),
      listTools: async () => Object.keys(tools),
      call: (name, args) => tools[name].execute(args, { toolCallId: `call-${++calls}`, messages: [] }),
      read: async (uri) => texts((await client.readResource({ uri })).contents),
    };
  },
};

async function step(action) {
  try {
    return { ok: true, seen: shown(await action()) };
  } catch (e) {
    return { ok: false, raised: `${e?.name ?? typeof e}: ${e?.message ?? e}`, seen: String(e?.message ?? e),
             trace: String(e?.stack ?? '').slice(-3000) };
  }
}

async function until(action, text) {
  const deadline = Date.now() + UNTIL_MS;
  for (;;) {
    const record = await step(action);
    if (!text || record.seen.includes(text) || Date.now() > deadline) return record;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

const PACKAGES = { sdk: '@modelcontextprotocol/sdk', 'ai-sdk': '@ai-sdk/mcp', 'mcp-remote': 'mcp-remote' };

async function scenario(name, config) {
  const record = { library: PACKAGES[name], version: versionOf(PACKAGES[name]), transport: config.transport,
                   node: process.version, calls: {}, resources: {} };
  const started = Date.now();
  let client;
  try {
    client = await ADAPTERS[name](config);
    const listed = await step(() => client.listTools());
    record.tools = listed.ok ? JSON.parse(listed.seen) : null;
    record.list_tools = listed;
    for (const c of config.calls) {
      record.calls[c.tool] = await until(() => client.call(c.tool, c.arguments), c.until);
    }
    record.failing = await step(() => client.call(config.failing.tool, config.failing.arguments));
    for (const uri of config.resources) record.resources[uri] = await step(() => client.read(uri));
  } catch (e) {
    record.connect = { ok: false, raised: `${e?.name}: ${e?.message ?? e}`, trace: String(e?.stack ?? '').slice(-3000) };
  } finally {
    if (client) await client.close().catch(() => {});
  }
  record.seconds = (Date.now() - started) / 1000;
  return record;
}

const [name, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, 'utf8'));
const record = await scenario(name, config);
writeFileSync(config.out, JSON.stringify(record, null, 1));
process.exit(0);
