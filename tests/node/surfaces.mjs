// What the npm `openai` in use has beside the Responses API's HTTP routes: the Responses WebSocket
// (`openai/resources/responses/ws`), the lane helper over it, and `client.beta.agents`. Prints one
// JSON line of booleans.
import OpenAI from "openai";

const has = async (module) => import(module).then(() => true, () => false);
const client = new OpenAI({ maxRetries: 0 });
console.log(
  JSON.stringify({
    responses_websocket: await has("openai/resources/responses/ws"),
    lanes: await has("openai/lib/responses/responses-websocket-session"),
    agents_api: client.beta.agents !== undefined,
  })
);
