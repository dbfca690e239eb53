// The agent under test: it builds its own client from the environment (OPENAI_BASE_URL,
// OPENAI_API_KEY) and runs the PTC loop with store: false until a final message.
import { fileURLToPath } from "node:url";

import OpenAI from "openai";

const schema = (field) => ({
  type: "object",
  properties: { sku: { type: "string" }, [field]: { type: "number" } },
  required: ["sku", field],
  additionalProperties: false,
});

export const TOOLS = [
  ["get_inventory", "available_units"],
  ["get_demand", "requested_units"],
].map(([name, field]) => ({
  type: "function",
  name,
  description: `Return an object with sku (string) and ${field} (number).`,
  parameters: {
    type: "object",
    properties: { sku: { type: "string" } },
    required: ["sku"],
    additionalProperties: false,
  },
  output_schema: schema(field),
  allowed_callers: ["programmatic"],
}));
TOOLS.push({ type: "programmatic_tool_calling" });

const STOCK = { get_inventory: { available_units: 42 }, get_demand: { requested_units: 50 } };

export async function runAgent(question) {
  const client = new OpenAI();
  const input = [{ role: "user", content: question }];
  for (;;) {
    const response = await client.responses.create({ model: "gpt-test", store: false, input, tools: TOOLS });
    input.push(...response.output);
    const calls = response.output.filter((item) => item.type === "function_call");
    if (calls.length === 0) return response.output_text;
    for (const call of calls) {
      const { sku } = JSON.parse(call.arguments);
      input.push({
        type: "function_call_output",
        call_id: call.call_id,
        output: JSON.stringify({ sku, ...STOCK[call.name] }),
        caller: call.caller, // copied unchanged: it resumes the program
      });
    }
  }
}

// `node agent.js "question"` runs it as a program.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(await runAgent(process.argv[2]));
}
