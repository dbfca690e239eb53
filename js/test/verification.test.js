// expectCalled() with counts, arguments and routes, and expectRequests(): they pass on what
// happened, and a failure's message (checked whole) shows the scope's requests and calls.
import { EmulatorAssertionError, emulatorScope } from "ptc-emulator";
import OpenAI from "openai";
import { expect, test } from "vitest";

const TOOLS = [
  {
    type: "function",
    name: "get_inventory",
    parameters: { type: "object", properties: { sku: { type: "string" } }, required: ["sku"] },
    allowed_callers: ["programmatic", "direct"],
  },
  { type: "programmatic_tool_calling" },
];
const RESTOCK = {
  name: "restock",
  match: { input: "(?i)restock (?P<sku>sku_\\w+)" },
  turns: [
    {
      program:
        "const a = await tools.get_inventory({ sku: {{ sku }} });\n" +
        "const b = await tools.get_inventory({ sku: 'sku_9' });\n" +
        "text(String(a.units + b.units));",
    },
    { call: { name: "get_inventory", arguments: { sku: "{{ sku }}" } } },
    { message: "Restocked {{ sku }}." },
  ],
};
const CLERK = {
  name: "clerk",
  match: { input: "(?i)hello", instructions: "(?i)clerk" },
  turns: [{ message: "Hello from the desk." }],
};

function client(scope) {
  return new OpenAI({ baseURL: scope.baseURL, apiKey: scope.apiKey, maxRetries: 0 });
}

/** A store:false loop answering every call with 3 units. */
async function restock(scope) {
  await scope.addScenario(RESTOCK);
  const input = [{ role: "user", content: "Please restock sku_123" }];
  for (;;) {
    const response = await client(scope).responses.create({ model: "gpt-test", store: false, input, tools: TOOLS });
    input.push(...response.output);
    const calls = response.output.filter((item) => item.type === "function_call");
    if (calls.length === 0) return response.output_text;
    for (const call of calls) {
      const output = { type: "function_call_output", call_id: call.call_id, output: JSON.stringify({ units: 3 }) };
      if (call.caller?.type === "program") output.caller = call.caller;
      input.push(output);
    }
  }
}

function requests(scope) {
  return [
    `Requests in scope '${scope.name}':`,
    "  #1 POST /v1/responses -> 200, scenario 'restock': program, function_call",
    '      get_inventory({"sku":"sku_123"}) [program]',
    "  #2 POST /v1/responses -> 200, scenario 'restock': function_call",
    '      get_inventory({"sku":"sku_9"}) [program]',
    "  #3 POST /v1/responses -> 200, scenario 'restock': program_output, function_call",
    '      get_inventory({"sku":"sku_123"}) [direct]',
    "  #4 POST /v1/responses -> 200, scenario 'restock': message",
  ].join("\n");
}

test("expectCalled() counts direct and program calls, by arguments and route", async () => {
  const scope = emulatorScope();
  expect(await restock(scope)).toBe("Restocked sku_123.");

  expect(await scope.expectCalled("get_inventory", 3)).toBe(3);
  expect(await scope.expectCalled("get_inventory", { times: 2, args: { sku: "sku_123" } })).toBe(2);
  expect(await scope.expectCalled("get_inventory", { times: 2, route: "program" })).toBe(2);
  expect(await scope.expectCalled("get_inventory", { route: "direct", args: { sku: "sku_123" } })).toBe(1);
  expect(await scope.expectCalled("get_inventory", { times: 1, args: (args) => args.sku.endsWith("9") })).toBe(1);
  expect(await scope.expectCalled("get_demand", { times: 0 })).toBe(0);
});

test("a failed expectCalled() says what was asked and shows the calls made instead", async () => {
  const scope = emulatorScope();
  await restock(scope);
  const failure = (options, name = "get_inventory") => scope.expectCalled(name, options).catch((e) => e);

  const wrongCount = await failure({ times: 1, args: { sku: "sku_123" } });
  const wrongArgs = await failure({ args: { sku: "sku_7" }, route: "program" });
  const inStock = () => false;
  const predicate = await failure({ times: 2, args: inStock });
  const unwanted = await failure({ times: 0, route: "direct" });
  const other = await failure(undefined, "get_demand");

  expect(wrongCount).toBeInstanceOf(EmulatorAssertionError);
  expect(wrongCount.message).toBe(
    'Expected get_inventory to be called 1 time with arguments including {"sku":"sku_123"}, but it was called ' +
      `2 times (3 times whatever the arguments).\n${requests(scope)}`,
  );
  expect(wrongArgs.message).toBe(
    'Expected get_inventory to be called at least once by a program with arguments including {"sku":"sku_7"}, ' +
      `but it was called 0 times (2 times whatever the arguments).\n${requests(scope)}`,
  );
  expect(predicate.message).toBe(
    "Expected get_inventory to be called 2 times with arguments for which inStock() is true, but it was called " +
      `0 times (3 times whatever the arguments).\n${requests(scope)}`,
  );
  expect(unwanted.message).toBe(
    `Expected get_inventory not to be called directly, but it was called 1 time.\n${requests(scope)}`,
  );
  expect(other.message).toBe(
    `Expected get_demand to be called at least once, but it was called 0 times.\n${requests(scope)}`,
  );
});

