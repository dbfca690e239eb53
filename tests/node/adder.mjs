// What the streamed and WebSocket loops share: one `add` tool a program may call, the prompt that
// asks for three additions in turn (the model answers it with a program that pauses at each one),
// and the outputs that answer a response's calls.
export const tools = [
  { type: "function", name: "add", parameters: null, strict: null, allowed_callers: ["programmatic"] },
  { type: "programmatic_tool_calling" },
];

export const prompt = ([a, b, c, d]) => `Add ${a} and ${b}, then ${c}, then ${d}.`;

export function addOutputs(response) {
  return response.output
    .filter((item) => item.type === "function_call")
    .map((call) => {
      if (call.caller?.type !== "program") throw new Error(`expected a program caller on ${call.call_id}`);
      const { a, b } = JSON.parse(call.arguments);
      return { type: "function_call_output", call_id: call.call_id, output: String(a + b), caller: call.caller };
    });
}

/** The text of a response's final message (a WebSocket event's response carries no output_text). */
export function messageText(response) {
  const message = response.output.findLast((item) => item.type === "message");
  return message?.content.map((part) => part.text ?? part.refusal ?? "").join("") ?? null;
}
