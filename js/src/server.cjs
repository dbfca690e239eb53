"use strict";
// startEmulator() / stopEmulator(): the Python server as a child process, for a test runner's
// global setup. It binds a free 127.0.0.1 port itself (`--port 0`) and prints its URL, so no port
// is chosen here and raced for; health is polled before the URL is handed on. Which command runs
// it (one named, `ptc-emulator` on PATH, or an environment made for it): install.cjs.

const { spawn } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const { COMMAND_ENV, resolveCommand } = require("./install.cjs");
const { TRACES_ENV, clearTraces, tracesDir } = require("./traces.cjs");

const URL_ENV = "PTC_EMULATOR_URL";
const API_KEY_ENV = "PTC_EMULATOR_API_KEY";
const DEFAULT_API_KEY = "sk-ptc-emulator";
// Kept on globalThis: a runner may load this module twice (Jest's setup and teardown).
const RUNNING = Symbol.for("ptc-emulator.running");
const LOG_LINES = 200;
const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"];
const TRACES_CLEARED_ENV = "PTC_EMULATOR_TRACES_CLEARED";

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The server's root URL (no /v1) from any of the forms a user may give. */
function rootOf(url) {
  return String(url)
    .replace(/\/+$/, "")
    .replace(/\/v1$/, "");
}

async function health(root, apiKey, timeoutMs = 5000) {
  const reply = await fetch(`${root}/_emulator/health`, {
    headers: { authorization: `Bearer ${apiKey}` },
    signal: AbortSignal.timeout(timeoutMs),
  });
  if (reply.status !== 200) throw new Error(`GET ${root}/_emulator/health answered ${reply.status}`);
  return reply.json();
}

/** The live processes of process group `pgid` (zombies are dead: they wait only to be reaped). */
function groupMembers(pgid) {
  if (process.platform !== "linux") {
    try {
      process.kill(-pgid, 0);
      return [pgid];
    } catch (e) {
      return e.code === "EPERM" ? [pgid] : [];
    }
  }
  const members = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after its last ")".
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(pgrp) === pgid && state !== "Z" && state !== "X") members.push(Number(name));
  }
  return members;
}

function groupAlive(pgid) {
  return groupMembers(pgid).length > 0;
}

function killGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    // the group is gone already
  }
}

