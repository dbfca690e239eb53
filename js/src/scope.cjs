"use strict";
// emulatorScope(): one test's view of the emulator, through the scoped URL
// (/scopes/<scope>/v1 and /scopes/<scope>/_emulator), so neither the agent nor this helper sends
// a scope header. Assertions read the journal and throw errors that show what happened instead.

const crypto = require("node:crypto");
const { API_KEY_ENV, DEFAULT_API_KEY, URL_ENV, rootOf } = require("./server.cjs");
const { announce } = require("./traces.cjs");

const SCOPE_PATTERN = /^[A-Za-z0-9_.:@+=-]{1,200}$/;

class EmulatorAssertionError extends Error {
  constructor(message) {
    super(message);
    this.name = "EmulatorAssertionError";
  }
}

function currentTestName() {
  // Jest always, and Vitest with `globals: true`, have a global `expect` that knows the test.
  try {
    return globalThis.expect?.getState?.().currentTestName ?? null;
  } catch {
    return null;
  }
}

function defaultName() {
  const random = crypto.randomBytes(6).toString("hex");
  const slug = (currentTestName() ?? "")
    .replace(/[^A-Za-z0-9_.-]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 60);
  return slug ? `${slug}-${random}` : `test-${random}`;
}

function parsed(text) {
  if (typeof text !== "string") return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The tool calls of one journal entry: those in its response's output, then the calls the
 *  server answered itself (`hosted_calls`: MCP, code interpreter, hosted shell in programs). */
function callsOf(entry, index) {
  const found = [];
  const base = {
    request: index + 1,
    seq: entry.seq,
    responseId: entry.response_id ?? null,
    scenario: entry.scenario ?? null,
  };
  const output = entry.response && Array.isArray(entry.response.output) ? entry.response.output : [];
  for (const item of output) {
    if (typeof item.type !== "string" || !item.type.endsWith("_call")) continue;
    const call = {
      ...base,
      name: item.name ?? item.type.slice(0, -"_call".length),
      type: item.type,
      route: item.caller && item.caller.type === "program" ? "program" : "direct",
      arguments: parsed(item.arguments ?? item.input ?? item.action ?? null),
      callId: item.call_id ?? item.id ?? null,
    };
    if (item.server_label) call.serverLabel = item.server_label;
    found.push(call);
  }
  for (const hosted of entry.hosted_calls ?? []) {
    const call = {
      ...base,
      name: hosted.name ?? hosted.kind,
      type: `${hosted.kind}_call`,
      route: hosted.route === "program" ? "program" : "direct",
      arguments: null,
      callId: null,
    };
    if (hosted.server_label) call.serverLabel = hosted.server_label;
    if (hosted.status) call.status = hosted.status;
    found.push(call);
  }
  return found;
}

function named(call, name) {
  return call.name === name || (call.serverLabel !== undefined && `${call.serverLabel}.${call.name}` === name);
}

function short(value, limit = 200) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > limit ? `${text.slice(0, limit)}...` : text;
}

function times(n) {
  return `${n} time${n === 1 ? "" : "s"}`;
}

/** Whether the JSON value `actual` has all that `expected` says: each of an object's entries
 *  (recursively: `actual` may have more), an array's elements one by one (the same length),
 *  anything else equal. What `match.outputs[].json` means on the server. */
function includes(actual, expected) {
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) return false;
    return expected.every((element, index) => includes(actual[index], element));
  }
  if (expected !== null && typeof expected === "object") {
    if (actual === null || typeof actual !== "object" || Array.isArray(actual)) return false;
    return Object.entries(expected).every(([key, value]) => Object.hasOwn(actual, key) && includes(actual[key], value));
  }
  return actual === expected;
}

function predicateName(fn) {
  return fn.name ? `${fn.name}()` : "the predicate";
}

function regExp(pattern, name) {
  if (pattern instanceof RegExp) return pattern;
  if (typeof pattern === "string") return new RegExp(pattern);
  throw new TypeError(`${name} is a RegExp or a string, not ${JSON.stringify(pattern)}`);
}

function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((part) => part && typeof part === "object" && "text" in part)
    .map((part) => String(part.text))
    .join("\n");
}

