// A process inside a memory store operation that holds `.memory/.lock`, for memory-hostile.test.ts to interrupt.
// Usage: node --import tsx memory-hostile-sigint.ts <workspace> <release-file> <cli|bare> [record|manifest]
// It adds `gamma` with the id `paused`; when the store, inside the locked section, opens that record's new file
// (`record`, the default: before it is made) or the temporary file of the new manifest (`manifest`: once that is
// made, empty, with the record file and MEMORY.md written), it prints `paused` and waits (on timers, so signals are handled meanwhile) until <release-file>
// exists, then goes on and prints `committed`. Mode `cli` loads the CLI and ends on SIGINT, SIGTERM and SIGHUP as its run does
// (src/cli.ts, exitOnSignals: process.exit with 128 + the signal's number); `bare` adds no handler of its own.
import { existsSync, writeSync } from "node:fs";
import fsp from "node:fs/promises";
import { syncBuiltinESMExports } from "node:module";
import "../../src/cli.js";
import { MemoryRecord, MemoryStore, MemoryType } from "../../src/features/memory.js";

const [workspace = "", release = "", mode = "", at = "record"] = process.argv.slice(2);
const pausesAt = (path: string): boolean =>
  at === "manifest" ? /\/\.manifest\.json\.[0-9a-f]+\.tmp$/.test(path) : path.endsWith("/gamma-paused.md");

if (mode === "cli") {
  for (const [signal, code] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
    ["SIGHUP", 129],
  ] as const) {
    process.on(signal, () => process.exit(code));
  }
}

async function pause(): Promise<void> {
  writeSync(1, "paused\n");
  while (!existsSync(release)) await new Promise((resolve) => setTimeout(resolve, 20));
}

const open = fsp.open;
let paused = false;
fsp.open = async (...args: Parameters<typeof open>) => {
  const here = !paused && pausesAt(String(args[0]));
  paused ||= here;
  // Before the record's file is made; after the manifest's temporary file is made (it is left empty).
  if (here && at === "record") await pause();
  const handle = await open(...args);
  if (here && at === "manifest") await pause();
  return handle;
};
syncBuiltinESMExports();

const store = new MemoryStore({ workspace, idGenerator: () => "paused" });
await store.add(
  new MemoryRecord({ name: "gamma", description: "gamma rule", kind: MemoryType.PROJECT, body: "gamma body." }),
);
writeSync(1, "committed\n");
