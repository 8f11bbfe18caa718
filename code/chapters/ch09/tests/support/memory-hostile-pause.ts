// Loaded with --import ahead of the ch09 entry by memory-hostile.test.ts, so the real CLI stops inside the memory
// store's locked read: the first open of a `manifest.json` (the store reads it only while it holds `.memory/.lock`)
// makes the file MEMORY_HOSTILE_PAUSED and waits, on timers so that signals are handled meanwhile, until the file
// MEMORY_HOSTILE_RELEASE exists. Everything else, the CLI's own signal handling included, is the program's.
import { existsSync, writeFileSync } from "node:fs";
import fsp from "node:fs/promises";
import { syncBuiltinESMExports } from "node:module";

const paused = process.env.MEMORY_HOSTILE_PAUSED ?? "";
const release = process.env.MEMORY_HOSTILE_RELEASE ?? "";
const open = fsp.open;
let waited = false;

fsp.open = async (...args: Parameters<typeof open>) => {
  if (!waited && paused !== "" && String(args[0]).endsWith("/manifest.json")) {
    waited = true;
    writeFileSync(paused, "");
    while (!existsSync(release)) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return open(...args);
};
syncBuiltinESMExports();
