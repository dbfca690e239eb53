// An Agent with function tools, run by the @openai/agents Runner against the emulator (its default
// client reads OPENAI_BASE_URL and OPENAI_API_KEY; OPENAI_AGENTS_DISABLE_TRACING=1 keeps traces
// home). FLOW picks what runs:
//
//   function_tool   the Agents guide's get_customer, a function the model calls directly
//   ptc             the PTC guide's inventory tools, callable only from a program
//                   (programmaticToolCallingTool() and allowedCallers: ["programmatic"])
//   ptc_stream      the same, run streamed
//   ptc_websocket   the same, over the Responses WebSocket transport
//
// Prints one JSON line: the final output, the calls the tools ran, and the run's item types.
import { Agent, programmaticToolCallingTool, run, tool, withResponsesWebSocketSession } from "@openai/agents";
import { WebSocket } from "ws";

// The WebSocket transport uses the global WebSocket, which Node has from 22 on; on Node 20 it is
// the `ws` package's (the one npm openai's own WebSocket uses), which takes the headers it sends.
globalThis.WebSocket ??= WebSocket;

const flow = process.env.FLOW;
const ran = [];

const object = (properties) => ({
  type: "object",
  properties,
  required: Object.keys(properties),
  additionalProperties: false,
});

const getCustomer = tool({
  name: "get_customer",
  description: "Look up a customer by ID.",
  parameters: object({ customer_id: { type: "string" } }),
  strict: true,
  execute: async ({ customer_id }) => {
    ran.push(`get_customer:${customer_id}`);
    const customer = customer_id === "123" ? { name: "Example Customer", plan: "pro" } : null;
    return JSON.stringify({ found: customer !== null, customer });
  },
});

const skuTool = (name, description, field, value) =>
  tool({
    name,
    description,
    parameters: object({ sku: { type: "string" } }),
    outputSchema: object({ sku: { type: "string" }, [field]: { type: "number" } }),
    strict: true,
    allowedCallers: ["programmatic"],
    execute: async ({ sku }) => {
      ran.push(`${name}:${sku}`);
      return { sku, [field]: value };
    },
  });

const inventoryTools = [
  programmaticToolCallingTool(),
  skuTool("get_inventory", "Return an object with sku (string) and available_units (number).", "available_units", 42),
  skuTool("get_demand", "Return an object with sku (string) and requested_units (number).", "requested_units", 31),
];

const flows = {
  function_tool: { tools: [getCustomer], input: "Look up customer 123." },
  ptc: { tools: inventoryTools, input: "Compare inventory with demand for sku_123." },
  ptc_stream: { tools: inventoryTools, input: "Compare inventory with demand for sku_123.", stream: true },
  ptc_websocket: { tools: inventoryTools, input: "Compare inventory with demand for sku_123.", websocket: true },
};
const chosen = flows[flow];
if (!chosen) throw new Error(`Unknown FLOW: ${flow}`);

const agent = new Agent({
  name: "assistant",
  instructions: "Use the tools to answer.",
  model: "gpt-5",
  tools: chosen.tools,
});

let result;
let events = 0;
if (chosen.stream) {
  result = await run(agent, chosen.input, { stream: true });
  for await (const _ of result) events += 1;
  await result.completed;
} else if (chosen.websocket) {
  // A runner whose provider speaks the Responses WebSocket; its socket is closed at the end.
  result = await withResponsesWebSocketSession(({ runner }) => runner.run(agent, chosen.input));
} else {
  result = await run(agent, chosen.input);
}

console.log(
  JSON.stringify({
    output: result.finalOutput,
    ran,
    items: result.newItems.map((item) => item.rawItem?.type ?? item.type),
    events,
  })
);