/** The request body's `instructions`, then each system or developer message's text. */
function instructionsOf(request) {
  if (!request || typeof request !== "object") return [];
  const found = typeof request.instructions === "string" && request.instructions ? [request.instructions] : [];
  for (const item of Array.isArray(request.input) ? request.input : []) {
    if (item && (item.role === "system" || item.role === "developer")) found.push(textOf(item.content));
  }
  return found;
}

/** The request body's latest user message. */
function latestInput(request) {
  if (!request || typeof request !== "object") return "";
  if (typeof request.input === "string") return request.input;
  const users = (Array.isArray(request.input) ? request.input : []).filter((item) => item && item.role === "user");
  return users.length ? textOf(users.at(-1).content) : "";
}

function quoted(text, limit = 80) {
  return JSON.stringify(text.length <= limit ? text : `${text.slice(0, limit - 3)}...`);
}

function checkTimes(count) {
  if (count !== undefined && !(Number.isInteger(count) && count >= 0)) {
    throw new TypeError(`times is a count (0 or more), not ${JSON.stringify(count)}`);
  }
}

/** What happened in a scope, one request a line and its calls under it (`extra(entry)`: more
 *  lines under a request). */
function describe(scopeName, entries, extra = () => []) {
  if (entries.length === 0) return `No request reached scope '${scopeName}'.`;
  const lines = [`Requests in scope '${scopeName}':`];
  for (const [index, entry] of entries.entries()) {
    let line = `  #${index + 1} ${entry.method} ${entry.path} -> ${entry.status}`;
    const error = entry.response && entry.response.error;
    if (entry.scenario) line += `, scenario '${entry.scenario}'`;
    if (entry.route && entry.route.length) line += `: ${entry.route.join(", ")}`;
    if (error) line += `: ${error.code ?? error.type ?? "error"}: ${short(error.message ?? "", 400)}`;
    lines.push(line);
    for (const call of callsOf(entry, index)) {
      const label = call.serverLabel ? `${call.serverLabel}.${call.name}` : call.name;
      const args = call.arguments === null ? "" : short(call.arguments);
      lines.push(`      ${label}(${args}) [${call.route}${call.status ? `, ${call.status}` : ""}]`);
    }
    for (const line of extra(entry)) lines.push(`      ${line}`);
  }
  return lines.join("\n");
}

class EmulatorScope {
  constructor(name, options = {}) {
    const url = options.url ?? process.env[URL_ENV];
    if (!url) {
      throw new Error(
        `No emulator URL: call startEmulator() in the test runner's global setup (it sets ${URL_ENV}), ` +
          "or pass { url }",
      );
    }
    this.name = name ?? defaultName();
    if (!SCOPE_PATTERN.test(this.name)) {
      throw new Error(`Invalid scope name ${JSON.stringify(this.name)}: 1-200 of letters, digits and _ . : @ + = -`);
    }
    this.rootURL = rootOf(url);
    this.apiKey = options.apiKey ?? process.env[API_KEY_ENV] ?? DEFAULT_API_KEY;
    const prefix = `${this.rootURL}/scopes/${this.name}`;
    this.baseURL = `${prefix}/v1`;
    this.adminURL = `${prefix}/_emulator`;
    this.inspectorURL = `${this.rootURL}/_emulator/ui/#scope=${encodeURIComponent(this.name)}`;
    announce(this); // the runner's hook: if this test fails, this scope's trace is written
  }

  /** The variables the npm and Python SDKs read: a child process given them lands in this scope. */
  get env() {
    return { OPENAI_BASE_URL: this.baseURL, OPENAI_API_KEY: this.apiKey };
  }

  /** Put `env` into `target` (process.env by default); returns a function that puts back what was there. */
  applyEnv(target = process.env) {
    const before = Object.fromEntries(Object.keys(this.env).map((key) => [key, target[key]]));
    Object.assign(target, this.env);
    return () => {
      for (const [key, value] of Object.entries(before)) {
        if (value === undefined) delete target[key];
        else target[key] = value;
      }
    };
  }

