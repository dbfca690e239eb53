"use strict";
// The package for CommonJS (Jest's default); index.mjs gives the same for ESM.
const server = require("./server.cjs");
const scope = require("./scope.cjs");

module.exports = {
  API_KEY_ENV: server.API_KEY_ENV,
  COMMAND_ENV: server.COMMAND_ENV,
  TRACES_ENV: server.TRACES_ENV,
  URL_ENV: server.URL_ENV,
  Emulator: server.Emulator,
  EmulatorAssertionError: scope.EmulatorAssertionError,
  EmulatorScope: scope.EmulatorScope,
  emulatorScope: scope.emulatorScope,
  startEmulator: server.startEmulator,
  stopEmulator: server.stopEmulator,
};
