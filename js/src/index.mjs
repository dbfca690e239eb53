// The package for ESM: the CommonJS module's exports, so both share one running server.
import cjs from "./index.cjs";

export const {
  API_KEY_ENV,
  COMMAND_ENV,
  URL_ENV,
  Emulator,
  EmulatorAssertionError,
  EmulatorScope,
  emulatorScope,
  startEmulator,
  stopEmulator,
} = cjs;
