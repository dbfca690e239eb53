// The guide's JavaScript continuation loop (as seed_loop.mjs has it) over one of the any-model
// flows, chosen by FLOW: "five_pauses" (one programmatic tool the program calls five times in turn),
// "namespace" (a programmatic tool in a namespace), "mcp" (an MCP server at DOCS_URL the program
// calls; the client answers nothing) or "direct" (a tool the model calls directly). It prints one
// JSON line: the final text, how many requests it made, and the calls it answered.
import OpenAI from "openai";
import { toResponseInputItems } from "openai/lib/responses/ResponseInputItems";

const client = new OpenAI();
const programmatic = { allowed_callers: ["programmatic"] };

const FLOWS = {
  five_pauses: {
    prompt: "Count to five.",
    tools: [
      {
        type: "function",
        name: "step",
        description: "Advance the counter.",
        parameters: {
          type: "object",
          properties: { n: { type: "integer" } },
          required: ["n"],
        },
        output_schema: {
          type: "object",
          properties: { next: { type: "integer" } },
          required: ["next"],
        },
        ...programmatic,
      },
    ],
    implementations: { step: async ({ n }) => ({ next: n + 1 }) },
  },
  namespace: {
    prompt: "When does A-104 arrive?",
    tools: [
      {
        type: "namespace",
        name: "shipping",
        description: "Order tracking and delivery tools.",
        tools: [
          {
            type: "function",
            name: "get_delivery_eta",
            description: "The delivery date of an order.",
            parameters: {
              type: "object",
              properties: { order_id: { type: "string" } },
              required: ["order_id"],
            },
            ...programmatic,
          },
        ],
      },
    ],
    implementations: {
      "shipping.get_delivery_eta": async ({ order_id }) => ({ order_id, eta: "2026-12-04" }),
    },
  },
  mcp: {
    prompt: "What do the docs say of ptc?",
    tools: [
      {
        type: "mcp",
        server_label: "docs",
        server_url: process.env.DOCS_URL,
        require_approval: "never",
        ...programmatic,
      },
    ],
    implementations: {},
  },
  direct: {
    prompt: "Where is order A-104?",
    tools: [
      {
        type: "function",
        name: "get_order",
        description: "An order by id.",
        parameters: {
          type: "object",
          properties: { id: { type: "string" } },
          required: ["id"],
        },
      },
    ],
    implementations: { get_order: async () => ({ state: "shipped" }) },
  },
};

const flow = FLOWS[process.env.FLOW];
if (!flow) throw new Error(`Unknown FLOW: ${process.env.FLOW}`);
const tools = [...flow.tools, { type: "programmatic_tool_calling" }];
const input = [{ role: "user", content: flow.prompt }];
const answered = [];
let requests = 0;

while (true) {
  requests += 1;
  const response = await client.responses.create({
    model: "YOUR_MODEL_ID",
    store: false,
    input,
    tools,
  });

  if (response.status !== "completed") {
    throw new Error(`Response ended with status ${response.status}`);
  }

  // Preserve replayable output, including program and reasoning items.
  input.push(...toResponseInputItems(response.output));

  const calls = response.output.filter((item) => item.type === "function_call");

  if (calls.length === 0) {
    const message = response.output.find((item) => item.type === "message");
    if (message) {
      console.log(JSON.stringify({ text: response.output_text, requests, answered }));
      break;
    }
    continue;
  }

  const outputs = await Promise.all(
    calls.map(async (call) => {
      const name = call.namespace ? `${call.namespace}.${call.name}` : call.name;
      const run = flow.implementations[name];
      if (!run) throw new Error(`Unknown tool: ${name}`);
      answered.push(`${call.caller?.type ?? "direct"}:${name}`);

      const result = await run(JSON.parse(call.arguments));
      return {
        type: "function_call_output",
        call_id: call.call_id,
        output: JSON.stringify(result),
        // Preserve caller so the runtime can resume the correct program.
        caller: call.caller,
      };
    })
  );

  input.push(...outputs);
}