  async _admin(method, path, body) {
    const headers = { authorization: `Bearer ${this.apiKey}` };
    // Admin writes must declare JSON (a web page cannot send that without a preflight).
    if (method !== "GET") headers["content-type"] = "application/json";
    const reply = await fetch(`${this.adminURL}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await reply.text();
    const data = text ? JSON.parse(text) : null;
    if (!reply.ok) {
      const message = data && data.error ? data.error.message : text;
      throw new Error(`${method} ${this.adminURL}${path}: ${reply.status}: ${message}`);
    }
    return data;
  }

  /** Add a scenario for this scope: an object, or the text of a YAML scenario file. Returns its name. */
  async addScenario(scenario, options = {}) {
    let body = scenario;
    if (typeof scenario === "string") {
      body = { yaml: scenario };
      if (options.name) body.name = options.name;
    } else if (options.name) {
      body = { ...scenario, name: options.name };
    }
    return (await this._admin("POST", "/scenarios", body)).name;
  }

  async removeScenario(name) {
    await this._admin("DELETE", `/scenarios/${encodeURIComponent(name)}`);
  }

  /** What this scope can match, in matching order: its own scenarios, then the unscoped ones. */
  async scenarios() {
    return (await this._admin("GET", "/scenarios")).data;
  }

  /** This scope's requests and responses, oldest first. */
  async journal() {
    return (await this._admin("GET", "/journal")).data;
  }

  /** The tool calls made in this scope, oldest first; only those of tool `name` if given. */
  async calls(name) {
    const all = (await this.journal()).flatMap(callsOf);
    return name === undefined ? all : all.filter((call) => named(call, name));
  }

  /** The requests no scenario matched (each journal entry, with its near misses). */
  async unmatched() {
    return (await this.journal()).filter((entry) => entry.near_miss != null);
  }

  /** Throws unless tool `name` was called `times` times (at least once when not given): a count,
   *  or `{ times, args, route }`: only the calls whose arguments include `args` (an object's
   *  entries, recursively) or satisfy it (a function of the arguments), made by `route`
   *  ("program" or "direct"). Resolves to how many there were. */
  async expectCalled(name, options) {
    const given = typeof options === "object" && options !== null ? options : { times: options };
    const { times: count, args, route } = given;
    checkTimes(count);
    if (route !== undefined && route !== "program" && route !== "direct") {
      throw new TypeError(`route is "program" or "direct", not ${JSON.stringify(route)}`);
    }
    const entries = await this.journal();
    const of = entries
      .flatMap(callsOf)
      .filter((call) => named(call, name) && (route === undefined || call.route === route));
    const test = args === undefined ? () => true : typeof args === "function" ? args : (value) => includes(value, args);
    const made = of.filter((call) => test(call.arguments)).length;
    const fine = count === undefined ? made > 0 : made === count;
    if (!fine) {
      let wanted = "not to be called";
      if (count !== 0) wanted = `to be called ${count === undefined ? "at least once" : times(count)}`;
      if (route !== undefined) wanted += route === "program" ? " by a program" : " directly";
      if (args !== undefined) {
        wanted +=
          typeof args === "function"
            ? ` with arguments for which ${predicateName(args)} is true`
            : ` with arguments including ${JSON.stringify(args)}`;
      }
      let happened = `it was called ${times(made)}`;
      if (args !== undefined && of.length !== made) happened += ` (${times(of.length)} whatever the arguments)`;
      throw new EmulatorAssertionError(`Expected ${name} ${wanted}, but ${happened}.\n${describe(this.name, entries)}`);
    }
    return made;
  }

  /** Throws unless `times` requests of this scope (at least one when not given) have all that is
   *  given: `instructions` found in the request's instructions or a system or developer message,
   *  `input` in its latest user message, `model` matching its whole model (each a RegExp, or a
   *  string made one), answered by `scenario`, with `status`, `where(entry)` true. Resolves to
   *  those journal entries. */
  async expectRequests(options = {}) {
    const { times: count, instructions, input, model, scenario, status, where } = options;
    checkTimes(count);
    const tests = [];
    if (instructions !== undefined) {
      const pattern = regExp(instructions, "instructions");
      const test = (entry) => instructionsOf(entry.request).some((text) => new RegExp(pattern).test(text));
      tests.push([`whose instructions match ${pattern}`, test]);
    }
    if (input !== undefined) {
      const pattern = regExp(input, "input");
      const test = (entry) => new RegExp(pattern).test(latestInput(entry.request));
      tests.push([`whose latest user message matches ${pattern}`, test]);
    }
    if (model !== undefined) {
      const pattern = regExp(model, "model");
      const whole = new RegExp(`^(?:${pattern.source})$`, pattern.flags.replace("g", ""));
      tests.push([`for model ${pattern}`, (e) => whole.test(String(e.request?.model ?? ""))]);
    }
    if (scenario !== undefined) tests.push([`answered by scenario '${scenario}'`, (e) => e.scenario === scenario]);
    if (status !== undefined) tests.push([`with status ${status}`, (e) => e.status === status]);
    if (where !== undefined) tests.push([`for which ${predicateName(where)} is true`, where]);
    const entries = await this.journal();
    const found = entries.filter((entry) => tests.every(([, test]) => test(entry)));
    const fine = count === undefined ? found.length > 0 : found.length === count;
    if (!fine) {
      let wanted = `exactly ${count} request${count === 1 ? "" : "s"}`;
      if (count === undefined) wanted = "at least one request";
      else if (count === 0) wanted = "no request";
      const kind = tests.map(([label]) => label).join(" and ");
      const numbers = entries.flatMap((entry, index) => (found.includes(entry) ? [`#${index + 1}`] : [])).join(", ");
      let happened = found.length === 0 ? "none did" : `${found.length} did (${numbers})`;
      if (tests.length === 0) happened = `there ${found.length === 1 ? "was" : "were"} ${found.length}`;
      const extra = (entry) => {
        const lines = [];
        if (instructions !== undefined) {
          const said = instructionsOf(entry.request);
          lines.push(`instructions: ${said.length ? said.map((t) => quoted(t)).join("; ") : "(none)"}`);
        }
        if (model !== undefined) lines.push(`model: ${quoted(String(entry.request?.model ?? ""))}`);
        return lines;
      };
      throw new EmulatorAssertionError(
        `Expected ${wanted}${kind ? ` ${kind}` : ""}, but ${happened}.\n${describe(this.name, entries, extra)}`,
      );
    }
    return found;
  }

