// The package for ESM: the CommonJS module's exports, so both share one running server.
import cjs from "./index.cjs";
import traces from "./traces.cjs";

export const {
  API_KEY_ENV,
  COMMAND_ENV,
  TRACES_ENV,
  URL_ENV,
  Emulator,
  EmulatorAssertionError,
  EmulatorScope,
  emulatorScope,
  startEmulator,
  stopEmulator,
} = cjs;

// In a Vitest worker: a scope made in a test writes its trace if the test fails (traces.cjs).
if (process.env.VITEST_WORKER_ID !== undefined) {
  try {
    const { onTestFailed } = await import("vitest");
    traces.hookVitest(onTestFailed);
  } catch {
    // vitest not found from here: no traces
  }
}
