// A failed test leaves the same trace files as under pytest: a Vitest run and a Jest run of their
// own (test/fixtures/traces, against this run's server) each fail one test on purpose and pass
// another; the failed one leaves <name>-<sha8>.html and .json holding its scope's request, the
// very text the server renders for that scope (the pytest plugin's renderer), the passing one
// none, and the run starts by removing an earlier run's traces (only those).
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { afterEach, expect, test } from "vitest";

import { testId, tracePaths } from "../src/traces.cjs";

const require = createRequire(import.meta.url);
const VITEST = join(require.resolve("vitest/package.json"), "..", "vitest.mjs");
const JEST = require.resolve("jest/bin/jest");
const FIXTURE = fileURLToPath(new URL("./fixtures/traces", import.meta.url));
const FAILED = ["the agent", "fails on purpose"];
const STALE = { object: "emulator.trace", test: "gone", scope: "s", journal: [] };
const dirs = [];

afterEach(() => dirs.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** A directory for the run's traces, holding an earlier run's trace and a file of someone else's. */
function tracesDir() {
  const dir = mkdtempSync(join(tmpdir(), "ptc-emulator-traces-"));
  dirs.push(dir);
  const stale = tracePaths(dir, "old.test.js::gone");
  writeFileSync(stale.json, JSON.stringify(STALE));
  writeFileSync(stale.html, "<html>an earlier run's</html>");
  writeFileSync(join(dir, "notes-0123abcd.json"), JSON.stringify({ object: "mine" }));
  return { dir, stale };
}

async function run(args, traces) {
  const env = { ...process.env, PTC_EMULATOR_TRACES: traces, NO_COLOR: "1" }; // PTC_EMULATOR_URL: this run's server
  delete env.FORCE_COLOR;
  const options = { cwd: FIXTURE, env, maxBuffer: 16 * 1024 * 1024 };
  const done = await promisify(execFile)(process.execPath, args, options).catch((e) => e);
  return { code: done.code ?? 0, output: `${done.stdout}${done.stderr}` };
}

async function served(scope, file, id) {
  const root = process.env.PTC_EMULATOR_URL.replace(/\/v1$/, "");
  const url = `${root}/scopes/${scope}/_emulator/inspector/${file}?test=${encodeURIComponent(id)}`;
  const reply = await fetch(url, { headers: { authorization: "Bearer sk-ptc-emulator" } });
  expect(reply.status).toBe(200);
  return reply.text();
}

/** The run left the failed test's two files alone (the earlier run's gone, the other file kept),
 *  holding its scope's request as the server renders them. */
async function expectTrace(dir, file, output) {
  const id = testId(join(FIXTURE, file), FAILED, FIXTURE);
  expect(id).toBe(`${file}::the agent::fails on purpose`);
  const { html, json } = tracePaths(dir, id);
  expect(readdirSync(dir).sort(), output).toEqual(
    [html, json].map((p) => p.slice(dir.length + 1)).concat("notes-0123abcd.json").sort(),
  );
  expect(output).toContain(`ptc-emulator trace: ${html}`);
  const text = readFileSync(json, "utf8");
  const record = JSON.parse(text);
  expect(record).toMatchObject({ object: "emulator.trace", test: id });
  expect(record.scope).toMatch(/-[0-9a-f]{12}$/); // the scope the test made
  expect(record.journal.map((entry) => [entry.scope, entry.path, entry.request.input, entry.status])).toEqual([
    [record.scope, "/v1/responses", "ping", 200],
  ]);
  expect(JSON.stringify(record.journal[0].response)).toContain("pong from the emulator");
  const page = readFileSync(html, "utf8");
  expect(page).toContain('<script type="application/json" id="ptc-trace">');
  expect(page).toContain("pong from the emulator");
  // Byte for byte what the server renders for that scope: the pytest plugin's files.
  expect(text).toBe(await served(record.scope, "trace.json", id));
  expect(page).toBe(await served(record.scope, "trace.html", id));
}

test("trace files are named by pytest's rule", async () => {
  const python = join(dirname(process.env.PTC_EMULATOR_COMMAND), "python");
  const ids = ["test/agent.test.js::the agent::fails", "dir/ünï côde.test.js::a > b::c", "::", "x".repeat(300)];
  const script =
    "import json, sys\nfrom pathlib import Path\nfrom ptc_emulator.testing.traces import trace_paths\n" +
    "print(json.dumps([[p.name for p in trace_paths(Path('d'), i)] for i in json.loads(sys.argv[1])]))";
  const { stdout } = await promisify(execFile)(python, ["-c", script, JSON.stringify(ids)]);
  const names = ids.map((id) => Object.values(tracePaths("d", id)).map((p) => p.slice(2)));
  expect(names).toEqual(JSON.parse(stdout));
});

test("a failed Vitest test leaves its trace files, a passing one none", async () => {
  const { dir } = tracesDir();
  const { code, output } = await run([VITEST, "run", "--root", FIXTURE, "--color=false"], dir);

  expect(code, output).toBe(1);
  expect(output).toMatch(/Tests\s+1 failed \| 1 passed/);
  await expectTrace(dir, "agent.check.js", output);
});

test("a failed Jest test leaves its trace files, a passing one none", async () => {
  const { dir } = tracesDir();
  const config = join(FIXTURE, "jest.config.cjs");
  const { code, output } = await run([JEST, "--config", config, "--ci", "--colors=false"], dir);

  expect(code, output).toBe(1);
  expect(output).toMatch(/Tests:\s+1 failed, 1 passed, 2 total/);
  await expectTrace(dir, "agent.check.cjs", output);
});

test("traces set off are not written", async () => {
  const { stale } = tracesDir();
  const { code, output } = await run([VITEST, "run", "--root", FIXTURE, "--color=false"], "off");

  expect(code, output).toBe(1);
  expect(output).not.toContain("ptc-emulator trace:");
  expect(existsSync(join(FIXTURE, ".ptc-emulator")), "nothing under the working directory").toBe(false);
  expect(readFileSync(stale.json, "utf8")).toBe(JSON.stringify(STALE));
});
