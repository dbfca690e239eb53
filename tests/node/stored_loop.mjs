// The guide's continuation loop with stored responses: each request after the first sends only the
// new function results, continuing from `previous_response_id`. Prints one JSON line: the final
// text, the responses made, the first response's status as retrieved afterwards, and the types of
// the last response's input items as the server lists them.
import OpenAI from "openai";
import { answer, completed, functionCalls, prompt, tools } from "./guide.mjs";

const client = new OpenAI();
const model = "YOUR_MODEL_ID";

let response = completed(await client.responses.create({ model, input: prompt, tools }));
const ids = [response.id];
for (;;) {
  const calls = functionCalls(response);
  if (calls.length === 0 && response.output.some((item) => item.type === "message")) break;
  const input = await answer(calls); // none: continue from the response as it is
  response = completed(
    await client.responses.create({ model, previous_response_id: response.id, input, tools })
  );
  ids.push(response.id);
}

const first = await client.responses.retrieve(ids[0]);
const inputItems = [];
for await (const item of client.responses.inputItems.list(response.id)) inputItems.push(item.type);
console.log(
  JSON.stringify({
    text: response.output_text,
    responses: ids,
    previous_response_id: response.previous_response_id,
    first_status: first.status,
    input_items: inputItems,
  })
);
