// Records which snapshot files a process opens, lists or probes through `node:fs`, for the test-plan tracer.
// Plain JavaScript, because a started Node process loads it (child-trace.mjs) before tsx is there to compile.
import { Buffer } from "node:buffer";
import fs from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { resolve } from "node:path";
import { fileURLToPath, URL } from "node:url";

/** The environment variable naming the folder where started processes write what they touched. */
export const TRACE_DIR_VARIABLE = "AGENT_TEST_TRACE_DIR";

/** `code/chapters/` of this checkout, with a trailing separator. */
export const chaptersRoot = fileURLToPath(new URL("../../code/chapters/", import.meta.url));

/**
 * A path inside a snapshot under `root` (by default this checkout's `code/chapters/`), outside the installed
 * packages and build output that no snapshot holds.
 */
export function isSnapshotPath(path, root = chaptersRoot) {
  return path.startsWith(root) && !/(^|[\\/])(node_modules|dist)([\\/]|$)/.test(path.slice(root.length));
}

// Every fs entry point whose first argument names a file or folder to read, open, list or probe (the copy
// functions read their first argument too).
const NAMED = [
  "access",
  "accessSync",
  "copyFile",
  "copyFileSync",
  "cp",
  "cpSync",
  "createReadStream",
  "existsSync",
  "lstat",
  "lstatSync",
  "open",
  "openSync",
  "opendir",
  "opendirSync",
  "readFile",
  "readFileSync",
  "readdir",
  "readdirSync",
  "readlink",
  "readlinkSync",
  "realpath",
  "realpathSync",
  "stat",
  "statSync",
  "watch",
  "watchFile",
];
const NAMED_PROMISES = [
  "access",
  "copyFile",
  "cp",
  "lstat",
  "open",
  "opendir",
  "readFile",
  "readdir",
  "readlink",
  "realpath",
  "stat",
];

function pathOf(argument) {
  if (typeof argument === "string") return argument;
  if (argument instanceof URL) return argument.protocol === "file:" ? fileURLToPath(argument) : undefined;
  if (Buffer.isBuffer(argument)) return argument.toString();
  return undefined;
}

// The wrappers are installed once per process and call whatever recorder was installed last: a test runner
// that loads this module again for every test file must not stack wrappers on wrappers.
const CURRENT = Symbol.for("agent-tutorial.fs-recorder");

/**
 * Makes every snapshot path (absolute) given to the fs entry points go to `onPath`, replacing the recorder an
 * earlier call installed. The wrappers are put in place once, and the ES module bindings updated, so that
 * `import { readFileSync } from "node:fs"` reaches them too.
 */
export function installFsRecorder(onPath) {
  const installed = fs[CURRENT] !== undefined;
  fs[CURRENT] = onPath;
  if (installed) return;
  const record = (argument) => {
    const named = pathOf(argument);
    if (named === undefined) return;
    // resolve() also gives Windows' own separators to a path written with forward slashes.
    const path = resolve(named);
    if (path.startsWith(chaptersRoot)) fs[CURRENT](path);
  };
  for (const [target, names] of [
    [fs, NAMED],
    [fs.promises, NAMED_PROMISES],
  ]) {
    for (const name of names) {
      const original = target[name];
      if (typeof original !== "function") continue;
      const wrapped = function (...args) {
        record(args[0]);
        return original.apply(this, args);
      };
      Object.defineProperties(wrapped, Object.getOwnPropertyDescriptors(original));
      target[name] = wrapped;
    }
  }
  syncBuiltinESMExports();
}
