// A programmatic tool calling loop streamed with the npm package's `responses.stream()` helper.
// The model's program pauses once per `await`; each pause is one streamed response whose function
// calls this script answers. It prints one JSON line:
// {"answer": <final text>, "responses": <streamed responses>, "events": <events seen>}.
import OpenAI from "openai";
import { toResponseInputItems } from "openai/lib/responses/ResponseInputItems";
import { addOutputs, prompt, tools } from "./adder.mjs";

const client = new OpenAI({ maxRetries: 0 });
const input = [{ role: "user", content: prompt([1, 2, 10, 100]) }];
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
  // drops it from 7.x on, but 6.x keeps it, and the API refuses it as an unknown parameter.
  input.push(...toResponseInputItems(response.output).map(({ parsed_arguments: _, ...item }) => item));
  const outputs = addOutputs(response);
  if (outputs.length === 0) {
    console.log(JSON.stringify({ answer: response.output_text, responses, events }));
    break;
  }
  input.push(...outputs);
}
