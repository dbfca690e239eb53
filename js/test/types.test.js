// The declarations type-check against uses of the package (tsc --noEmit over test/types/), and
// require() and import give the same functions (one running server for Jest's setup and teardown).
import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import * as esm from "ptc-emulator";
import { expect, test } from "vitest";

const require = createRequire(import.meta.url);
const ROOT = fileURLToPath(new URL("..", import.meta.url));

test("the TypeScript declarations check (tsc --noEmit)", async () => {
  const tsc = require.resolve("typescript/bin/tsc");
  const done = await promisify(execFile)(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: ROOT }).catch((e) => e);
  expect(`${done.stdout}${done.stderr ?? ""}`).toBe("");
  expect(done.code ?? 0).toBe(0);
});

test("require() and import give the same package", () => {
  const cjs = require("ptc-emulator");
  expect(Object.keys(cjs).sort()).toEqual(Object.keys(esm).sort());
  for (const name of Object.keys(cjs)) expect(esm[name], name).toBe(cjs[name]);
});
