// The loop over one Responses WebSocket (`openai/resources/responses/ws`, on the `ws` package):
// each `response.create` after the first continues from `previous_response_id` with the new
// function results. Events are read raw from the socket's async iterator; each response's
// sequence numbers must rise. Prints one JSON line: the final text, the response ids in order,
// the events seen and the socket's close code.
import OpenAI from "openai";
import { ResponsesWS } from "openai/resources/responses/ws";
import { addOutputs, messageText, prompt, tools } from "./adder.mjs";

const client = new OpenAI({ maxRetries: 0 });
const socket = new ResponsesWS(client);
const messages = socket.stream();
const model = "emulated";
let events = 0;

async function nextResponse() {
  let last = -1;
  for (;;) {
    const { value, done } = await messages.next();
    if (done) throw new Error("the socket closed before the response ended");
    if (value.type === "error") throw value.error;
    if (value.type === "close") throw new Error(`the socket closed: ${value.code} ${value.reason}`);
    if (value.type !== "message") continue;
    const event = value.message;
    events += 1;
    if (event.sequence_number <= last) throw new Error(`sequence went from ${last} to ${event.sequence_number}`);
    last = event.sequence_number;
    if (event.type === "response.completed") return event.response;
    if (event.type === "response.failed" || event.type === "response.incomplete") {
      throw new Error(`Response ended with status ${event.response.status}`);
    }
  }
}

socket.send({ type: "response.create", model, input: prompt([1, 2, 10, 100]), tools });
const responses = [await nextResponse()];
for (let outputs = addOutputs(responses[0]); outputs.length > 0; outputs = addOutputs(responses.at(-1))) {
  const previous_response_id = responses.at(-1).id;
  socket.send({ type: "response.create", model, previous_response_id, input: outputs, tools });
  responses.push(await nextResponse());
}
socket.close();
let closed = null;
for (let next = await messages.next(); !next.done; next = await messages.next()) {
  if (next.value.type === "close") closed = next.value.code;
}

console.log(
  JSON.stringify({ answer: messageText(responses.at(-1)), responses: responses.map((r) => r.id), events, closed })
);
