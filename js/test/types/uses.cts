// The same package through require() (Jest's default, CommonJS).
import emulator = require("ptc-emulator");

export async function check(): Promise<number> {
  await emulator.startEmulator();
  const scope: emulator.EmulatorScope = emulator.emulatorScope("named");
  return scope.expectCalled("x");
}
