const { stopEmulator } = require("ptc-emulator");

module.exports = async () => {
  await stopEmulator();
};
