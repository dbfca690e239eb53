const { startEmulator } = require("ptc-emulator");

// Jest runs this once, in its parent process, before it starts the test workers: the
// PTC_EMULATOR_URL that startEmulator() sets reaches every worker's process.env.
module.exports = async () => {
  await startEmulator();
};
