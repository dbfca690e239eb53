// The function-tool flow of the Agents API's "Functions" guide, through `client.beta.agents`:
// a session with `environment.type: none` and the `get_customer` function; stream its events
// until `agent.session.requires_action`, answer each required action with the guide's
// JavaScript code, stream until `agent.session.idle`, and read the session's items. Prints one
// JSON line: the session id, the actions answered, the event types seen, the items' types, the
// final message's text and the session's status at the end.
import OpenAI from "openai";

const client = new OpenAI({ maxRetries: 0 });

function getCustomer({ customer_id }) {
  const customer = customer_id === "123" ? { name: "Example Customer", plan: "pro" } : null;
  return { found: customer !== null, customer };
}

const session = await client.beta.agents.sessions.create({
  environment: { type: "none" },
  agent: {
    model: "gpt-5",
    tools: [
      {
        type: "function",
        name: "get_customer",
        description: "Look up a customer by ID.",
        parameters: {
          type: "object",
          properties: { customer_id: { type: "string" } },
          required: ["customer_id"],
          additionalProperties: false,
        },
      },
    ],
  },
  input: "Look up customer 123.",
});
const sessionId = session.id;
const seen = [];

// A subscription's first event is the session's state now, then every event as it happens.
const subscribe = () => client.beta.agents.sessions.events.stream(sessionId);

async function until(events, type) {
  for await (const event of events) {
    seen.push(event.type);
    if (event.type === type) {
      return event;
    }
    if (event.type === "agent.session.failed") throw new Error(`the session failed: ${JSON.stringify(event)}`);
  }
  throw new Error(`the event stream ended before ${type}`);
}

const answered = [];
const waiting = await until(await subscribe(), "agent.session.requires_action");
// Subscribed before answering, so that no event of the rest of the turn goes unseen.
const rest = await subscribe();
for (const action of waiting.session.required_actions) {
  // The guide's code, as written for JavaScript:
  const result = {
    turn_id: action.turn_id,
    call_id: action.call_id,
  };
  let outcome;

  outcome = {
    success: true,
    output: JSON.stringify(getCustomer(action.arguments)),
  };

  await client.beta.agents.sessions.events.create(sessionId, {
    events: [
      { type: "agent.session.input.tool_result", ...result, ...outcome },
    ],
  });
  answered.push({ name: action.name, arguments: action.arguments });
}
await until(rest, "agent.session.idle");

const items = [];
for await (const item of client.beta.agents.sessions.items.list(sessionId)) items.push(item);
const final = items.findLast((item) => item.type === "message");
const done = await client.beta.agents.sessions.retrieve(sessionId);
console.log(
  JSON.stringify({
    session: sessionId,
    answered,
    events: seen,
    items: items.map((item) => item.type),
    text: final?.content.map((part) => part.text).join(""),
    status: done.status,
    required_actions: done.required_actions,
  })
);
