// Scopes on one server: each client (one given the scoped base URL, a default client reading
// OPENAI_BASE_URL, a child-process agent) sees only its own scope's scenarios, with no header,
// and so does the journal each scope reads.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { emulatorScope } from "ptc-emulator";
import OpenAI from "openai";
import { describe, expect, test } from "vitest";

const answering = (name, text) => ({ name, match: { input: "(?i)which scope" }, turns: [{ message: text }] });

function clientOf(scope) {
  return new OpenAI({ baseURL: scope.baseURL, apiKey: scope.apiKey, maxRetries: 0 });
}

describe("scopes", () => {
  test("two scopes with a scenario of the same name each get their own answer", async () => {
    const a = emulatorScope();
    const b = emulatorScope();
    await a.addScenario(answering("which", "scope A"));
    await b.addScenario(answering("which", "scope B"));

    const [fromA, fromB] = await Promise.all(
      [a, b].map((scope) => clientOf(scope).responses.create({ model: "m", input: "Which scope is this?" })),
    );

    expect([fromA.output_text, fromB.output_text]).toEqual(["scope A", "scope B"]);
    expect((await a.journal()).map((entry) => [entry.scope, entry.scenario])).toEqual([[a.name, "which"]]);
    expect((await b.journal()).map((entry) => [entry.scope, entry.scenario])).toEqual([[b.name, "which"]]);
  });

  test("a scope does not see another scope's scenarios", async () => {
    const owner = emulatorScope();
    const other = emulatorScope();
    await owner.addScenario(answering("owned", "only for the owner"));

    const refused = await clientOf(other)
      .responses.create({ model: "m", input: "Which scope is this?" })
      .catch((e) => e);

    expect(refused.status).toBe(400);
    expect(refused.code).toBe("no_scenario_matched");
    expect(refused.message).not.toContain("owned");
    expect((await other.scenarios()).map((s) => s.name)).not.toContain("owned");
    expect(await owner.journal()).toEqual([]);
    expect((await other.unmatched()).length).toBe(1);
  });

  test("the env gives a default client the scoped URL", async () => {
    const scope = emulatorScope("a-named-scope");
    await scope.reset();
    await scope.addScenario(answering("env", "by the environment"));
    expect(scope.env).toEqual({ OPENAI_BASE_URL: `${scope.rootURL}/scopes/a-named-scope/v1`, OPENAI_API_KEY: scope.apiKey });

    const restore = scope.applyEnv();
    let answer;
    try {
      answer = (await new OpenAI({ maxRetries: 0 }).responses.create({ model: "m", input: "which scope?" })).output_text;
    } finally {
      restore();
    }

    expect(answer).toBe("by the environment");
    expect(process.env.OPENAI_BASE_URL).not.toBe(scope.baseURL);
    await scope.reset();
  });

  test("a scope is named after its test when the runner's global expect knows it", () => {
    globalThis.expect = expect; // as Jest, or Vitest with globals: true, have it
    try {
      expect(emulatorScope().name).toMatch(/^scopes-a-scope-is-named-after-its-test[\w.-]*-[0-9a-f]{12}$/);
    } finally {
      delete globalThis.expect;
    }
    expect(emulatorScope().name).toMatch(/^test-[0-9a-f]{12}$/);
  });

  test("a scope name the URL cannot carry is refused at once", () => {
    expect(() => emulatorScope("has space")).toThrow(/Invalid scope name/);
  });
});

test("two child-process agents in two scopes at once each get their own scenario's answer", async () => {
  const agent = fileURLToPath(new URL("../examples/agent.js", import.meta.url));
  const scopes = [emulatorScope(), emulatorScope()];
  await Promise.all(
    scopes.map((scope, i) =>
      scope.addScenario({
        name: "shortage",
        match: { input: "(?i)shortage", tools: ["get_inventory"] },
        turns: [{ message: `answer ${i}` }],
      }),
    ),
  );

  const answers = await Promise.all(
    scopes.map((scope) =>
      promisify(execFile)(process.execPath, [agent, "Any shortage?"], { env: { ...process.env, ...scope.env } }),
    ),
  );

  expect(answers.map(({ stdout }) => stdout.trim())).toEqual(["answer 0", "answer 1"]);
  for (const scope of scopes) expect((await scope.journal()).map((entry) => entry.scenario)).toEqual(["shortage"]);
});
