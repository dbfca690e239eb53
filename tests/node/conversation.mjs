// The guide's loop in a conversation: create one, send the prompt in it, send the function results
// in it, then list its items. Prints one JSON line: the conversation's id and metadata as retrieved,
// the final text, the conversation each response names, and the items' types, oldest first.
import OpenAI from "openai";
import { answer, completed, functionCalls, prompt, tools } from "./guide.mjs";

const client = new OpenAI();
const model = "YOUR_MODEL_ID";

const created = await client.conversations.create({ metadata: { flow: "guide" } });
const conversation = created.id;
const responses = [completed(await client.responses.create({ model, conversation, input: prompt, tools }))];
const outputs = await answer(functionCalls(responses[0]));
responses.push(completed(await client.responses.create({ model, conversation, input: outputs, tools })));

const items = [];
for await (const item of client.conversations.items.list(conversation, { order: "asc" })) items.push(item.type);
const retrieved = await client.conversations.retrieve(conversation);
console.log(
  JSON.stringify({
    conversation,
    metadata: retrieved.metadata,
    text: responses.at(-1).output_text,
    named: responses.map((response) => response.conversation?.id ?? null),
    items,
  })
);
