// Compaction of a window in which a program is paused: the first response (store:false) pauses the
// guide's program at its two calls; `responses.compact()` compacts the window; the next request
// sends the compacted output, as the SDK says ("a list of all user messages, followed by a single
// compaction item"), then the function results, and the program resumes from inside the window.
// Prints one JSON line: the final text and what the compacted response held.
import OpenAI from "openai";
import { toResponseInputItems } from "openai/lib/responses/ResponseInputItems";
import { answer, completed, functionCalls, prompt, tools } from "./guide.mjs";

const client = new OpenAI();
const model = "YOUR_MODEL_ID";

const window = [{ role: "user", content: prompt }];
const paused = completed(await client.responses.create({ model, store: false, input: window, tools }));
window.push(...toResponseInputItems(paused.output));
const outputs = await answer(functionCalls(paused));

const compacted = await client.responses.compact({ model, input: window });
const input = [...toResponseInputItems(compacted.output), ...outputs];
const final = completed(await client.responses.create({ model, store: false, input, tools }));

console.log(
  JSON.stringify({
    text: final.output_text,
    object: compacted.object,
    compacted: compacted.output.map((item) => (item.type === "message" ? `message:${item.role}` : item.type)),
    sealed: compacted.output.filter((item) => item.type === "compaction").every((item) => !!item.encrypted_content),
    usage: compacted.usage,
  })
);
