// Loaded with --import into every Node process a chapter test starts (trace-setup.ts puts it in NODE_OPTIONS):
// the modules the process loads and the snapshot files it opens go to <trace dir>/<pid>.txt, one path a line,
// written as they happen so that a process killed by a signal has still told what it touched.
import { appendFileSync } from "node:fs";
import { register } from "node:module";
import { join } from "node:path";
import process from "node:process";
import { installFsRecorder, isSnapshotPath, TRACE_DIR_VARIABLE } from "./fs-recorder.mjs";

const dir = process.env[TRACE_DIR_VARIABLE];
if (dir !== undefined && dir !== "") {
  const out = join(dir, `${process.pid}.txt`);
  const seen = new Set();
  installFsRecorder((path) => {
    if (seen.has(path) || !isSnapshotPath(path)) return;
    seen.add(path);
    appendFileSync(out, `${path}\n`);
  });
  register("./child-trace-hooks.mjs", { parentURL: import.meta.url, data: { out } });
}