  /** Throws unless every scenario this scope added was matched by at least one request. */
  async expectAllScenariosUsed() {
    const [scenarios, entries] = await Promise.all([this.scenarios(), this.journal()]);
    const used = new Set(entries.map((entry) => entry.scenario).filter(Boolean));
    const unused = scenarios.filter((s) => s.scope === this.name && !used.has(s.name)).map((s) => s.name);
    if (unused.length) {
      throw new EmulatorAssertionError(
        `Scenario${unused.length === 1 ? "" : "s"} never used: ${unused.map((n) => `'${n}'`).join(", ")}.\n` +
          describe(this.name, entries),
      );
    }
  }

  /** Throws if a request in this scope matched no scenario. */
  async expectNoUnmatched() {
    const entries = await this.journal();
    const missed = [...entries.keys()].filter((index) => entries[index].near_miss != null);
    if (missed.length) {
      throw new EmulatorAssertionError(
        `${missed.length} request${missed.length === 1 ? "" : "s"} matched no scenario: ` +
          `${missed.map((index) => `#${index + 1}`).join(", ")}.\n${describe(this.name, entries)}`,
      );
    }
  }

  /** A readable account of what happened in this scope (what the assertions' messages show). */
  async describe() {
    return describe(this.name, await this.journal());
  }

  /** Results for the tools that run on OpenAI's side (MCP, code interpreter, hosted shell), for
   *  this scope's inline programs and scenarios that script none (docs/tools-hosted.md); null
   *  removes them. */
  async setHosted(script) {
    if (script === null) await this._admin("DELETE", "/hosted");
    else await this._admin("PUT", "/hosted", script);
  }

  async clearJournal() {
    await this._admin("DELETE", "/journal");
  }

  /** Forget this scope's scenarios and journal. */
  async reset() {
    await this._admin("POST", "/reset");
  }
}

/** One test's scope: `emulatorScope()`, `emulatorScope("name")` or `emulatorScope({ name, url, apiKey })`. */
function emulatorScope(name, options) {
  if (name !== null && typeof name === "object") return new EmulatorScope(name.name, name);
  return new EmulatorScope(name, options);
}

module.exports = { EmulatorAssertionError, EmulatorScope, callsOf, emulatorScope };
