// docs/javascript.md shows this file: one-line verifications of what an agent did, and the
// message a failed one throws.
import { emulatorScope } from "ptc-emulator";
import { expect, onTestFinished, test } from "vitest";

import { runAgent } from "../examples/agent.js";

const SHORTAGE = {
  name: "shortage",
  match: { input: "(?i)shortage for (?P<sku>sku_\\w+)", tools: ["get_inventory", "get_demand"] },
  turns: [
    {
      program: `
        const stock = await tools.get_inventory({ sku: {{ sku }} });
        const demand = await tools.get_demand({ sku: {{ sku }} });
        text(String(demand.requested_units - stock.available_units));`,
    },
    { message: "{{ result }} units short." },
  ],
};

test("the agent asked for the stock and the demand of the one SKU", async () => {
  const scope = emulatorScope();
  await scope.addScenario(SHORTAGE);
  onTestFinished(scope.applyEnv());

  expect(await runAgent("What is the shortage for sku_123?")).toBe("8 units short.");

  await scope.expectCalled("get_inventory", { times: 1, args: { sku: "sku_123" }, route: "program" });
  await scope.expectCalled("get_demand", { args: (args) => args.sku.startsWith("sku_") });
  await scope.expectCalled("notify_planner", { times: 0 });
  await scope.expectRequests({ times: 3, input: /shortage/i, model: "gpt-test", scenario: "shortage" });
  await expect(scope.expectCalled("get_demand", { times: 2 })).rejects.toThrow(
    [
      "Expected get_demand to be called 2 times, but it was called 1 time.",
      `Requests in scope '${scope.name}':`,
      "  #1 POST /v1/responses -> 200, scenario 'shortage': program, function_call",
      '      get_inventory({"sku":"sku_123"}) [program]',
      "  #2 POST /v1/responses -> 200, scenario 'shortage': function_call",
      '      get_demand({"sku":"sku_123"}) [program]',
      "  #3 POST /v1/responses -> 200, scenario 'shortage': program_output, message",
    ].join("\n"),
  );
});
