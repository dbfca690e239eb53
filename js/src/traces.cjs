"use strict";
// A failed test's trace files, as the pytest plugin writes them: .ptc-emulator/traces/<name>-<sha8>.html
// (the inspector's page with the test's conversations inside, that opens from disk) and .json (its
// journal). The server renders both (GET /_emulator/inspector/trace.{html,json} in the test's scope);
// this names them, writes them, and clears an earlier run's. Which tests fail the runner tells:
// Vitest through onTestFailed (index.mjs hooks it), Jest through the environment in jest-environment.cjs.

const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");

const TRACES_ENV = "PTC_EMULATOR_TRACES";
const DEFAULT_DIR = ".ptc-emulator/traces";
const OFF = new Set(["off", "none", "no", "false", "0"]);
// Called by every EmulatorScope made, when a runner's hook is installed (kept on globalThis: the
// scope may be made in another copy of this package, or in Jest's sandbox).
const ON_SCOPE = Symbol.for("ptc-emulator.onScope");
const CLAIMED = Symbol.for("ptc-emulator.traceNames");
const OWN_NAME = /^[A-Za-z0-9._-]*-[0-9a-f]{8}\.json$/;

/** Where traces go: PTC_EMULATOR_TRACES (a directory, relative to `cwd`; "off" for none), else
 *  .ptc-emulator/traces under `cwd`. null when they are off. */
function tracesDir(value = process.env[TRACES_ENV], cwd = process.cwd()) {
  const given = value === undefined || value === "" ? DEFAULT_DIR : String(value);
  if (OFF.has(given.trim().toLowerCase())) return null;
  return path.resolve(cwd, given);
}

/** The HTML and JSON files of test `testId`: pytest's rule (its id made readable, and unique by a
 *  short hash of the whole id). */
function tracePaths(directory, testId) {
  const readable =
    testId
      .replace(/[^A-Za-z0-9._-]+/g, "_")
      .replace(/^_+|_+$/g, "")
      .slice(0, 120) || "test";
  const digest = crypto.createHash("sha256").update(testId, "utf8").digest("hex").slice(0, 8);
  const stem = path.join(directory, `${readable}-${digest}`);
  return { html: `${stem}.html`, json: `${stem}.json` };
}

/** Remove the traces an earlier run left in `directory`: only the helper's (and the pytest
 *  plugin's) own files, a JSON named as a trace whose `object` is `emulator.trace`, and its HTML. */
function clearTraces(directory) {
  if (!directory) return;
  let names;
  try {
    names = fs.readdirSync(directory);
  } catch {
    return; // none yet
  }
  for (const name of names) {
    if (!OWN_NAME.test(name)) continue;
    const file = path.join(directory, name);
    let own = false;
    try {
      own = JSON.parse(fs.readFileSync(file, "utf8"))?.object === "emulator.trace";
    } catch {
      continue;
    }
    if (own) {
      fs.rmSync(file.replace(/\.json$/, ".html"), { force: true });
      fs.rmSync(file, { force: true });
    }
  }
}

/** A test's id, as pytest's node ids are made: its file (relative to `cwd`), then each enclosing
 *  describe block and the test's own name, joined by "::". */
function testId(file, names, cwd = process.cwd()) {
  const relative = file ? path.relative(cwd, file).split(path.sep).join("/") : "";
  return [relative, ...names].filter((part) => part !== "").join("::");
}

async function fetched(scope, file, id) {
  const url = `${scope.adminURL}/inspector/${file}?test=${encodeURIComponent(id)}`;
  const reply = await fetch(url, { headers: { authorization: `Bearer ${scope.apiKey}` } });
  const text = await reply.text();
  if (!reply.ok) throw new Error(`GET ${url}: ${reply.status}: ${text.slice(0, 300)}`);
  return text;
}

/** Write the trace of `scope` for test `id` into `directory`; resolves to the two files' paths. */
async function writeTrace(scope, id, directory) {
  const [html, json] = await Promise.all([fetched(scope, "trace.html", id), fetched(scope, "trace.json", id)]);
  const files = tracePaths(directory, id);
  fs.mkdirSync(directory, { recursive: true });
  fs.writeFileSync(files.json, json, "utf8");
  fs.writeFileSync(files.html, html, "utf8");
  return files;
}

/** Write the traces of a failed test's scopes (`claims`: an object kept for that test, so that a
 *  test with several scopes names the first trace after the test, and each other after the test
 *  and its scope). A trace that cannot be written must not hide the failure: it is one line on
 *  stderr, as the written ones are. */
async function traceFailure(scope, test, claims, directory = tracesDir()) {
  if (!directory) return null;
  const names = (claims[CLAIMED] ??= new Set());
  const id = names.size === 0 ? test : `${test}::${scope.name}`;
  names.add(id);
  try {
    const files = await writeTrace(scope, id, directory);
    process.stderr.write(`ptc-emulator trace: ${files.html}\nptc-emulator journal: ${files.json}\n`);
    return files;
  } catch (error) {
    process.stderr.write(`ptc-emulator: no trace written for ${id}: ${error.message}\n`);
    return null;
  }
}

/** Tell the runner's hook about a scope just made (nothing when no hook is installed). */
function announce(scope) {
  const hook = globalThis[ON_SCOPE];
  if (typeof hook !== "function") return;
  try {
    hook(scope);
  } catch {
    // made outside a test (a hook's own rule): no trace for it
  }
}

/** Vitest: each scope made inside a test registers `onTestFailed` (vitest's, given by index.mjs),
 *  which writes its trace if the test fails. */
function hookVitest(onTestFailed) {
  globalThis[ON_SCOPE] = (scope) => {
    if (!tracesDir()) return;
    onTestFailed(async (context) => {
      const task = context.task;
      const names = [];
      for (let suite = task.suite; suite && suite !== task.file && !("filepath" in suite); suite = suite.suite) {
        if (suite.name) names.unshift(suite.name);
      }
      await traceFailure(scope, testId(task.file?.filepath, [...names, task.name]), context);
    });
  };
}

module.exports = {
  DEFAULT_DIR,
  ON_SCOPE,
  TRACES_ENV,
  announce,
  clearTraces,
  hookVitest,
  testId,
  traceFailure,
  tracePaths,
  tracesDir,
  writeTrace,
};
