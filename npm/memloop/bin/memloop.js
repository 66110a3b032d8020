#!/usr/bin/env node
// Starts the memloop binary from the platform package npm installed next to this one
// (memloop-<platform>-<arch>, an optional dependency that only matches this machine).
"use strict";

const { spawn } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");

// process.platform-process.arch -> the package carrying that binary. Keep in step with
// optionalDependencies in package.json and PLATFORMS in xtask/src/npm.rs.
const PACKAGES = {
  "linux-x64": "memloop-linux-x64",
  "linux-arm64": "memloop-linux-arm64",
  "darwin-x64": "memloop-darwin-x64",
  "darwin-arm64": "memloop-darwin-arm64",
  "win32-x64": "memloop-win32-x64",
};

function fail(message) {
  process.stderr.write(`memloop: ${message}\n`);
  process.exit(1);
}

function binaryPath() {
  const key = `${process.platform}-${process.arch}`;
  const pkg = PACKAGES[key];
  if (!pkg) {
    fail(
      `no prebuilt binary for ${key} (there are: ${Object.keys(PACKAGES).join(", ")}); ` +
        "install from source with `cargo install memloop`",
    );
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    fail(
      `the package ${pkg}, which holds the memloop binary for ${key}, is not installed ` +
        "(optional dependencies skipped, e.g. by --omit=optional or --no-optional?); " +
        "reinstall with `npm install -g memloop`, or use `cargo install memloop`",
    );
  }
  const binary = path.join(dir, "bin", process.platform === "win32" ? "memloop.exe" : "memloop");
  if (!fs.existsSync(binary)) {
    fail(`${pkg} is installed but holds no ${binary}; reinstall with \`npm install -g memloop\``);
  }
  return binary;
}

const binary = binaryPath();
const args = process.argv.slice(2);

// Where Node can, become the binary: the agents' hooks and `memloop serve` then talk to memloop
// itself, with its exit code and signals, and no Node process waits in between.
if (process.platform !== "win32" && typeof process.execve === "function") {
  process.execve(binary, [binary, ...args], process.env);
}

const child = spawn(binary, args, { stdio: "inherit" });
child.on("error", (err) => fail(`could not start ${binary}: ${err.message}`));
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    try {
      child.kill(signal);
    } catch {
      // The child has exited already.
    }
  });
}
child.on("exit", (code, signal) => {
  if (signal) {
    // Exit the way the binary did, so a shell or agent sees the same status.
    process.exitCode = 128 + (os.constants.signals[signal] || 0);
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code === null ? 1 : code);
  }
});
