// Two loops at once on one Responses WebSocket, each on its own lane (`stream_id`), through the
// npm package's lane helper (`openai/lib/responses/responses-websocket-session`, 7.x): each lane
// sends its `response.create`s and reads its own responses, continuing by `previous_response_id`.
// Prints one JSON line: per lane, the final text and its response ids.
import OpenAI from "openai";
import { ResponsesWebSocketSession } from "openai/lib/responses/responses-websocket-session";
import { ResponsesWS } from "openai/resources/responses/ws";
import { addOutputs, messageText, prompt, tools } from "./adder.mjs";

const client = new OpenAI({ maxRetries: 0 });
const socket = new ResponsesWS(client);
const session = new ResponsesWebSocketSession(socket, {
  maxLanes: 4,
  maxBufferedEvents: 10_000,
  maxBufferedBytes: 16 * 1024 * 1024,
});
const model = "emulated";
// A lane sends only on an open socket.
await new Promise((resolve, reject) => {
  socket.socket.on("open", resolve);
  socket.on("error", reject);
});

async function loop(streamID, numbers) {
  const lane = session.lane(streamID);
  lane.create({ model, input: prompt(numbers), tools });
  const responses = [await lane.finalResponse()];
  for (let outputs = addOutputs(responses[0]); outputs.length > 0; outputs = addOutputs(responses.at(-1))) {
    lane.create({ model, previous_response_id: responses.at(-1).id, input: outputs, tools });
    responses.push(await lane.finalResponse());
  }
  lane.close();
  const last = responses.at(-1);
  if (last.status !== "completed") throw new Error(`Response ended with status ${last.status}`);
  return [streamID, { answer: messageText(last), responses: responses.map((r) => r.id) }];
}

const lanes = Object.fromEntries(
  await Promise.all([loop("lane-a", [1, 2, 10, 100]), loop("lane-b", [3, 4, 20, 200])])
);
session.close();
socket.close();
console.log(JSON.stringify(lanes));
