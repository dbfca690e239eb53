// What the guide's loops share: its two inventory tools, their implementations and the prompt,
// and the step that answers a response's function calls (each output keeps its call's `caller`,
// so the runtime resumes the right program).
export const prompt = "Compare inventory with demand for sku_123.";

export const implementations = {
  get_inventory: async ({ sku }) => ({ sku, available_units: 42 }),
  get_demand: async ({ sku }) => ({ sku, requested_units: 31 }),
};

const skuTool = (name, description, field) => ({
  type: "function",
  name,
  description,
  parameters: {
    type: "object",
    properties: { sku: { type: "string" } },
    required: ["sku"],
    additionalProperties: false,
  },
  output_schema: {
    type: "object",
    properties: { sku: { type: "string" }, [field]: { type: "number" } },
    required: ["sku", field],
    additionalProperties: false,
  },
  allowed_callers: ["programmatic"],
  strict: true,
});

export const tools = [
  skuTool("get_inventory", "Return an object with sku (string) and available_units (number).", "available_units"),
  skuTool("get_demand", "Return an object with sku (string) and requested_units (number).", "requested_units"),
  { type: "programmatic_tool_calling" },
];

export function functionCalls(response) {
  return response.output.filter((item) => item.type === "function_call");
}

export async function answer(calls) {
  return Promise.all(
    calls.map(async (call) => {
      const run = implementations[call.name];
      if (!run) throw new Error(`Unknown tool: ${call.name}`);
      return {
        type: "function_call_output",
        call_id: call.call_id,
        output: JSON.stringify(await run(JSON.parse(call.arguments))),
        caller: call.caller,
      };
    })
  );
}

export function completed(response) {
  if (response.status !== "completed") throw new Error(`Response ended with status ${response.status}`);
  return response;
}