class Emulator {
  constructor({ root, apiKey, child, dataDir, log }) {
    /** The server's URL without /v1, e.g. http://127.0.0.1:41234 */
    this.rootURL = root;
    /** The OpenAI base URL, unscoped: http://127.0.0.1:41234/v1 */
    this.url = `${root}/v1`;
    this.port = Number(new URL(root).port);
    this.apiKey = apiKey;
    this.pid = child ? child.pid : undefined;
    this._child = child;
    this.dataDir = dataDir ?? undefined;
    this._log = log;
    const gone = !child || child.exitCode !== null || child.signalCode !== null;
    this._exited = gone ? Promise.resolve() : new Promise((resolve) => child.once("exit", resolve));
    this._onExit = () => this._killNow();
    // The server is in a group of its own, which a terminal's Ctrl-C does not reach: a signal
    // that ends this process ends the server too, then takes its default course unless another
    // listener (the test runner's) handles it.
    this._onSignal = (signal) => {
      this._killNow();
      this._unhook();
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    if (child) {
      process.once("exit", this._onExit);
      for (const signal of SIGNALS) process.on(signal, this._onSignal);
    }
  }

  /** The server's last lines of output (stdout and stderr). */
  log() {
    return this._log.join("\n");
  }

  _running() {
    return this._child != null && this._child.exitCode === null && this._child.signalCode === null;
  }

  _unhook() {
    process.removeListener("exit", this._onExit);
    for (const signal of SIGNALS) process.removeListener(signal, this._onSignal);
  }

  _killNow() {
    // At process exit nothing can be awaited: end the whole group at once.
    if (this.pid !== undefined) killGroup(this.pid, "SIGKILL");
    if (this.dataDir) fs.rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** A graceful stop (SIGTERM to the server), then its process group is waited for; whatever
   *  is still there after `timeoutMs` is killed. Resolves once no process of the group is left. */
  async stop({ timeoutMs = 20000 } = {}) {
    this._unhook();
    if (this._child) {
      if (this._running()) {
        this._child.kill("SIGTERM");
        let timer;
        const late = new Promise((resolve) => {
          timer = setTimeout(() => resolve(false), timeoutMs);
        });
        const done = await Promise.race([this._exited.then(() => true), late]);
        clearTimeout(timer);
        if (!done) killGroup(this.pid, "SIGKILL");
      }
      // The sandbox workers exit by themselves once their pipe to the server closes.
      const deadline = Date.now() + timeoutMs;
      while (groupAlive(this.pid) && Date.now() < deadline) await sleep(25);
      if (groupAlive(this.pid)) {
        killGroup(this.pid, "SIGKILL");
        const end = Date.now() + 10000;
        while (groupAlive(this.pid) && Date.now() < end) await sleep(25);
      }
      await this._exited;
    }
    if (this.dataDir) fs.rmSync(this.dataDir, { recursive: true, force: true });
    if (process.env[URL_ENV] === this.url) {
      if (this._previousURL === undefined) delete process.env[URL_ENV];
      else process.env[URL_ENV] = this._previousURL;
    }
    if (globalThis[RUNNING] === this) delete globalThis[RUNNING];
  }
}

function spawnServer(command, options, apiKey, dataDir) {
  const [file, ...pre] = command;
  const args = [...pre, "serve", "--host", "127.0.0.1", "--port", String(options.port ?? 0)];
  args.push("--store", "memory", "--data-dir", dataDir, "--log-level", options.logLevel ?? "warning");
  if (options.workers !== undefined) args.push("--workers", String(options.workers));
  args.push(...(options.args ?? []));
  const env = { ...process.env, ...(options.env ?? {}) };
  if (options.apiKey !== undefined) env[API_KEY_ENV] = options.apiKey;
  // Its own process group (detached), so that stopping it reaches its workers too.
  const child = spawn(file, args, { cwd: options.cwd, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  return { child, shown: [file, ...args].join(" ") };
}

function waitForURL(child, log, shown, timeoutMs) {
  return new Promise((resolve, reject) => {
    let found = false;
    const tail = () => (log.length ? `\n--- its output ---\n${log.join("\n")}` : " (it printed nothing)");
    const finish = (error, value) => {
      if (found) return;
      found = true;
      clearTimeout(timer);
      if (error) reject(error);
      else resolve(value);
    };
    const timer = setTimeout(() => {
      killGroup(child.pid, "SIGKILL");
      finish(new Error(`\`${shown}\` printed no URL within ${timeoutMs} ms${tail()}`));
    }, timeoutMs);
    const onLine = (line) => {
      log.push(line);
      if (log.length > LOG_LINES) log.shift();
      const seen = /(https?:\/\/(?:127\.0\.0\.1|localhost|\[::1\]):\d+)\/v1\b/.exec(line);
      if (seen) finish(null, seen[1].replace("localhost", "127.0.0.1"));
    };
    for (const stream of [child.stdout, child.stderr]) {
      let rest = "";
      stream.setEncoding("utf8");
      stream.on("data", (chunk) => {
        const lines = (rest + chunk).split("\n");
        rest = lines.pop();
        lines.forEach(onLine);
      });
    }
    child.once("error", (e) => {
      const hint =
        e.code === "ENOENT"
          ? ` (not found: install the ptc-emulator Python package, or set ${COMMAND_ENV} or the \`command\` option)`
          : "";
      finish(new Error(`cannot run \`${shown}\`: ${e.message}${hint}`));
    });
    child.once("exit", (code, signal) => {
      finish(new Error(`\`${shown}\` exited (${signal ?? `status ${code}`}) before serving${tail()}`));
    });
  });
}

/**
 * Start the emulator (or use a running one: `url`, else PTC_EMULATOR_URL when set), wait for its
 * health check, and put its URL in process.env.PTC_EMULATOR_URL for the tests. Calling it again
 * while one runs returns that one.
 */
async function startEmulator(options = {}) {
  const running = globalThis[RUNNING];
  if (running) return running;
  // Once per run: where failed tests' traces go (for the test workers, which inherit the
  // environment), emptied of an earlier run's.
  // A run nested in another (a test that runs a test runner) inherits both variables, and leaves
  // alone what the outer run's failures wrote there.
  const traces = tracesDir(options.traces ?? process.env[TRACES_ENV]);
  process.env[TRACES_ENV] = traces ?? "off";
  if (traces && process.env[TRACES_CLEARED_ENV] !== traces) {
    clearTraces(traces);
    process.env[TRACES_CLEARED_ENV] = traces;
  }
  const apiKey = options.apiKey ?? process.env[API_KEY_ENV] ?? DEFAULT_API_KEY;
  const timeoutMs = options.timeoutMs ?? 60000;
  let emulator;
  const url = options.url || process.env[URL_ENV];
  if (url) {
    const root = rootOf(url);
    const given = options.url ? "the `url` option" : `${URL_ENV} (set in the environment)`;
    await health(root, apiKey).catch((e) => {
      throw new Error(`no emulator answers at ${url}, which ${given} names: ${e.cause?.message ?? e.message}`);
    });
    emulator = new Emulator({ root, apiKey, child: null, dataDir: null, log: [] });
  } else {
    const command = await resolveCommand(options); // may install the server first: not timed
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "ptc-emulator-"));
    const { child, shown } = spawnServer(command, options, apiKey, dataDir);
    const log = [];
    let root;
    try {
      root = await waitForURL(child, log, shown, timeoutMs);
    } catch (e) {
      fs.rmSync(dataDir, { recursive: true, force: true });
      throw e;
    }
    // Not waited for by Node: a run that forgets stopEmulator() still ends (the exit hook kills it).
    child.unref();
    child.stdout.unref?.();
    child.stderr.unref?.();
    emulator = new Emulator({ root, apiKey, child, dataDir, log });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        await health(root, apiKey);
        break;
      } catch (e) {
        if (!emulator._running() || Date.now() > deadline) {
          await emulator.stop({ timeoutMs: 5000 });
          throw new Error(`the emulator at ${root} did not become healthy: ${e.message}\n${emulator.log()}`);
        }
        await sleep(50);
      }
    }
  }
  emulator._previousURL = process.env[URL_ENV];
  process.env[URL_ENV] = emulator.url;
  if (apiKey !== DEFAULT_API_KEY) process.env[API_KEY_ENV] = apiKey;
  globalThis[RUNNING] = emulator;
  return emulator;
}

/** Stop the emulator startEmulator() started (nothing if none runs). */
async function stopEmulator(options) {
  const running = globalThis[RUNNING];
  if (running) await running.stop(options);
}

module.exports = {
  API_KEY_ENV,
  COMMAND_ENV,
  DEFAULT_API_KEY,
  TRACES_ENV,
  URL_ENV,
  Emulator,
  groupMembers,
  rootOf,
  startEmulator,
  stopEmulator,
};
