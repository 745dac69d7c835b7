// Render Graphviz DOT to SVG with the pinned @viz-js/viz (Graphviz compiled to WebAssembly), so the
// picture comes out the same on every machine. Usage: node render.mjs < in.dot > out.svg
import { instance } from "@viz-js/viz";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const viz = await instance();
process.stdout.write(viz.renderString(Buffer.concat(chunks).toString("utf8"), { format: "svg", engine: "dot" }));
