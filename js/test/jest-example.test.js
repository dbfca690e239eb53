// The docs' Jest example (examples/jest) under Jest itself, as a user runs it: its config's
// global setup starts the server, its test's agent runs as a child process in the test's scope,
// and its global teardown stops the server.
import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { expect, test } from "vitest";

const require = createRequire(import.meta.url);
const JEST = require.resolve("jest/bin/jest");
const CONFIG = fileURLToPath(new URL("../examples/jest/jest.config.cjs", import.meta.url));

async function jest(env) {
  const args = [JEST, "--config", CONFIG, "--ci", "--colors=false"];
  const run = await promisify(execFile)(process.execPath, args, { env: { ...process.env, ...env } }).catch((e) => e);
  return { code: run.code ?? 0, output: `${run.stdout}${run.stderr}` };
}

test("the Jest example passes under Jest, with a server of its own", async () => {
  const run = await jest({ PTC_EMULATOR_URL: "" }); // not this run's server: the example starts one

  expect(run.code, run.output).toBe(0);
  expect(run.output).toContain("✓ the agent, run as a child process, answers from one program");
  expect(run.output).toMatch(/Tests:\s+1 passed, 1 total/);
});
