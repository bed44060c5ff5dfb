// Parse many Mermaid diagrams with Mermaid's own parser, in node.
//
// Usage: node mermaid_parse.mjs <folder holding node_modules with mermaid and jsdom>
// stdin: a JSON array of diagram texts; stdout: a JSON array, per diagram null (it parsed)
// or the parser's error message. Mermaid reads the DOM when it loads, so a jsdom window
// stands in for the browser's.
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const prefix = path.resolve(process.argv[2] || ".");
const require = createRequire(path.join(prefix, "package.json"));
const { JSDOM } = require("jsdom");
const dom = new JSDOM("<!doctype html><html><body></body></html>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;

const entry = path.join(prefix, "node_modules", "mermaid", "dist", "mermaid.core.mjs");
const mermaid = (await import(pathToFileURL(entry).href)).default;
mermaid.initialize({ startOnLoad: false, maxEdges: 1000000, maxTextSize: 100000000 });

let input = "";
for await (const chunk of process.stdin) input += chunk;
const results = [];
for (const text of JSON.parse(input)) {
  try {
    await mermaid.parse(text);
    results.push(null);
  } catch (error) {
    results.push(String((error && error.message) || error));
  }
}
process.stdout.write(JSON.stringify(results));
