// The call assertions: they pass on what happened, and when they fail their message shows the
// requests and calls that did happen.
import { EmulatorAssertionError, emulatorScope } from "ptc-emulator";
import OpenAI from "openai";
import { expect, test } from "vitest";

const TOOL = { type: "function", name: "get_inventory", parameters: { type: "object", properties: { sku: { type: "string" } } } };
const LOOKUP = {
  name: "lookup",
  match: { input: "(?i)stock of (?P<sku>sku_\\w+)" },
  turns: [{ call: { name: "get_inventory", arguments: { sku: "{{ sku }}" } } }, { message: "done" }],
};

async function lookUp(scope) {
  const client = new OpenAI({ baseURL: scope.baseURL, apiKey: scope.apiKey, maxRetries: 0 });
  const first = await client.responses.create({ model: "m", input: "Stock of sku_5?", tools: [TOOL] });
  const call = first.output.find((item) => item.type === "function_call");
  await client.responses.create({
    model: "m",
    previous_response_id: first.id,
    input: [{ type: "function_call_output", call_id: call.call_id, output: '{"units": 3}' }],
    tools: [TOOL],
  });
  return client;
}

test("calls() and expectCalled() count what the journal shows", async () => {
  const scope = emulatorScope();
  await scope.addScenario(LOOKUP);
  await lookUp(scope);

  const calls = await scope.calls("get_inventory");
  expect(calls).toMatchObject([{ name: "get_inventory", route: "direct", arguments: { sku: "sku_5" }, scenario: "lookup", request: 1 }]);
  expect(await scope.calls("get_demand")).toEqual([]);
  expect(await scope.expectCalled("get_inventory")).toBe(1);
  await scope.expectCalled("get_demand", 0);
  await scope.expectAllScenariosUsed();
  await scope.expectNoUnmatched();
});

test("a failed expectCalled() shows the calls that happened instead", async () => {
  const scope = emulatorScope();
  await scope.addScenario(LOOKUP);
  await lookUp(scope);

  const missing = await scope.expectCalled("get_demand").catch((e) => e);
  expect(missing).toBeInstanceOf(EmulatorAssertionError);
  expect(missing.message).toContain("Expected get_demand to be called at least once, but it was called 0 times.");
  expect(missing.message).toContain(`Requests in scope '${scope.name}':`);
  expect(missing.message).toContain("#1 POST /v1/responses -> 200, scenario 'lookup': function_call");
  expect(missing.message).toContain('get_inventory({"sku":"sku_5"}) [direct]');
  expect(missing.message).toContain("#2 POST /v1/responses -> 200, scenario 'lookup'");

  const twice = await scope.expectCalled("get_inventory", 2).catch((e) => e);
  expect(twice.message).toContain("Expected get_inventory to be called 2 times, but it was called 1 time.");
});

test("expectAllScenariosUsed() names the unused scenario and shows what matched instead", async () => {
  const scope = emulatorScope();
  await scope.addScenario(LOOKUP);
  await scope.addScenario({ name: "never", match: { input: "nobody asks this" }, turns: [{ message: "x" }] });
  await lookUp(scope);

  const failure = await scope.expectAllScenariosUsed().catch((e) => e);
  expect(failure).toBeInstanceOf(EmulatorAssertionError);
  expect(failure.message).toContain("Scenario never used: 'never'.");
  expect(failure.message).toContain("scenario 'lookup'");
});

test("expectNoUnmatched() shows the request no scenario matched and why", async () => {
  const scope = emulatorScope();
  await scope.addScenario(LOOKUP);
  const client = new OpenAI({ baseURL: scope.baseURL, apiKey: scope.apiKey, maxRetries: 0 });
  const asked = client.responses.create({ model: "m", input: "How many units are there?", tools: [TOOL] });
  await expect(asked).rejects.toThrow(/No scenario matches/);

  const failure = await scope.expectNoUnmatched().catch((e) => e);
  expect(failure.message).toContain("1 request matched no scenario: #1.");
  expect(failure.message).toContain("#1 POST /v1/responses -> 400: no_scenario_matched: ");
  expect(failure.message).toContain("'lookup'");
});

test("a scope with no requests says so", async () => {
  const scope = emulatorScope();
  const failure = await scope.expectCalled("get_inventory").catch((e) => e);
  expect(failure.message).toContain(`No request reached scope '${scope.name}'.`);
});

test("calls() sees the calls of a streamed response", async () => {
  const scope = emulatorScope();
  await scope.addScenario(LOOKUP);
  const client = new OpenAI({ baseURL: scope.baseURL, apiKey: scope.apiKey, maxRetries: 0 });
  const stream = await client.responses.create({ model: "m", input: "Stock of sku_8?", tools: [TOOL], stream: true });
  const types = [];
  for await (const event of stream) types.push(event.type);

  expect(types.at(-1)).toBe("response.completed");
  expect((await scope.calls()).map((call) => [call.name, call.arguments])).toEqual([["get_inventory", { sku: "sku_8" }]]);
});

test("calls() lists the calls a program made to tools the server answers itself", async () => {
  const scope = emulatorScope();
  await scope.setHosted({ code_interpreter: [{ code: "sum\\(", logs: "6\n" }] });
  const client = new OpenAI({ baseURL: scope.baseURL, apiKey: scope.apiKey, maxRetries: 0 });
  const tools = [
    { type: "programmatic_tool_calling" },
    { type: "code_interpreter", container: { type: "auto" }, allowed_callers: ["programmatic"] },
  ];
  const program = "const run = await tools.code_interpreter({ code: 'sum([1, 2, 3])' });\ntext(run.logs);";
  const response = await client.responses.create({ model: "m", input: `\`\`\`js\n${program}\n\`\`\``, tools });

  expect(response.output_text).toContain("6");
  expect(await scope.calls("code_interpreter")).toMatchObject([
    { name: "code_interpreter", type: "code_interpreter_call", route: "program", status: "completed" },
  ]);
  await scope.setHosted(null);
});
