// A programmatic tool calling loop streamed with the npm package's `responses.stream()` helper.
//
//   node stream_loop.mjs [BASE_URL [SCOPE]]
//
// BASE_URL (or OPENAI_BASE_URL) is the emulator's /v1 URL; SCOPE (or PTC_EMULATOR_SCOPE) is sent
// as the x-ptc-emulator-scope header. The program pauses once per `await`; each pause is one
// streamed response whose function calls this script answers. It prints one JSON line:
// {"answer": <final text>, "responses": <streamed responses>, "events": <events seen>}.
import OpenAI from "openai";
import { toResponseInputItems } from "openai/lib/responses/ResponseInputItems";

const baseURL = process.argv[2] ?? process.env.OPENAI_BASE_URL;
const scope = process.argv[3] ?? process.env.PTC_EMULATOR_SCOPE;
if (!baseURL) throw new Error("pass the emulator's /v1 URL as the first argument or OPENAI_BASE_URL");

const client = new OpenAI({
  baseURL,
  apiKey: process.env.OPENAI_API_KEY ?? "sk-ptc-emulator",
  maxRetries: 0,
  defaultHeaders: scope ? { "x-ptc-emulator-scope": scope } : {},
});

const tools = [
  { type: "function", name: "add", parameters: null, strict: null, allowed_callers: ["programmatic"] },
  { type: "programmatic_tool_calling" },
];

const program = [
  "const a = await tools.add({ a: 1, b: 2 });",
  "const b = await tools.add({ a, b: 10 });",
  "const c = await tools.add({ a: b, b: 100 });",
  "text(`total: ${c}`);",
].join("\n");

const input = [{ role: "user", content: "Run this:\n```js\n" + program + "\n```" }];
let responses = 0;
let events = 0;

for (;;) {
  const stream = client.responses.stream({ model: "emulated", input, tools });
  let last = -1;
  for await (const event of stream) {
    if (event.sequence_number <= last) throw new Error(`sequence went from ${last} to ${event.sequence_number}`);
    last = event.sequence_number;
    events += 1;
  }
  const response = await stream.finalResponse();
  responses += 1;
  if (response.status !== "completed") throw new Error(`Response ended with status ${response.status}`);

  // The stream helper's final function_call items carry `parsed_arguments`; toResponseInputItems
  // drops it from 7.x on, but 6.49 keeps it, and the API refuses it as an unknown parameter.
  input.push(...toResponseInputItems(response.output).map(({ parsed_arguments: _, ...item }) => item));
  const calls = response.output.filter((item) => item.type === "function_call");
  if (calls.length === 0) {
    console.log(JSON.stringify({ answer: response.output_text, responses, events }));
    break;
  }
  for (const call of calls) {
    if (call.caller?.type !== "program") throw new Error(`expected a program caller on ${call.call_id}`);
    const { a, b } = JSON.parse(call.arguments);
    input.push({ type: "function_call_output", call_id: call.call_id, output: String(a + b), caller: call.caller });
  }
}
