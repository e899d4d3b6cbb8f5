// One tool call with the TypeScript SDK 1.x client over Streamable HTTP, as an application
// using it makes one: list the tools (which caches their output schemas), then call.
// Usage: node call_tool.mjs URL TOKEN TOOL ARGUMENTS_JSON
// Prints one JSON line: {"result": CallToolResult} or {"thrown": message}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, name, argumentsJson] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "console-test", version: "1.0.0" });
let answer;
try {
  await client.connect(transport);
  await client.listTools();
  answer = { result: await client.callTool({ name, arguments: JSON.parse(argumentsJson) }) };
} catch (error) {
  answer = { thrown: String(error?.message ?? error) };
} finally {
  await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify(answer) + "\n");
