// The server's life: a Vitest run that uses the package's global setup leaves no process behind,
// whether its teardown stops the server or it forgets to; a command that cannot serve fails the
// start with the reason.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { startEmulator } from "ptc-emulator";
import { afterEach, expect, test } from "vitest";

const require = createRequire(import.meta.url);
const VITEST = join(require.resolve("vitest/package.json"), "..", "vitest.mjs");
const FIXTURE = fileURLToPath(new URL("./fixtures/run", import.meta.url));
const dirs = [];

afterEach(() => dirs.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function nestedRun(env) {
  const dir = mkdtempSync(join(tmpdir(), "ptc-emulator-run-"));
  dirs.push(dir);
  const processesFile = join(dir, "processes.json");
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [VITEST, "run", "--root", FIXTURE, "--color=false"], {
      // Its failing test on purpose leaves no trace among this run's (traces.test.js checks them).
      env: { ...process.env, PTC_EMULATOR_URL: "", PTC_EMULATOR_TRACES: "off", PROCESSES_FILE: processesFile, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    child.on("error", reject);
    child.on("exit", (code) => resolve({ code, output, processes: JSON.parse(readFileSync(processesFile, "utf8")) }));
  });
}

/** What `start()` rejects with, called with no PTC_EMULATOR_URL (this run's server) in the env. */
async function withoutURL(start) {
  const given = process.env.PTC_EMULATOR_URL;
  delete process.env.PTC_EMULATOR_URL;
  try {
    return await start().then(
      (emulator) => emulator.stop().then(() => new Error("it started")),
      (e) => e,
    );
  } finally {
    process.env.PTC_EMULATOR_URL = given;
  }
}

function running(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !["Z", "X"].includes(stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3));
  } catch {
    return false;
  }
}

/** The server's processes still running: its group's and its workers'. A process the run's exit
 *  killed may take a moment to die, so this waits (up to 10 s) for the answer to become empty. */
async function leftovers({ pid, workers }) {
  const { groupMembers } = require("../src/server.cjs");
  const left = () => [...new Set([...groupMembers(pid), ...[pid, ...workers].filter(running)])];
  const end = Date.now() + 10000;
  while (left().length && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 25));
  return left();
}

async function refused(root) {
  const reached = await fetch(`${root}/_emulator/health`).then(
    () => true,
    () => false,
  );
  return !reached;
}

test("a run that stops the server in its teardown leaves no process", async () => {
  const run = await nestedRun({});

  expect(run.code, run.output).toBe(0);
  const { pid, root, workers } = run.processes;
  expect(workers.length).toBe(1);
  expect(run.processes.dataDir).toMatch(/ptc-emulator-/);
  expect(await leftovers({ pid, workers })).toEqual([]);
  expect(await refused(root)).toBe(true);
  expect(existsSync(run.processes.dataDir)).toBe(false);
});

test("a run that forgets to stop the server still leaves no process, and its failure shows the calls", async () => {
  const run = await nestedRun({ SKIP_TEARDOWN: "1", EXPECT_TOOL: "get_demand" });

  expect(run.code).toBe(1);
  expect(run.output).toContain("Expected get_demand to be called at least once, but it was called 0 times.");
  expect(run.output).toContain("get_inventory({\"sku\":\"sku_5\"}) [direct]");
  const { pid, root, workers } = run.processes;
  expect(await leftovers({ pid, workers })).toEqual([]);
  expect(await refused(root)).toBe(true);
  expect(existsSync(run.processes.dataDir)).toBe(false);
});

test("a signal that ends the Node process ends the server too", async () => {
  const script = [
    'const { startEmulator } = require("ptc-emulator");',
    "startEmulator({ workers: 1 }).then(async (e) => {",
    "  const health = await (await fetch(`${e.rootURL}/_emulator/health`)).json();",
    "  console.log(JSON.stringify({ pid: e.pid, root: e.rootURL, workers: health.workers, dataDir: e.dataDir }));",
    "  setInterval(() => {}, 1000);", // stays up until the signal
    "});",
  ].join("\n");
  const env = { ...process.env, PTC_EMULATOR_URL: "" };
  const child = spawn(process.execPath, ["-e", script], { cwd: FIXTURE, env, stdio: ["ignore", "pipe", "inherit"] });
  const started = await new Promise((resolve) => child.stdout.once("data", (chunk) => resolve(JSON.parse(chunk))));
  const ended = new Promise((resolve) => child.once("exit", (code, signal) => resolve(signal)));

  child.kill("SIGINT");

  expect(await ended).toBe("SIGINT"); // the default course: the process ends by the signal
  expect(await leftovers(started)).toEqual([]);
  expect(await refused(started.root)).toBe(true);
  expect(existsSync(started.dataDir)).toBe(false);
});

test("with PTC_EMULATOR_URL set, startEmulator() uses that server and stop() leaves it running", async () => {
  const given = process.env.PTC_EMULATOR_URL; // this run's server
  const emulator = await startEmulator({ command: ["/nonexistent/ptc-emulator"] });

  expect([emulator.url, emulator.pid]).toEqual([given, undefined]);
  await emulator.stop();
  expect(process.env.PTC_EMULATOR_URL).toBe(given);
  expect((await fetch(`${emulator.rootURL}/_emulator/health`)).status).toBe(200);
});

test("a PTC_EMULATOR_URL where nothing answers fails the start and says so", async () => {
  const given = process.env.PTC_EMULATOR_URL;
  process.env.PTC_EMULATOR_URL = "http://127.0.0.1:9/v1"; // the discard port: nothing listens
  try {
    const failure = await startEmulator().catch((e) => e);
    expect(failure.message).toContain("no emulator answers at http://127.0.0.1:9/v1, which PTC_EMULATOR_URL");
  } finally {
    process.env.PTC_EMULATOR_URL = given;
  }
});

test("a command that is not there fails the start and says what to do", async () => {
  const failure = await withoutURL(() => startEmulator({ command: ["/nonexistent/ptc-emulator"] }));
  expect(failure.message).toContain("cannot run `/nonexistent/ptc-emulator serve --host 127.0.0.1 --port 0");
  expect(failure.message).toContain("set PTC_EMULATOR_COMMAND or the `command` option");
});

test("a server that exits before serving fails the start with its output", async () => {
  const script = "console.error('no such option: ' + process.argv.slice(1).join(' ')); process.exit(2)";
  const options = { command: [process.execPath, "-e", script], args: ["--bogus"] };
  const failure = await withoutURL(() => startEmulator(options));
  expect(failure.message).toMatch(/exited \(status 2\) before serving/);
  expect(failure.message).toContain("no such option: serve --host 127.0.0.1 --port 0");
  expect(failure.message).toContain("--bogus");
});
