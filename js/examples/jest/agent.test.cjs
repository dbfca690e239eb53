const { execFile } = require("node:child_process");
const path = require("node:path");
const { promisify } = require("node:util");

const { emulatorScope } = require("ptc-emulator");

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
        text(JSON.stringify({ sku: stock.sku, shortage: demand.requested_units - stock.available_units }));`,
    },
    { message: "{{ data.sku }} is short by {{ data.shortage }} units." },
  ],
};

test("the agent, run as a child process, answers from one program", async () => {
  const scope = emulatorScope(); // named after the test, with a random suffix
  await scope.addScenario(SHORTAGE);

  const agent = path.join(__dirname, "..", "agent.js");
  const { stdout } = await promisify(execFile)(process.execPath, [agent, "What is the shortage for sku_4?"], {
    env: { ...process.env, ...scope.env }, // OPENAI_BASE_URL: the scoped URL
  });

  expect(stdout.trim()).toBe("sku_4 is short by 8 units.");
  await scope.expectCalled("get_inventory", 1);
  await scope.expectAllScenariosUsed();
});
