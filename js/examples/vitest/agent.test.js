import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { emulatorScope } from "ptc-emulator";
import { expect, inject, onTestFinished, test } from "vitest";

import { runAgent } from "../agent.js";

const SHORTAGE = {
  name: "shortage",
  match: { input: "(?i)shortage for (?P<sku>sku_\\w+)", tools: ["get_inventory", "get_demand"] },
  turns: [
    {
      program: `
        const [stock, demand] = await Promise.all([
          tools.get_inventory({ sku: {{ sku }} }),
          tools.get_demand({ sku: {{ sku }} }),
        ]);
        text(JSON.stringify({ sku: stock.sku,
                              shortage: Math.max(demand.requested_units - stock.available_units, 0) }));`,
    },
    { message: "{{ data.sku }} is short by {{ data.shortage }} units." },
  ],
};

test("the agent answers from one program", async () => {
  const scope = emulatorScope(); // this test's own scenarios and journal
  await scope.addScenario(SHORTAGE);
  onTestFinished(scope.applyEnv()); // OPENAI_BASE_URL is the scoped URL until the test ends

  expect(await runAgent("What is the shortage for sku_123?")).toBe("sku_123 is short by 8 units.");

  await scope.expectCalled("get_inventory", 1);
  await scope.expectCalled("get_demand", 1);
  await scope.expectAllScenariosUsed();
  const calls = await scope.calls();
  expect(calls.map((call) => [call.name, call.route, call.arguments])).toEqual([
    ["get_inventory", "program", { sku: "sku_123" }],
    ["get_demand", "program", { sku: "sku_123" }],
  ]);
});

test("the agent as a child process", async () => {
  const scope = emulatorScope({ url: inject("ptcEmulatorURL") }); // the URL global setup provided
  await scope.addScenario(SHORTAGE);

  const agent = fileURLToPath(new URL("../agent.js", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [agent, "Any shortage for sku_9?"], {
    env: { ...process.env, ...scope.env },
  });

  expect(stdout.trim()).toBe("sku_9 is short by 8 units.");
  await scope.expectCalled("get_demand", 1);
  await scope.expectNoUnmatched();
});
