import { startEmulator, stopEmulator } from "ptc-emulator";

// Once per run: `ptc-emulator serve` on a free 127.0.0.1 port (not on PATH: installed on first
// use; PTC_EMULATOR_COMMAND names another command). It sets process.env.PTC_EMULATOR_URL, which
// emulatorScope() reads.
export async function setup({ provide }) {
  const emulator = await startEmulator();
  provide("ptcEmulatorURL", emulator.url); // for tests that prefer inject()
}

export async function teardown() {
  await stopEmulator();
}
