// A process inside a memory store operation that holds `.memory/.lock`, for memory-hostile.test.ts to interrupt.
// Usage: node --import tsx memory-hostile-sigint.ts <workspace> <release-file> <cli|bare>
// It adds `gamma` with the id `paused`; when the store opens that record's file, inside the locked section, it
// prints `paused` and waits (on timers, so signals are handled meanwhile) until <release-file> exists, then goes
// on and prints `committed`. Mode `cli` loads the CLI and ends on SIGINT, SIGTERM and SIGHUP as its run does
// (src/cli.ts, exitOnSignals: process.exit with 128 + the signal's number); `bare` adds no handler of its own.
import { existsSync, writeSync } from "node:fs";
import fsp from "node:fs/promises";
import { syncBuiltinESMExports } from "node:module";
import "../../src/cli.js";
import { MemoryRecord, MemoryStore, MemoryType } from "../../src/features/memory.js";

const [workspace = "", release = "", mode = ""] = process.argv.slice(2);

if (mode === "cli") {
  for (const [signal, code] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
    ["SIGHUP", 129],
  ] as const) {
    process.on(signal, () => process.exit(code));
  }
}

const open = fsp.open;
let paused = false;
fsp.open = async (...args: Parameters<typeof open>) => {
  if (!paused && String(args[0]).endsWith("gamma-paused.md")) {
    paused = true;
    writeSync(1, "paused\n");
    while (!existsSync(release)) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return open(...args);
};
syncBuiltinESMExports();

const store = new MemoryStore({ workspace, idGenerator: () => "paused" });
await store.add(
  new MemoryRecord({ name: "gamma", description: "gamma rule", kind: MemoryType.PROJECT, body: "gamma body." }),
);
writeSync(1, "committed\n");
