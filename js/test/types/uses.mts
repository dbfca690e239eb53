// Type-checked by types.test.js (`tsc --noEmit`): the declarations describe the package as used.
import {
  type Call,
  type Emulator,
  type JournalEntry,
  emulatorScope,
  startEmulator,
  stopEmulator,
  TRACES_ENV,
  URL_ENV,
} from "ptc-emulator";

export async function setup(): Promise<string> {
  const emulator: Emulator = await startEmulator({ command: ["ptc-emulator"], args: ["--fixtures", "s"], timeoutMs: 1 });
  const port: number = emulator.port;
  const pid: number | undefined = emulator.pid;
  const url: string = process.env[URL_ENV] ?? emulator.url;
  await stopEmulator();
  await startEmulator({ install: "dist/ptc_emulator-0.1.0-py3-none-any.whl", python: "python3.12", cacheDir: ".cache" });
  await startEmulator({ traces: process.env[TRACES_ENV] ?? "build/traces" });
  return `${url}:${port}:${pid}`;
}

export async function check(): Promise<void> {
  const scope = emulatorScope();
  emulatorScope("named");
  emulatorScope({ name: "named", url: "http://127.0.0.1:1/v1", apiKey: "k" });
  const name: string = await scope.addScenario({ match: { input: "x" }, turns: [{ message: "y" }] });
  await scope.addScenario("name: y\nturns: [{message: z}]\n", { name });
  const env: { OPENAI_BASE_URL: string; OPENAI_API_KEY: string } = scope.env;
  const restore: () => void = scope.applyEnv();
  restore();
  const calls: Call[] = await scope.calls("get_inventory");
  const route: "direct" | "program" = calls[0].route;
  const count: number = await scope.expectCalled("get_inventory", 2);
  await scope.expectCalled("get_inventory", { times: 2, args: { sku: "sku_123" }, route: "program" });
  await scope.expectCalled("get_inventory", { args: (args) => (args as { sku: string }).sku.endsWith("9") });
  const asked: JournalEntry[] = await scope.expectRequests({ times: 1, instructions: /clerk/i, model: "gpt-.*" });
  await scope.expectRequests({ scenario: "x", status: 200, input: "hello", where: (entry) => entry.route.length > 0 });
  await scope.expectAllScenariosUsed();
  await scope.expectNoUnmatched();
  await scope.setHosted({ code_interpreter: [{ code: "sum", logs: "6\n" }] });
  await scope.setHosted(null);
  const entries = await scope.journal();
  const status: number = entries[0].status;
  // @ts-expect-error: the count is a number
  await scope.expectCalled("get_inventory", "2");
  // @ts-expect-error: a route is "direct" or "program"
  await scope.expectCalled("get_inventory", { route: "programmatic" });
  // @ts-expect-error: an instructions pattern is a RegExp or a string
  await scope.expectRequests({ instructions: 3 });
  // @ts-expect-error: a scope's URL is read-only
  scope.baseURL = "elsewhere";
  void [env, route, count, status, asked];
}