test("expectRequests() counts the requests of a kind and resolves to them", async () => {
  const scope = emulatorScope();
  await scope.addScenario(CLERK);
  await client(scope).responses.create({ model: "m", instructions: "You are a stock clerk.", input: "Hello" });
  const input = [
    { role: "developer", content: "You are a shipping clerk." },
    { role: "user", content: "hello again" },
  ];
  await client(scope).responses.create({ model: "gpt-test", input });

  const [stock] = await scope.expectRequests({ times: 1, instructions: /stock clerk/i });
  const clerks = await scope.expectRequests({ times: 2, instructions: "clerk" });
  await scope.expectRequests({ times: 1, input: /again/, model: "gpt-.*", scenario: "clerk", status: 200 });
  await scope.expectRequests({ where: (entry) => entry.route.includes("message") });
  await scope.expectRequests({ times: 0, status: 400 });

  expect(stock.request.instructions).toBe("You are a stock clerk.");
  expect(clerks.map((entry) => entry.seq)).toEqual([stock.seq, clerks[1].seq]);
  expect(clerks[1].request.input[0].content).toBe("You are a shipping clerk.");
});

test("a failed expectRequests() shows every request with what was asked of it", async () => {
  const scope = emulatorScope();
  await scope.addScenario(CLERK);
  await client(scope).responses.create({ model: "m", instructions: "You are a stock clerk.", input: "Hello" });
  const input = [
    { role: "system", content: "Be brief." },
    { role: "developer", content: "You are a clerk." },
    { role: "user", content: "hello again" },
  ];
  await client(scope).responses.create({ model: "gpt-test", input });
  const failure = (options) => scope.expectRequests(options).catch((e) => e);

  const twice = await failure({ times: 1, instructions: /clerk/ });
  const none = await failure({ instructions: "pirate", scenario: "clerk" });
  const models = await failure({ times: 0, model: /gpt-.*/ });
  const count = await failure({ times: 3 });

  const lines = [
    `Requests in scope '${scope.name}':`,
    "  #1 POST /v1/responses -> 200, scenario 'clerk': message",
    "  #2 POST /v1/responses -> 200, scenario 'clerk': message",
  ];
  const withInstructions = [
    lines[0],
    lines[1],
    '      instructions: "You are a stock clerk."',
    lines[2],
    '      instructions: "Be brief."; "You are a clerk."',
  ].join("\n");
  expect(twice).toBeInstanceOf(EmulatorAssertionError);
  expect(twice.message).toBe(
    `Expected exactly 1 request whose instructions match /clerk/, but 2 did (#1, #2).\n${withInstructions}`,
  );
  expect(none.message).toBe(
    "Expected at least one request whose instructions match /pirate/ and answered by scenario 'clerk', " +
      `but none did.\n${withInstructions}`,
  );
  expect(models.message).toBe(
    [
      "Expected no request for model /gpt-.*/, but 1 did (#2).",
      lines[0],
      lines[1],
      '      model: "m"',
      lines[2],
      '      model: "gpt-test"',
    ].join("\n"),
  );
  expect(count.message).toBe(`Expected exactly 3 requests, but there were 2.\n${lines.join("\n")}`);
});

test("a count below zero, an unknown route or a pattern of another type is a mistake", async () => {
  const scope = emulatorScope();
  await expect(scope.expectCalled("get_inventory", -1)).rejects.toThrow("times is a count (0 or more), not -1");
  await expect(scope.expectCalled("get_inventory", { route: "programmatic" })).rejects.toThrow(
    'route is "program" or "direct", not "programmatic"',
  );
  await expect(scope.expectRequests({ instructions: 3 })).rejects.toThrow("instructions is a RegExp or a string, not 3");
});
