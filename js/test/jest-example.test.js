// The docs' Jest example (examples/jest), called as Jest calls it: the config's global setup, the
// test file's tests (Jest's `test` and `expect` globals are Vitest's here), the global teardown.
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { expect, test } from "vitest";

const require = createRequire(import.meta.url);
const DIR = fileURLToPath(new URL("../examples/jest/", import.meta.url));

test("the Jest example's setup, test and teardown", async () => {
  const config = require(path.join(DIR, "jest.config.cjs"));
  const setup = require(path.join(DIR, config.globalSetup));
  const teardown = require(path.join(DIR, config.globalTeardown));
  const outer = process.env.PTC_EMULATOR_URL; // this run's server, started by its global setup
  delete process.env.PTC_EMULATOR_URL; // else the setup would use that one, as a run would given it

  await setup(); // in this test worker no server runs yet: it starts one of its own
  const url = process.env.PTC_EMULATOR_URL;
  const tests = [];
  try {
    expect(url).not.toBe(outer);
    Object.assign(globalThis, { test: (name, fn) => tests.push([name, fn]), expect });
    require(path.join(DIR, "agent.test.cjs"));
    expect(tests.map(([name]) => name)).toEqual(["the agent, run as a child process, answers from one program"]);
    for (const [, fn] of tests) await fn();
  } finally {
    delete globalThis.test;
    delete globalThis.expect;
    await teardown();
  }

  expect(process.env.PTC_EMULATOR_URL).toBeUndefined();
  process.env.PTC_EMULATOR_URL = outer;
  const reached = await fetch(`${url.replace(/\/v1$/, "")}/_emulator/health`).then(
    () => true,
    () => false,
  );
  expect(reached).toBe(false);
});
